"""The steps ledger as the store's callers use it: `Steps`, each transition of a step one
short transaction (most of them one statement), and `Leases`, the renewals of a process's
leases on a connection of their own."""
from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from sqlalchemy import Engine

from agentq.core.occurrences import Occurrence
from agentq.store import claims, idle_connections, ledger, waits
from agentq.store.dialects import Dialect
from agentq.store.engine import begin_read, begin_write
from agentq.store.ledger import NewStep, StepRecord
from agentq.store.outbox import record_outbox_txn


class Steps:
    """Schedule, claim, hold, release and read steps; each write is conditional, so a
    claimant that lost a race changes nothing."""

    def __init__(self, engine: Engine, dialect: Dialect) -> None:
        self._engine = engine
        self._dialect = dialect

    def schedule_and_claim(
        self, step: NewStep, *, worker: str, lease_s: float,
        now: datetime | Callable[[], datetime], max_attempts: int, cap: int | None = None,
        alone: bool = False, cap_kinds: tuple[str, ...] | None = None,
    ) -> StepRecord | None:
        """Schedule the step if new and claim it, in one statement (None if it is not ours).

        `alone`: the claimant runs nothing else meanwhile, so it may take a step that must run
        alone (`ledger.runs_alone`), and a death of this attempt is the step's fault.

        With `cap`, the most steps of its tenant (of `cap_kinds`, else of any kind) that may
        run at once: past it, the step is left waiting and comes back with status `waiting`.
        `now` may be the clock, read once a connection is in hand: a lease that started while
        its claim waited for one may run out before its first renewal, and the step is taken
        over again.
        """
        with begin_write(self._engine, one_statement=True) as conn:
            return claims.schedule_and_claim_step_txn(
                conn, step, worker=worker, lease_s=lease_s,
                now=now() if callable(now) else now, max_attempts=max_attempts, cap=cap,
                alone=alone, cap_kinds=cap_kinds,
            )

    def give_up(self, step_key: str, *, max_attempts: int, now: datetime) -> StepRecord | None:
        """Fail a used-up claimable step permanently; the step as given up, only for the one
        caller that did (its `last_error` what it last raised)."""
        with begin_write(self._engine, one_statement=True) as conn:
            return claims.give_up_step_txn(conn, step_key, max_attempts=max_attempts, now=now)

    def fault(self, step: NewStep, *, error: str, now: datetime, retry_at: datetime
              ) -> StepRecord | None:
        """Count a fault of a step whose task raised before claiming it, scheduling it if
        new, held until `retry_at`; the step as counted, or None if this task's raise was
        not its attempt to count (it runs, is done, or is held)."""
        with begin_write(self._engine, one_statement=True) as conn:
            return claims.fault_step_txn(conn, step, error=error, now=now, retry_at=retry_at)

    def heartbeat(self, step_key: str, *, worker: str, lease_s: float, now: datetime) -> bool:
        """Renew the lease to now + `lease_s`; False if the step is no longer ours."""
        with begin_write(self._engine, one_statement=True) as conn:
            return ledger.heartbeat_step_txn(conn, step_key, worker=worker, lease_s=lease_s,
                                             now=now)

    def release(
        self, step_key: str, *, worker: str, status: str, now: datetime, error: str | None = None,
        fault: bool = False,
    ) -> bool:
        """End our attempt as failed_recoverable, failed_permanent, timeout or cancelled;
        with `fault`, the attempt counts against the step (it raised)."""
        with begin_write(self._engine, one_statement=True) as conn:
            return ledger.release_step_txn(
                conn, step_key, worker=worker, status=status, now=now, error=error, fault=fault
            )

    def hold(
        self, step: NewStep, *, until: datetime, reason: str, now: datetime,
        worker: str | None = None, occurrence: Occurrence | None = None,
    ) -> bool:
        """Hold the step until `until`, scheduling it if new; True if the hold moved later.

        With `worker`, the step is ours and running: it is given back first, its attempt
        uncounted. With `occurrence`, the hold's webhook deliveries commit with it.
        """
        with begin_write(self._engine) as conn:
            if worker is None:
                ledger.schedule_step_txn(conn, step, now=now)
            held = ledger.hold_step_txn(conn, step.step_key, until=until, reason=reason,
                                        worker=worker)
            if held and occurrence is not None:
                record_outbox_txn(conn, tenant=step.tenant, conversation_id=step.conversation_id,
                                  occurrences=[occurrence], now=now)
            return held

    def mark_waited_on(self, tenant: str, kinds: tuple[str, ...] | None) -> int:
        """A step of `tenant` was left waiting for a slot (of `kinds`, else of any): mark the
        tenant's running steps, whose commits then read what their freed slots wake
        (`agentq.store.waits`). How many were marked now."""
        with begin_write(self._engine, one_statement=True) as conn:
            return waits.mark_waited_on_txn(conn, tenant, kinds)

    def add_retry(self, step_key: str) -> None:
        """Count one more retry of the step."""
        with begin_write(self._engine, one_statement=True) as conn:
            ledger.add_step_retry_txn(conn, step_key)

    def load(self, step_key: str) -> StepRecord | None:
        with begin_read(self._engine, one_snapshot=False) as conn:
            return ledger.load_step_txn(conn, step_key)

    def list_of(self, conversation_id: str) -> list[StepRecord]:
        """Steps of the conversation, oldest first."""
        with begin_read(self._engine, one_snapshot=False) as conn:
            return ledger.list_steps_txn(conn, conversation_id)

    def delete_finished(self, *, finished_before: datetime) -> int:
        """Delete finished steps (not failed_recoverable ones) older than `finished_before`."""
        with begin_write(self._engine, one_statement=True) as conn:
            return ledger.delete_finished_steps_txn(conn, finished_before=finished_before)


class Leases:
    """The lease keeper's renewals: on a connection of their own where connections are
    pooled, so a renewal does not queue behind the steps of a busy process while their
    leases run out."""

    def __init__(self, engine: Engine, dialect: Dialect) -> None:
        self._engine = engine
        self._dialect = dialect
        self._own: Engine | None = None

    def renew(self, held: list[tuple[str, str]], *, lease_s: float, now: datetime) -> set[str]:
        """Renew the leases of `held` (step_key, worker) to now + `lease_s` in one statement;
        the step keys that are still ours."""
        with begin_write(self._leases(), one_statement=True) as conn:
            return ledger.renew_leases_txn(conn, held, lease_s=lease_s, now=now)

    def list_owned(self, held: list[tuple[str, str]]) -> set[str]:
        """The step keys of `held` (step_key, worker) still running under that worker."""
        with begin_read(self._leases(), one_snapshot=False) as conn:
            return ledger.list_owned_txn(conn, held)

    def dispose(self) -> None:
        """Close the connection of the renewals, if they have one of their own."""
        if self._own is not None and self._own is not self._engine:
            idle_connections.dispose(self._own)

    def _leases(self) -> Engine:
        if self._own is None:
            self._own = self._dialect.lease_engine(self._engine)
        return self._own
