"""Loaded into a test's worker (`celery worker --include`): it dies once, right after a step commits.

Crash tests need a kill at an exact instant: after a step's commit, before its follow-ups
are sent, so the step is done and nothing tells another worker to take the next one. A
step task sends its follow-ups only after its transaction commits, so its first publish is
that instant; the sweeper's sends (its own thread, or beat's agentq.sweep task) are not a
step's and never trigger it. The flag file named by CRASH_ONCE_FLAG makes it happen once:
the first worker to reach it removes the file and dies, its replacement survives.
"""
from __future__ import annotations

import os

from celery import signals
from celery._state import get_current_worker_task

STEP_TASKS = frozenset({"agentq.advance", "agentq.run_tool", "agentq.compact", "agentq.expire"})
EXIT_CODE = 137  # as if SIGKILLed


@signals.before_task_publish.connect(weak=False)
def die_before_a_steps_first_follow_up(**_: object) -> None:
    task = get_current_worker_task()
    if task is None or task.name not in STEP_TASKS:
        return
    flag = os.environ.get("CRASH_ONCE_FLAG", "")
    if flag and os.path.exists(flag):
        os.unlink(flag)
        os._exit(EXIT_CODE)
