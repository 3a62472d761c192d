"""Guardrails and instructions the tests register: they count their runs, trip on a word, or
block until their worker is killed."""
from __future__ import annotations

import os
import threading
import time

import agentq

RUNS: dict[str, int] = {}
_LOCK = threading.Lock()
# released by a test to let `watchful` finish (parallel guardrails)
RELEASE = threading.Event()


def _count(name: str) -> None:
    with _LOCK:
        RUNS[name] = RUNS.get(name, 0) + 1


@agentq.guardrail
def no_secrets(text: str) -> agentq.GuardrailVerdict:
    """Trips on a message that asks for a secret."""
    _count("no_secrets")
    found = "secret" in text.lower()
    return agentq.GuardrailVerdict(tripped=found, info={"matched": "secret"} if found else None)


@agentq.guardrail
async def polite_answer(text: str, ctx: agentq.GuardrailContext) -> agentq.GuardrailVerdict:
    """Trips on a rude answer (async, and reads its context)."""
    _count("polite_answer")
    return agentq.GuardrailVerdict(tripped="rude" in text, info={"phase": ctx.phase,
                                                                  "user": ctx.scope.user})


@agentq.guardrail(parallel=True)
def watchful(text: str) -> bool:
    """A parallel input check that trips on "bad", once the test lets it answer."""
    _count("watchful")
    RELEASE.wait(30)
    return "bad" in text


@agentq.guardrail
def broken(text: str) -> bool:
    """Always raises: a guardrail that cannot answer trips."""
    raise RuntimeError("the checker is down")


@agentq.guardrail(timeout_s=120)
def counted_check(text: str) -> bool:
    """Write one line per run to $AGENTQ_TEST_GUARDRAIL_LOG; on "block", wait to be killed
    (crash tests), unless the log already holds an earlier run."""
    path = os.environ.get("AGENTQ_TEST_GUARDRAIL_LOG")
    if path:
        with open(path, "a") as log:
            log.write(f"{os.getpid()}\n")
        with open(path) as log:
            runs = len(log.readlines())
        if "block" in text and runs == 1:
            time.sleep(110)
    return "forbidden" in text


@agentq.instructions
def for_the_user(ctx: agentq.InstructionsContext) -> str:
    """Instructions that read the acting user."""
    return f"{ctx.system} You are talking to {ctx.scope.user or 'nobody'} of {ctx.tenant}."
