"""The timeline of `agentq inspect` and the notes of `agentq chat`: events as lines, no server."""
from __future__ import annotations

import pytest

from agentq.cli.chat import answer_for, decision_for, parse_settings, reply_for
from agentq.cli.timeline import clip, clock, header, summarize, timeline
from agentq.client.config import endpoint

T1, T2 = "11111111-aaaa-4000-8000-000000000001", "22222222-bbbb-4000-8000-000000000002"
R1, R2 = "r1r1r1r1-0000-4000-8000-000000000001", "r2r2r2r2-0000-4000-8000-000000000002"


def ev(seq, type_, content, turn=T1, round_=None, at="2026-11-21T22:14:03.123456Z"):
    return {"id": f"e{seq}", "seq": seq, "type": type_, "turn_id": turn, "round_id": round_,
            "created_at": at, "content": content}


APPROVAL_TURN = [
    ev(1, "user_msg", {"text": "pay Bob"}),
    ev(2, "assistant_msg", {"text": "Needs approval.", "interrupted": False}, round_=R1),
    ev(3, "tool_call", {"tool_call_id": "call_1", "name": "approve_payment",
                        "args": {"amount": 20, "to": "Bob"}, "executor": "human"}, round_=R1),
    ev(4, "suspension", {"pending": ["call_1"]}, round_=R1),
    ev(5, "resolution", {"tool_call_id": "call_1", "status": "resolved", "by": "alice"}, round_=R1),
    ev(6, "tool_result", {"tool_call_id": "call_1", "status": "ok", "output": {"approved": True}},
       round_=R1),
    ev(7, "assistant_msg", {"text": "Paid.", "interrupted": False}, round_=R2),
    ev(8, "user_msg", {"text": "thanks"}, turn=T2, at="2026-11-22T00:00:01.000001Z"),
    ev(9, "error", {"code": "provider_error", "message": "boom", "step_key": "k",
                    "status": "failed_permanent"}, turn=T2),
]


def test_each_turn_and_round_gets_a_header_with_a_short_id():
    lines = list(timeline(APPROVAL_TURN))
    assert lines[0] == "turn 1 · 11111111 · 2026-11-21"
    assert lines[2] == "  round r1r1r1r1"
    assert "  round r2r2r2r2" in lines
    assert "turn 2 · 22222222 · 2026-11-22" in lines
    assert sum(line.startswith("turn ") for line in lines) == 2
    assert sum(line.startswith("  round ") for line in lines) == 2


def test_every_event_is_one_line_with_its_seq_time_and_type():
    lines = [line for line in timeline(APPROVAL_TURN) if line.strip()[:1].isdigit()]
    assert [int(line.split()[0]) for line in lines] == list(range(1, 10))
    assert lines[0].split()[1:3] == ["22:14:03.123", "user_msg"]
    assert lines[7].split()[1] == "00:00:01.000"


def test_a_tool_result_and_a_resolution_name_the_tool_of_their_call():
    lines = list(timeline(APPROVAL_TURN))
    assert any("tool_call" in l and "approve_payment(amount=20, to='Bob') · human · call_1" in l for l in lines)
    assert any("suspension" in l and "waiting for approve_payment" in l for l in lines)
    assert any("resolution" in l and "approve_payment resolved by alice" in l for l in lines)
    assert any("tool_result" in l and 'approve_payment ok: {"approved":true}' in l for l in lines)


def test_errors_show_their_code_message_and_step_status():
    assert summarize(APPROVAL_TURN[-1]) == "provider_error: boom [failed_permanent]"


def test_an_interrupted_answer_says_so():
    event = ev(2, "assistant_msg", {"text": "Half an ans", "interrupted": True}, round_=R1)
    assert summarize(event) == '"Half an ans" (interrupted)'


def test_a_round_that_returned_reasoning_items_names_them():
    reasoning = [{"provider": "anthropic", "index": 0, "item": {"type": "thinking", "thinking": "hm"}},
                 {"provider": "anthropic", "index": 1, "item": {"type": "redacted_thinking"}}]
    event = ev(2, "assistant_msg", {"text": "Sunny.", "interrupted": False, "reasoning": reasoning},
               round_=R1)
    assert summarize(event) == '"Sunny." · reasoning: thinking, redacted_thinking'


def test_the_summary_span_is_marked_after_its_last_seq():
    lines = list(timeline(APPROVAL_TURN, summary={"from_seq": 1, "to_seq": 7, "version": 2}))
    marker = lines.index("  ── summary v2 stands for seqs 1–7 ──")
    assert lines[marker - 1].split()[0] == "7"


def test_long_and_multiline_text_is_clipped_to_one_line():
    text = "line one\nline two " + "x" * 200
    clipped = clip(text, 40)
    assert len(clipped) == 40 and "\n" not in clipped and clipped.endswith("…")
    assert "⏎" in clipped
    line = summarize(ev(1, "user_msg", {"text": text}))
    assert "\n" not in line and len(line) < 100


def test_clock_is_the_time_of_day_to_the_millisecond():
    assert clock("2026-11-21T22:14:03.123456Z") == "22:14:03.123"


def test_the_header_shows_state_pending_calls_inbox_and_summary():
    conversation = {
        "id": "c1", "state": "awaiting_input", "last_seq": 4, "inbox": 2, "created_at": "x",
        "settings": {"provider": "scripted", "model": "scripted"},
        "pending": [{"tool_call_id": "call_1", "name": "approve_payment", "args": {"amount": 20},
                     "executor": "human", "expires_at": None}],
    }
    lines = header(conversation, {"from_seq": 1, "to_seq": 3, "version": 1, "text": "They said hi."})
    assert lines[0] == "conversation c1"
    assert "state awaiting_input · last seq 4 · scripted/scripted" in lines[1]
    assert any("pending approve_payment(amount=20) · human · call_1" in l for l in lines)
    assert any("inbox 2" in l for l in lines)
    assert lines[-1] == "summary v1 stands for seqs 1–3: They said hi."


