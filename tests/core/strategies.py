"""Hypothesis strategies for valid conversation logs (turn-ordered, inv. 2).

Closed turns end answered, interrupted or failed; only the last turn may stop anywhere:
tool calls still open, results still missing, or waiting for the model.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

from hypothesis import strategies as st

from agentq.core.events import Event, EventDraft
from tests.core import builders as b

EXECUTORS = ("server", "server", "human", "client")
OUTPUTS = ("sunny", "", None, 3, {"temp_c": 21, "city": "Oslo"}, ["a", 1])
TEXTS = ("", "Let me check.", "Done: it is sunny.", "  ")
EXPIRIES = (None, "2026-11-22T00:00:00.000000Z")
CLOSED_ENDINGS = ("answered", "interrupted", "failed")
LAST_ENDINGS = CLOSED_ENDINGS + ("open_calls", "needs_model")


def _results(rnd: random.Random, calls: list[tuple[str, str]], count: int) -> list[EventDraft]:
    """Results for `count` of the calls, shuffled; a pending call's follows its resolution."""
    drafts = []
    for call_id, executor in rnd.sample(calls, count):
        status = rnd.choice(("ok", "error") if executor == "server" else ("ok", "error", "expired"))
        if executor != "server":
            drafts.append(b.resolution(call_id, "expired" if status == "expired" else "resolved"))
        drafts.append(b.result(call_id, status, rnd.choice(OUTPUTS)))
    return drafts


def _round(
    rnd: random.Random, fresh: Any, *, all_answered: bool
) -> tuple[list[EventDraft], list[str]]:
    """One model round with 1..10 calls; returns its drafts and the calls left open."""
    round_id = fresh("r")
    calls = [(fresh("c"), rnd.choice(EXECUTORS)) for _ in range(rnd.randint(1, 10))]
    drafts = [b.assistant(rnd.choice(TEXTS), round=round_id)]
    for call_id, executor in calls:
        expires = rnd.choice(EXPIRIES) if executor != "server" else None
        drafts.append(
            b.call(
                call_id,
                round=round_id,
                executor=executor,
                args={"n": len(drafts)},
                expires_at=expires,
            )
        )
    if any(executor != "server" for _, executor in calls):
        drafts.append(b.suspension(*(c for c, e in calls if e != "server")))
    answered = len(calls) if all_answered else rnd.randint(0, len(calls) - 1)
    drafts += _results(rnd, calls, answered)
    results = {d.content["tool_call_id"] for d in drafts if d.type == "tool_result"}
    return drafts, [c for c, _ in calls if c not in results]


def _ending(rnd: random.Random, fresh: Any, ending: str, is_last: bool) -> list[EventDraft]:
    if ending == "answered":
        return [b.assistant(rnd.choice(TEXTS), round=fresh("r"))]
    if ending == "needs_model":
        return [b.error("provider_error", "failed_recoverable")] if rnd.random() < 0.3 else []
    partial = ending == "open_calls" or rnd.random() < 0.5
    drafts, still_open = _round(rnd, fresh, all_answered=False) if partial else ([], [])
    if ending == "open_calls":
        return drafts
    if ending == "interrupted":
        drafts.append(b.assistant(rnd.choice(TEXTS), round=fresh("r"), interrupted=True))
        return drafts + [b.result(c, "cancelled", None) for c in still_open]
    drafts.append(b.error("provider_error", rnd.choice(("failed_permanent", "timeout"))))
    # A new turn after a failure first closes what the failed turn left open (inv. 2).
    return drafts + ([] if is_last else [b.result(c, "cancelled", None) for c in still_open])


@st.composite
def conversation_logs(draw: Any, max_turns: int = 5) -> tuple[Event, ...]:
    """A valid log: 1..max_turns turns, 0..3 answered rounds each, then an ending."""
    rnd = random.Random(draw(st.integers(0, 2**32)))  # cheap details; the shape stays shrinkable
    counter = itertools.count(1)

    def fresh(prefix: str) -> str:
        return f"{prefix}{next(counter)}"

    drafts: list[EventDraft] = []
    turns = draw(st.integers(1, max_turns))
    for number in range(turns):
        is_last = number == turns - 1
        drafts.append(b.user(f"question {number}"))
        for _ in range(draw(st.integers(0, 3))):
            drafts += _round(rnd, fresh, all_answered=True)[0]
            if rnd.random() < 0.2:
                drafts.append(b.error("provider_error", "failed_recoverable"))
        drafts += _ending(
            rnd, fresh, draw(st.sampled_from(LAST_ENDINGS if is_last else CLOSED_ENDINGS)), is_last
        )
    return b.log(*drafts)
