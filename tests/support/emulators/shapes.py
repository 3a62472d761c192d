"""Every conversation shape the core can produce, as views to render and send to a provider."""
from __future__ import annotations

from agentq.core.events import View
from tests.core import builders as b


def _round(round_id: str, *call_ids: str, text: str = "", executor: str = "server") -> list:
    drafts = [b.assistant(text, round=round_id)]
    drafts += [b.call(c, round=round_id, executor=executor, args={"city": c}) for c in call_ids]
    return drafts


def _shapes() -> dict[str, View]:
    human = _round("r1", "h1", executor="human") + [b.suspension("h1")]
    return {
        "one_question": b.view(b.log(b.user("Weather in Oslo?"))),
        "multi_tool_rounds": b.view(b.log(
            b.user("Weather in Oslo and Bergen?"), *_round("r1", "c1", "c2", text="Let me check."),
            b.result("c2", "ok", {"temp_c": 9}), b.result("c1", "ok", "sunny"),  # out of order
            *_round("r2", "c3"), b.result("c3", "ok", ["a", 1]),
        )),
        "human_call_resolved": b.view(b.log(
            b.user("Pay 10 EUR"), *human, b.resolution("h1"), b.result("h1", "ok", "approved"),
        )),
        "human_call_expired": b.view(b.log(
            b.user("Pay 10 EUR"), *human, b.resolution("h1", "expired"), b.result("h1", "expired", None),
        )),
        "cancelled_results": b.view(b.log(
            b.user("q1"), *_round("r1", "c1", "c2"), b.result("c1", "cancelled", None),
            b.result("c2", "cancelled", None), b.user("never mind"),
        )),
        "errored_results": b.view(b.log(
            b.user("q1"), *_round("r1", "c1"), b.result("c1", "error", "the tool exploded"),
        )),
        "interrupted_before_a_word": b.view(b.log(
            b.user("q1"), b.assistant("", round="r1", interrupted=True), b.user("q2"),
        )),
        "interrupted_with_open_calls": b.view(b.log(
            b.user("q1"), *_round("r1", "c1", "c2", text="Checking"), b.result("c1", "ok", "done"),
            b.assistant("Half an ans", round="r2", interrupted=True), b.result("c2", "cancelled", None),
            b.user("q2"),
        )),
        "summary_then_a_tool_round": b.view(
            b.log(b.user("q3"), *_round("r9", "c9"), b.result("c9", "ok", "fine"), start_seq=7),
            summary=b.summary(6, "They asked about the weather twice."),
        ),
        "calls_left_open_are_closed": b.view(b.log(b.user("q1"), *_round("r1", "c1", "c2"))),
        "empty_user_text": b.view(b.log(b.user(""))),
        "failed_turn_then_a_new_one": b.view(b.log(
            b.user("q1"), b.error("provider_error", "failed_permanent"), b.user("again please"),
        )),
        "ten_parallel_calls": b.view(b.log(
            b.user("all cities"), *_round("r1", *[f"c{i}" for i in range(10)]),
            *[b.result(f"c{i}", "ok", i) for i in (3, 1, 4, 0, 5, 9, 2, 6, 8, 7)],
        )),
        "raw_arguments_and_unicode": b.view(b.log(
            b.user("Quel temps à Oslo ? 🌧"), b.assistant("", round="r1"),
            b.call("c1", round="r1", args={"__raw__": "{city: Oslo"}),
            b.result("c1", "error", "invalid arguments"),
        ), system="Tu es bref."),
    }


SHAPES = _shapes()
