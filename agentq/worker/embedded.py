"""Embedded mode: a Celery worker on a broker that needs no server, in this process.

The worker runs in the main thread (Celery installs signal handlers there); the caller's
work and the sweeper run beside it in threads. SQLite holds the log, an in-process
Redis carries live notices.
"""
from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING

from celery.exceptions import SecurityWarning

from agentq.agents import CodeAgents
from agentq.agents.catalog import Catalog
from agentq.commands import Commands
from agentq.commands.firing import Firing
from agentq.config import Config
from agentq.process.clock import utcnow
from agentq.runtime import Runtime
from agentq.tenancy.own_keys import OwnKeys
from agentq.tenancy.policy import Policy
from agentq.worker.factory import create_celery
from agentq.worker.signals import connect_process
from agentq.worker.tasks import enqueue
from agentq.worker.wiring import build_runtime, deliveries_for

if TYPE_CHECKING:
    from agentq.webhooks.delivery import Deliveries

log = logging.getLogger(__name__)


class Embedded:
    """Store, runtime, commands and a Celery app wired for one process."""

    def __init__(self, config: Config) -> None:
        self.config = config
        policy = Policy.from_config(config)
        self.runtime: Runtime = build_runtime(config, policy)
        self.webhooks: Deliveries | None = deliveries_for(self.runtime)
        self.runtime.store.migrate()
        agents = CodeAgents.from_modules(list(config.tools), self.runtime.registry)
        self.commands = Commands(
            self.runtime.store, self.runtime.registry,
            close_round=self.runtime.pubsub.close_round, policy=policy,
            catalog=Catalog.published(self.runtime.store, policy.offers_agent, agents, now=utcnow()),
        )
        self.firing = Firing(self.commands, grace_s=config.schedule_grace_s)
        self.own_keys = OwnKeys.from_config(config, self.runtime.store, policy, utcnow)
        self.tool_queues = self.runtime.registry.queues
        self.app = create_celery(config, self.the_runtime, tool_queues=self.tool_queues,
                                 deliveries=self.the_webhooks, firing=self.the_firing)
        self.stopping = threading.Event()
        connect_process(config.log_format)

    def the_runtime(self) -> Runtime:
        """The runtime every task of this process calls."""
        return self.runtime

    def the_webhooks(self) -> Deliveries | None:
        """The webhook sender of this process's tasks (None: no secrets are sealed)."""
        return self.webhooks

    def the_firing(self) -> Firing:
        """What fires the schedules in this process."""
        return self.firing

    def send(self, followups) -> None:
        enqueue(self.app, followups, tool_queues=self.tool_queues)

    def run(self, main: Callable[[Embedded], int], *, concurrency: int = 4) -> int:
        """Run `main` beside a worker and a sweeper; stop both when it returns."""
        quiet_in_process_worker()
        worker = self.app.Worker(
            pool="threads", concurrency=concurrency, loglevel="WARNING", quiet=True,
            without_heartbeat=True, without_mingle=True, without_gossip=True,
        )
        outcome: dict[str, int] = {}

        def drive() -> None:
            try:
                outcome["code"] = main(self)
            except BaseException:
                log.exception("embedded run failed")
                outcome["code"] = 1
            finally:
                self.stopping.set()
                worker.stop(in_sighandler=False)

        sweeper = self.runtime.sweeper(self.send)  # what falls due, when it does
        sweeper.start()
        threading.Thread(target=self._sweep_forever, name="agentq-beat", daemon=True).start()
        if self.webhooks is not None:
            threading.Thread(target=self._relay_forever, name="agentq-webhooks-beat",
                             daemon=True).start()
        threading.Thread(target=self._tick_forever, name="agentq-schedules-beat",
                         daemon=True).start()
        threading.Thread(target=drive, name="agentq-main", daemon=True).start()
        worker.start()
        sweeper.stop()
        self.runtime.store.dispose()
        return outcome.get("code", 1)

    def _sweep_forever(self) -> None:
        """Beat's periodic sweep, which no beat process runs here."""
        while not self.stopping.wait(self.config.sweep_s):
            try:
                self.send(self.runtime.sweep())
            except Exception:
                log.exception("sweep failed")

    def _relay_forever(self) -> None:
        """Beat's webhook relay, which no beat process runs here either."""
        while not self.stopping.wait(self.config.webhook_poll_s):
            try:
                self.app.send_task("agentq.webhooks.relay")
            except Exception:
                log.exception("webhook relay failed")


    def _tick_forever(self) -> None:
        """Beat's schedule tick, run in this process's own thread."""
        while not self.stopping.wait(self.config.schedule_tick_s):
            try:
                self.send(self.firing.tick())
            except Exception:
                log.exception("schedule tick failed")


def quiet_in_process_worker() -> None:
    """Silence what only a server deployment needs to hear, for an embedded worker.

    memory:// has no host, so kombu warns that it "reverts to localhost"; and Celery warns
    about running as root, which concerns a worker that takes tasks from a network broker,
    not one that only serves its own process.
    """
    logging.getLogger("kombu.connection").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", category=SecurityWarning)
