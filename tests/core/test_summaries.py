"""Summary requests: the span as plain text with no tool blocks, in pieces within the budget."""
from __future__ import annotations

from tests.core import builders as b
from agentq.core.compaction import request_tokens
from agentq.core.render import to_anthropic, to_openai
from agentq.core.summaries import SUMMARY_SO_FAR, summary_request, transcript


def tool_turns(count: int, output: str = "9 degrees and rain"):
    drafts = []
    for number in range(count):
        drafts += [b.user(f"weather {number}?"), b.assistant("Checking.", round=f"r{number}"),
                   b.call(f"c{number}", round=f"r{number}", args={"city": "Oslo"}),
                   b.result(f"c{number}", "ok", output), b.assistant("Cold.", round=f"f{number}")]
    return b.log(*drafts)


def test_the_transcript_writes_calls_and_results_as_text_lines():
    view = b.view(tool_turns(1))
    assert transcript(view, view.last_seq).splitlines() == [
        "User: weather 0?",
        "Assistant: Checking.",
        'Assistant called get_weather({"city":"Oslo"}) [c0]',
        "Result of get_weather [c0]: 9 degrees and rain",
        "Assistant: Cold.",
    ]


def test_a_summary_request_holds_no_tool_blocks_and_no_tools():
    view = b.view(tool_turns(2), summary=b.summary(0, "They asked before."))
    request, end = summary_request(view, "They asked before.", transcript(view, 10), 0, budget=None)
    assert end == len(transcript(view, 10)) and request.tools == ()
    assert [m.role for m in request.messages] == ["user"]
    assert request.messages[0].text.startswith(SUMMARY_SO_FAR + "They asked before.")
    wire = to_anthropic(request)
    assert "tools" not in wire and all(isinstance(m["content"], list) for m in wire["messages"])
    assert {block["type"] for m in wire["messages"] for block in m["content"]} == {"text"}
    assert "tools" not in to_openai(request)


def test_a_span_too_long_for_one_request_is_cut_into_pieces_within_the_budget():
    view = b.view(tool_turns(30, output="a long result " * 20), compaction={"max_context_tokens": 400})
    text = transcript(view, view.last_seq)
    pieces, start, summary = [], 0, ""
    while start < len(text):
        request, end = summary_request(view, summary, text, start, budget=400)
        assert request_tokens(request) <= 400 and end > start
        pieces.append(text[start:end])
        start, summary = end, "s" * 2000  # a long running summary is shown shortened
    assert len(pieces) > 3 and "".join(pieces) == text
    assert all(p.endswith("\n") for p in pieces[:-1])  # cut at line breaks
