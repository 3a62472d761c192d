"""The task shims: what a task sends after its step, even when the step raised."""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from types import SimpleNamespace

import pytest
from celery import Celery

from agentq.followups import Advance
from agentq.runtime.lifecycle import wakes_held
from agentq.worker import tasks


class RaisingRuntime:
    """A runtime whose step frees its tenant's slot (held by the task), then raises."""

    notices = SimpleNamespace(held=nullcontext)

    def __init__(self) -> None:
        self.freed: list = []

    @contextmanager
    def wakes_held(self) -> Iterator[list]:
        with wakes_held() as freed:
            self.freed = freed
            yield freed

    def advance(self, conversation_id: str, *, task_id: str | None = None) -> list:
        self.freed.append(("acme", None))  # the step's slot is free: a waiting step may run
        raise RuntimeError("the step failed after its slot was freed")

    def wake(self, freed: list) -> list:
        return [Advance(f"waiting-{tenant}") for tenant, _kinds in freed]


def test_a_task_whose_step_raised_still_wakes_the_step_waiting_for_the_slot_it_freed(monkeypatch):
    app = Celery("shims", broker="memory://")
    runtime = RaisingRuntime()
    tasks.register_tasks(app, lambda: runtime, {})
    sent: list = []
    monkeypatch.setattr(tasks, "enqueue", lambda _app, followups, **_kw: sent.extend(followups))
    with pytest.raises(RuntimeError):
        app.tasks["agentq.advance"]("c1")
    assert sent == [Advance("waiting-acme")]
