"""How fast a dead worker's work moves on with the default settings, and what keeping it so costs.

Prints, with the load average beside each figure:

- takeover: a worker of model calls and tools is SIGKILLed mid-stream and mid-tool at a
  random moment of its lease; seconds from the kill to the claim of each step by a peer
  that was running already, and by a worker started at the kill (its start-up counts);
- expiry lateness: a pending call's ETA task is lost (the timers worker that held it is
  killed and the Redis broker flushed, a new timers worker starts); seconds from the
  call's deadline to its expiry, and the same with the ETA task left alone;
- statements per second that leases and the sweeper cost, in one process holding 1,000
  model calls in flight (their leases kept by the batched keeper, checked for interrupts)
  and with none, counted by kind; beat's sweep is counted once and spread over its period.

    python bench/takeover.py [--rounds 3] [--window-s 30]

Needs PostgreSQL (127.0.0.1:5432) and Redis (127.0.0.1:6379); every database it makes is
dropped at the end.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import random
import socket
import statistics
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402
from sqlalchemy import Engine, event  # noqa: E402

from agentq.commands import Commands  # noqa: E402
from agentq.config import Config  # noqa: E402
from agentq.core.decide import Step  # noqa: E402
from agentq.core.keys import task_id  # noqa: E402
from agentq.live.pubsub import PubSub  # noqa: E402
from agentq.runtime import Runtime  # noqa: E402
from agentq.runtime.leases import Leases  # noqa: E402
from agentq.runtime.model_step import INTERRUPT_CHECK_S  # noqa: E402
from agentq.runtime.timers import Timers  # noqa: E402
from agentq.store import NewStep, Store  # noqa: E402
from agentq.tools import Registry  # noqa: E402
from agentq.core.scope import Scope  # noqa: E402
from agentq.worker.factory import create_celery  # noqa: E402
from agentq.worker.tasks import enqueue  # noqa: E402
from bench.places import REDIS_CLAIM, postgres_database, redis_database  # noqa: E402
from tests.support.processes import WorkerProcess, worker_env  # noqa: E402

SCOPE = Scope(tenant="bench", user="bench")
STEPS = "agentq.model,agentq.tools"
# Long enough to be running still when a peer started after them is ready.
MODEL = [{"text": " ".join(["word"] * 30), "chunks": 30, "delay_s": 30.0}]
TOOL = [{"tool_calls": [{"name": "slow_lookup", "args": {"key": "k", "seconds": 30}}]},
        {"text": "done"}]
WAIT = [{"tool_calls": [{"name": "approve_soon", "args": {"amount": 1}}]}, {"text": "ok"}]


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def wait(condition, timeout_s: float = 90.0, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(0.02)
    raise TimeoutError(what)


def spread(values: list[float]) -> str:
    return (f"median {statistics.median(values):5.2f} s, max {max(values):5.2f} s "
            f"(n={len(values)})")


class Stack:
    """Worker processes on one database and Redis db, with the default lease and sweep."""

    def __init__(self, db_url: str, redis_url: str, log_dir: Path) -> None:
        self.db_url, self.redis_url, self.log_dir = db_url, redis_url, log_dir
        self.tool_log = log_dir / "tool.log"
        self.tool_log.touch()
        self.store = Store.open(db_url)
        self.commands = Commands(self.store, Registry.from_modules(
            ["agentq.tools.demo", "tests.support.tools_for_tests"]))
        self.broker = create_celery(Config(broker_url=redis_url, redis_url=redis_url),
                                    runtime=lambda: None)
        self.started: list[WorkerProcess] = []
        self.spawned: dict[str, float] = {}  # worker name -> when it was started
        self.startups: list[float] = []  # spawn -> answers a ping, of each worker waited for
        self._names = 0

    def worker(self, queues: str) -> WorkerProcess:
        self._names += 1
        env = worker_env(self.db_url, self.redis_url, self.redis_url,
                         AGENTQ_TEST_TOOL_LOG=str(self.tool_log))
        for name in ("AGENTQ_LEASE_S", "AGENTQ_SWEEP_S"):
            env.pop(name, None)
        worker = WorkerProcess(env, self.log_dir / f"w{self._names}.log",
                               name=f"bench{self._names}", queues=queues, concurrency=16).start()
        self.started.append(worker)
        self.spawned[worker.name] = time.monotonic()
        return worker

    def begin(self, script: list[dict]) -> str:
        conv = self.commands.create_conversation(SCOPE, {"script": script})
        _, follow = self.commands.post_message(conv.id, "go", SCOPE)
        enqueue(self.broker, follow)
        return conv.id

    def step(self, cid: str, kind: str):
        return next((s for s in self.store.steps.list_of(cid) if s.kind == kind), None)

    def ready(self, worker: WorkerProcess) -> WorkerProcess:
        """Wait until the worker answers a remote-control ping."""
        node = f"{worker.name}@{socket.gethostname()}"
        wait(lambda: self.broker.control.ping(destination=[node], timeout=0.5), what="ping")
        if (spawned := self.spawned.pop(worker.name, None)) is not None:
            self.startups.append(time.monotonic() - spawned)
        return worker

    def holder(self, workers: list[WorkerProcess], task: str) -> WorkerProcess | None:
        """The worker that holds the ETA task `task` in its memory."""
        nodes = {f"{w.name}@{socket.gethostname()}": w for w in workers}
        scheduled = self.broker.control.inspect(destination=list(nodes), timeout=1).scheduled()
        for node, entries in (scheduled or {}).items():
            if any(entry["request"]["id"] == task for entry in entries):
                return nodes[node]
        return None

    def flush_broker(self) -> None:
        client = redis.Redis.from_url(self.redis_url)
        client.flushdb()
        client.set(REDIS_CLAIM, "bench", ex=3600)
        client.close()

    def close(self) -> None:
        for worker in self.started:
            worker.kill()
        self.broker.close()
        self.store.dispose()


def takeover(stack: Stack, rounds: int) -> None:
    """Kill the worker running both steps; the one that takes them over was running already
    (a peer), or is started at the kill (its start-up counts)."""
    stack.worker("agentq.timers")
    victim = stack.worker(STEPS)
    stack.ready(victim)
    for peer_ready in (True, False):
        stack.startups.clear()
        claims: dict[str, list[float]] = {"llm": [], "tool": []}
        for _ in range(rounds):
            streaming, tooling = stack.begin(MODEL), stack.begin(TOOL)
            wait(lambda: all((s := stack.step(c, k)) and s.status == "running"
                             for c, k in ((streaming, "llm"), (tooling, "tool"))), what="steps")
            if peer_ready:
                successor = stack.ready(stack.worker(STEPS))
            time.sleep(random.uniform(0.0, 0.9))  # anywhere in the tool's second and the lease
            killed_at = utcnow()
            victim.kill()
            if not peer_ready:
                successor = stack.worker(STEPS)
            for cid, kind in ((streaming, "llm"), (tooling, "tool")):
                step = wait(lambda: (s := stack.step(cid, kind)) and s.attempts >= 2 and s,
                            what=f"{kind} takeover")
                claims[kind].append((step.started_at - killed_at).total_seconds())
            victim = stack.ready(successor)  # the turns go on there, beside the next round's
        who = "a peer already running" if peer_ready else "a worker started at the kill"
        print(f"takeover by {who}:")
        print(f"  kill -> its claim of the model call:   {spread(claims['llm'])}  [{load()}]")
        print(f"  kill -> its claim of the tool call:    {spread(claims['tool'])}  [{load()}]")
        if peer_ready:
            print(f"  a worker's start-up, spawn -> answers a ping: {spread(stack.startups)}")


def expiry(stack: Stack, rounds: int) -> None:
    """Two timers workers, as in production; the one holding a call's ETA task is killed and
    the broker flushed, and the other's sweeper expires the call."""
    lost: list[float] = []
    kept: list[float] = []
    timers = [stack.ready(stack.worker("agentq.timers")) for _ in range(2)]
    stack.worker(STEPS)
    for i in range(2 * rounds):
        cid = stack.begin(WAIT)
        (call,) = wait(lambda: stack.store.calls.list_of(cid, status="pending"), what="pending")
        losing = i % 2 == 0
        if losing:
            expire_id = task_id(Step.expire(cid, call.id).key)
            holder = wait(lambda: stack.holder(timers, expire_id), what="the ETA task's holder")
            holder.kill()
            stack.flush_broker()
            timers = [w for w in timers if w is not holder]
        closed = wait(lambda: next((e for e in stack.store.log.list_events(cid)
                                    if e.type == "resolution"), None), what="expiry")
        (lost if losing else kept).append((closed.created_at - call.expires_at).total_seconds())
        if losing:
            timers.append(stack.ready(stack.worker("agentq.timers")))
    print(f"expiry lateness, ETA task lost with its worker and the broker: {spread(lost)}  [{load()}]")
    print(f"expiry lateness, ETA task delivered as sent:                   {spread(kept)}  [{load()}]")


