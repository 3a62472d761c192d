"""What a worker does: advance a conversation, run a tool, compact, expire a call, sweep.

Each entry point is load → decide → claim → run → commit (one transaction) and returns
follow-ups; `worker.enqueue` sends them. The steps that run under a claim go through the
one `Lifecycle`; each kind lives in its own module. Nothing here imports Celery, so the
whole runtime runs in tests on SQLite with no broker.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime

from agentq.config import Config
from agentq.core.breaker import BreakerPolicy
from agentq.core.decide import (
    AwaitInput,
    CallModel,
    Decision,
    FailTurn,
    Idle,
    RunTools,
    StartTurn,
    Step,
    Stopped,
    decide,
)
from agentq.core.events import View
from agentq.followups import FollowUp
from agentq.live.announcer import LiveAnnouncer
from agentq.live.pubsub import PubSub
from agentq.process.clock import utcnow
from agentq.providers.breakers import CircuitBreakers, board_for
from agentq.runtime import compact_step, expire_step, model_step, repair, tool_step, turns
from agentq.runtime.context import StepContext
from agentq.runtime.leases import Leases
from agentq.runtime.lifecycle import Lifecycle, wakes_held
from agentq.runtime.model_call import ModelCalls
from agentq.runtime.notices import Notices
from agentq.runtime.seams import NoPolicy, TenantRules
from agentq.runtime.sweeper import Sweeper
from agentq.runtime.timers import Timers
from agentq.runtime.transcripts import Transcripts
from agentq.store import Store
from agentq.tools import Registry

log = logging.getLogger(__name__)


class Runtime:
    """The worker side of agentq, wired to one store, registry, pub/sub and tenant rules."""

    def __init__(
        self,
        *,
        store: Store,
        registry: Registry,
        pubsub: PubSub,
        config: Config,
        rules: TenantRules | None = None,
        clock: Callable[[], datetime] = utcnow,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        """`rules` are what the operator allows each tenant's steps (`agentq.tenancy.rules`;
        None: `NoPolicy`, the built-in providers and no caps). Deltas, retries and new
        events are announced on `pubsub` (`agentq.live.announcer`). `sleep` waits between a
        model call's attempts (None: a wait that an interrupt ends)."""
        self.store = store
        self.registry = registry
        self.pubsub = pubsub
        self.config = config
        self.rules: TenantRules = NoPolicy() if rules is None else rules
        self.clock = clock
        self._sleep = sleep
        self.announcer = LiveAnnouncer(pubsub)
        self.timers = Timers()  # leases and time limits of this process's steps
        self.notices = Notices(self.announcer)  # held by a task while it sends its follow-ups
        # the closed turns of the conversations stepped last, rendered (as many as events kept)
        self.transcripts = Transcripts(config.event_cache, config.event_cache_bytes)
        self._ctx = StepContext(store=store, clock=clock, config=config, notices=self.notices,
                                rules=self.rules, render=self.transcripts.render)
        leases = Leases(store, clock, self.timers, lease_s=config.lease_s)
        self._lifecycle = Lifecycle(self._ctx, leases)
        policy = BreakerPolicy(failures_to_open=config.breaker_failures,
                               open_s=config.breaker_open_s)
        self.breakers = CircuitBreakers(board_for(pubsub.url, pubsub.client, store.breakers), policy, clock)

    def advance(self, conversation_id: str, *, task_id: str | None = None) -> list[FollowUp]:
        """Decide the next step of one conversation and run it (docs/design.md §2).

        `task_id` is the Celery task running this, recorded on the step it claims so the
        ledger and Flower name the same task. What raises before a step is claimed is a
        fault of the step decided, or of the stalled turn's (inv. 12: `Faults.raised_unclaimed`).
        """
        decided: Step | None = None
        try:
            found = self._decide(conversation_id)
            if found is None:
                return []
            view, decision = found
            decided = decision.step if isinstance(decision, CallModel) else None
            return self._take(view, decision, task_id)
        except Exception as exc:  # inv. 12: a fault, counted, never a task lost to Celery
            return self._lifecycle.faults.raised_unclaimed(conversation_id, decided, exc)

    def _decide(self, conversation_id: str) -> tuple[View, Decision] | None:
        """The view and what to do next; a model call's view holds the history it reads."""
        with self.store.log.reader(conversation_id) as reader:
            view = reader.view(turn_only=True)
            if view is None:
                return None
            decision = decide(view)
            # what each advance found to do: an advance that claims nothing leaves no other
            # trace (DEBUG: at the Procfile's INFO it would be a line more per step)
            log.debug("advance: %s", type(decision).__name__, extra={"next_seq": view.last_seq + 1})
            if isinstance(decision, CallModel):  # only a model call pays for reading history
                view = reader.with_history(view)
        return view, decision

    def _take(self, view: View, decision: Decision, task_id: str | None) -> list[FollowUp]:
        """Run the step `decision` names, or write what it says."""
        match decision:
            case Idle() | Stopped():
                return []
            case StartTurn(item=item):
                return turns.start_turn(self._ctx, view, item)
            case CallModel(step=step):
                return model_step.call_model(self._lifecycle, self._model_calls(), self.registry,
                                           view, step, task_id=task_id)
            case RunTools(steps=steps):
                return tool_step.dispatch_tools(view, steps)
            case AwaitInput(expiries=expiries):
                return expire_step.arm_expiries(self._ctx, view, expiries)
            case FailTurn(code=code, message=message):
                return turns.fail_turn(self._ctx, view, code, message)
        raise AssertionError(f"unhandled decision {decision!r}")

    def wakes_held(self) -> AbstractContextManager[list[tuple[str, tuple[str, ...] | None]]]:
        """Hold the wake-ups of the slots freed in the block (`lifecycle.wakes_held`)."""
        return wakes_held()

    def wake(self, freed: list[tuple[str, tuple[str, ...] | None]]) -> list[FollowUp]:
        """What the slots freed under `lifecycle.wakes_held` wake, and the steps this process
        turned away while one ran alone, once it has ended (`Lifecycle.wake`)."""
        return self._lifecycle.wake(freed)

    def run_tool(self, conversation_id: str, tool_call_id: str) -> list[FollowUp]:
        """Run one server tool call once, and commit its result (inv. 3, 5)."""
        return tool_step.run_tool(
            self._lifecycle, self.registry, conversation_id, tool_call_id, self.breakers)

    def compact(self, conversation_id: str, to_seq: int, *, task_id: str | None = None) -> list[FollowUp]:
        """Summarize the log through `to_seq` (the model call waits for it), then advance.
        What raises before the step is claimed is its fault (inv. 12)."""
        try:
            return compact_step.compact(self._lifecycle, self._model_calls(), conversation_id,
                                        to_seq, task_id=task_id)
        except Exception as exc:  # inv. 12
            return self._lifecycle.faults.raised_unclaimed(
                conversation_id, Step.compact(conversation_id, to_seq), exc)

    def expire(self, conversation_id: str, tool_call_id: str) -> list[FollowUp]:
        """Expire a pending call if it is due; re-arm if not (docs/design.md §6, Expiry)."""
        return expire_step.expire(self._ctx, conversation_id, tool_call_id)

    def sweep(self) -> list[FollowUp]:
        """Re-drive what the broker lost: overdue calls, stale steps, stalled conversations."""
        return repair.sweep(self._ctx)

    def sweeper(self, send: Callable[[list[FollowUp]], None]) -> Sweeper:
        """A candidate sweeper that wakes for the next deadline and `send`s what fell due."""
        return Sweeper(self._ctx, send)

    def gc(self, *, keep_s: float = 7 * 24 * 3600) -> int:
        """Drop finished step rows older than `keep_s` and audit rows past their TTL."""
        return repair.gc(self._ctx, keep_s=keep_s)

    def _model_calls(self) -> ModelCalls:
        """How this runtime's steps call models, with the providers it has now."""
        return ModelCalls(rules=self.rules, announcer=self.announcer,
                          count_retry=self.store.steps.add_retry, timers=self.timers,
                          max_attempts=self.config.max_attempts, sleep=self._sleep,
                          delta_window_s=self.config.delta_window_s, breakers=self.breakers)
