"""Claiming a step already in the ledger, the way a worker does it."""
from __future__ import annotations

from datetime import datetime

from agentq.store import StepRecord, Store


def claim(store: Store, step_key: str, *, worker: str, lease_s: float, now: datetime,
          max_attempts: int) -> StepRecord | None:
    """`schedule_and_claim_step` with the row's own fields: its conflict branch claims."""
    row = store.load_step(step_key)
    assert row is not None, f"no step {step_key} to claim"
    return store.schedule_and_claim_step(
        step_key=step_key, conversation_id=row.conversation_id, kind=row.kind, ref=row.ref,
        round_id=row.round_id, celery_task_id=row.celery_task_id, worker=worker,
        lease_s=lease_s, now=now, max_attempts=max_attempts,
    )