@contextlib.contextmanager
def counted():
    """Every SQL statement this process runs while the block runs, by kind."""
    kinds: Counter[str] = Counter()

    def record(conn, cursor, sql, *args):
        text = " ".join(sql.split())
        if text.startswith("UPDATE steps SET lease_until"):
            kinds["lease renewals"] += 1
        elif text.startswith("SELECT steps.step_key FROM steps"):
            kinds["interrupt checks"] += 1
        elif text.startswith("SELECT (SELECT min(steps.lease_until)"):
            kinds["sweeper wakes"] += 1
        elif text not in ("BEGIN", "COMMIT", "ROLLBACK"):
            kinds["sweeps"] += 1

    event.listen(Engine, "before_cursor_execute", record)
    try:
        yield kinds
    finally:
        event.remove(Engine, "before_cursor_execute", record)


def statements(db_url: str, window_s: float) -> None:
    from agentq.store import migrate

    migrate(db_url)
    config = Config(database_url=db_url)
    store = Store.open(db_url)
    runtime = Runtime(store=store, registry=Registry([]), pubsub=PubSub("embedded://bench"),
                      config=config)
    with counted() as beat:
        runtime.sweep()
    beat_per_s = sum(beat.values()) / config.sweep_s
    for in_flight in (0, 1000):
        with contextlib.ExitStack() as held:
            leases = Leases(store, utcnow, Timers(), lease_s=config.lease_s)
            for i in range(in_flight):
                step = _claimed_model_call(runtime, i)
                held.enter_context(leases.kept(step.key, "bench:1:1", period_s=INTERRUPT_CHECK_S))
            sweeper = runtime.sweeper(lambda due: None)
            sweeper.start()
            time.sleep(1.0)  # it takes the lead and sweeps everything once: not counted
            with counted() as kinds:
                time.sleep(window_s)
            sweeper.stop()
        rates = ", ".join(f"{kind} {n / window_s:.2f}" for kind, n in sorted(kinds.items()))
        print(f"statements/s with {in_flight:4d} model calls in flight: {rates}; "
              f"beat's sweep {beat_per_s:.2f}  [{load()}]")
    store.dispose()


