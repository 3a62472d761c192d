"""Writes only tests make: a claim of a step already in the ledger, a step scheduled but never
claimed, a summary or a cached state put in place without the runtime that would write them.
"""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

from sqlalchemy import update

from agentq.core.events import FsmState
from agentq.store import ConversationTxn, NewStep, StepRecord, Store
from agentq.store.engine import begin_write
from agentq.store.eventlog import save_summary_txn
from agentq.store.ledger import load_step_txn, schedule_step_txn
from agentq.store.schema import conversations


def claim(store: Store, step_key: str, *, worker: str, lease_s: float, now: datetime,
          max_attempts: int, alone: bool = False) -> StepRecord | None:
    """`schedule_and_claim_step` with the row's own fields: its conflict branch claims."""
    row = store.steps.load(step_key)
    assert row is not None, f"no step {step_key} to claim"
    step = NewStep(step_key, row.conversation_id, row.kind, row.ref, row.round_id,
                   row.celery_task_id, row.tenant)
    return store.steps.schedule_and_claim(step, worker=worker, lease_s=lease_s, now=now,
                                          max_attempts=max_attempts, alone=alone)


def schedule_step(store: Store, *, step_key: str, conversation_id: str, kind: str,
                  ref: dict[str, Any], round_id: str | None, celery_task_id: str,
                  now: datetime) -> bool:
    """Record a step as scheduled; False (and nothing changed) if it exists already."""
    conversation = store.conversations.load(conversation_id)
    assert conversation is not None, f"no conversation {conversation_id}"
    step = NewStep(step_key, conversation_id, kind, ref, round_id, celery_task_id,
                   conversation.tenant)
    with begin_write(store.engine) as conn:
        return schedule_step_txn(conn, step, now=now)


def save_summary(store: Store, *, conversation_id: str, from_seq: int, to_seq: int,
                 content: dict[str, Any], version: int, now: datetime) -> bool:
    """Insert a summary; False if one with that `to_seq` exists already."""
    with begin_write(store.engine) as conn:
        return save_summary_txn(
            conn, conversation_id=conversation_id, from_seq=from_seq, to_seq=to_seq,
            content=content, version=version, now=now,
        )


def set_fsm(tx: ConversationTxn, fsm: FsmState, *, now: datetime) -> None:
    """Overwrite the cached state in the locked transaction (agentq only folds the log into it)."""
    tx._conn.execute(
        update(conversations)
        .where(conversations.c.id == tx.conversation.id)
        .values(fsm_state=fsm.to_json(), updated_at=now)
    )
    tx.conversation = replace(tx.conversation, fsm=fsm, updated_at=now)


def load_step_in(tx: ConversationTxn, step_key: str) -> StepRecord | None:
    """The ledger row as the locked transaction sees it, its own writes included."""
    return load_step_txn(tx._conn, step_key)