@pytest.mark.parametrize("typed, expected", [
    ("a", ("approve", None)),
    (" Yes ", ("approve", None)),
    ("r", ("reject", None)),
    ("no", ("reject", None)),
    ("only 10 euros", ("answer", "only 10 euros")),
    ("   ", None),
])
def test_a_typed_answer_becomes_a_resolution(typed, expected):
    assert answer_for(typed) == expected


@pytest.mark.parametrize("typed, expected", [
    ("a", ("approved", None)),
    ("approve it", None),
    ("r", ("rejected", None)),
    ("reject the lookup said 129.90", ("rejected", "the lookup said 129.90")),
    ("maybe", None),
])
def test_a_typed_decision_on_a_gated_call_approves_or_rejects_with_a_reason(typed, expected):
    assert decision_for(typed) == expected


@pytest.mark.parametrize("typed, expected", [
    ('{"confirm": true}', ("accept", {"confirm": True})),
    ("a", ("accept", None)),
    ("d", ("decline", None)),
    ("no", ("decline", None)),
    ("cancel", ("cancel", None)),
    ('["not", "an", "object"]', None),
    ("sure", None),
])
def test_a_typed_reply_to_a_tool_servers_question_accepts_declines_or_cancels(typed, expected):
    assert reply_for(typed) == expected


def test_a_rejection_reads_as_a_rejection_with_its_reason_in_the_timeline():
    names = {"call_1": "issue_refund"}
    call = {"type": "tool_call", "content": {
        "tool_call_id": "call_1", "name": "issue_refund", "args": {"amount": 1299},
        "executor": "server", "needs_approval": True}}
    rejected = {"type": "resolution", "content": {
        "tool_call_id": "call_1", "status": "rejected", "by": "bob", "reason": "too much"}}
    assert "needs approval" in summarize(call, names)
    assert summarize(rejected, names) == "issue_refund rejected by bob: too much"
    said_no = {"type": "tool_result", "content": {
        "tool_call_id": "call_1", "status": "ok", "output": {"approved": False, "reason": "no"}}}
    assert summarize(said_no, names).startswith("issue_refund rejected:")


def test_settings_come_as_inline_json_or_from_a_file(tmp_path):
    assert parse_settings('{"provider": "scripted"}') == {"provider": "scripted"}
    path = tmp_path / "s.json"
    path.write_text('{"model": "m"}')
    assert parse_settings(f"@{path}") == {"model": "m"}
    with pytest.raises(ValueError, match="not valid JSON"):
        parse_settings("{nope")
    with pytest.raises(ValueError, match="JSON object"):
        parse_settings("[1]")
    with pytest.raises(ValueError, match="cannot read"):
        parse_settings(f"@{tmp_path / 'missing.json'}")


def test_the_endpoint_comes_from_flags_then_the_environment():
    env = {"AGENTQ_API_URL": "http://api:9000/", "AGENTQ_API_KEY": "acme:s3cret"}
    assert endpoint(None, None, env).url == "http://api:9000"
    assert endpoint(None, None, env).key == "s3cret"  # the bootstrap form tenant:secret
    assert endpoint("http://other", "aq_k", env) == endpoint("http://other", "aq_k", {})
    assert endpoint(None, None, {}).url == "http://127.0.0.1:8000"
    assert endpoint(None, None, {}).key is None


def test_a_sub_agents_call_links_to_its_childs_conversation_in_the_timeline():
    call = {"type": "tool_call", "content": {
        "tool_call_id": "call_1", "name": "researcher", "args": {"input": "Oslo?"},
        "executor": "agent", "child_conversation_id": "c0ffee"}}
    assert summarize(call).endswith("agent · call_1 → conversation c0ffee")


def test_a_handoff_names_where_the_conversation_went_and_why():
    by_model = ev(5, "handoff", {"from": "support", "to": "billing", "why": "a refund",
                                 "by": "model"}, round_=R1)
    by_person = ev(9, "handoff", {"from": "billing", "to": "support", "why": "",
                                  "by": "person", "user": "alice"})
    assert summarize(by_model) == "handed off to billing from support: a refund"
    assert summarize(by_person) == "handed off to support from billing by alice"


def test_a_guardrails_verdict_names_its_phase_and_what_it_found():
    tripped = {"type": "guardrail", "content": {"name": "no_pii", "phase": "input",
                                                 "tripped": True, "info": {"pii": "card"}}}
    passed = {"type": "guardrail", "content": {"name": "on_topic", "phase": "output",
                                                "tripped": False, "info": None}}
    assert summarize(tripped) == 'input guardrail no_pii tripped: {"pii":"card"}'
    assert summarize(passed) == "output guardrail on_topic passed"


def test_a_guardrail_agents_verdict_shows_what_its_model_call_spent():
    judged = {"type": "guardrail", "content": {
        "name": "agent:judge", "phase": "input", "tripped": False, "info": {"reason": "fine"},
        "agent": {"name": "judge", "version": 2},
        "usage": {"input_tokens": 120, "output_tokens": 9}, "cost_nanos": 1500}}
    assert summarize(judged) == ('input guardrail agent:judge passed: {"reason":"fine"} '
                                 "[129 tokens, 0.000001500]")