_conversations: list[str] = []


def _claimed_model_call(runtime: Runtime, i: int) -> Step:
    """The i-th model call, claimed by one process: ten per conversation."""
    if i % 10 == 0:
        commands = Commands(runtime.store, runtime.registry)
        _conversations.append(commands.create_conversation(SCOPE, {"script": []}).id)
    cid = _conversations[-1]
    step = Step.model(cid, i % 10)
    runtime.store.steps.schedule_and_claim(
        NewStep.of(step, cid, task_id(step.key), tenant="bench"), worker="bench:1:1",
        lease_s=runtime.config.lease_s, now=utcnow(), max_attempts=5)
    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--window-s", type=float, default=30.0)
    args = parser.parse_args()
    config = Config()
    print(f"defaults: lease {config.lease_s:g} s (renewed every {config.lease_s / 3:g} s), "
          f"beat's sweep every {config.sweep_s:g} s")
    with postgres_database() as db_url:
        statements(db_url, args.window_s)
    for part in (takeover, expiry):
        with postgres_database() as db_url, redis_database() as redis_url, \
                tempfile.TemporaryDirectory() as tmp:
            from agentq.store import migrate

            migrate(db_url)
            stack = Stack(db_url, redis_url, Path(tmp))
            try:
                part(stack, args.rounds)
            finally:
                stack.close()


if __name__ == "__main__":
    main()
