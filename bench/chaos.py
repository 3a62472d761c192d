"""Chaos on the default deployment: workers SIGKILLed every few seconds, the broker flushed
once, and whether every conversation still finishes, nothing run twice, the logs sound.

Starts the README's deployment (docs/operations.md) on a PostgreSQL database and a Redis db
of their own: the API under gunicorn's gevent worker, `--workers` (2) gevent workers at the
default concurrency (`--pool=gevent --concurrency=1000`, every queue) and one beat, with
every AGENTQ_* setting at its default. `--broker rabbitmq` puts the broker on the local
RabbitMQ in a vhost made for the run (Redis then only carries live updates).

Then `--conversations` (200) clients, each a thread using the SDK (agentq.client) as an
outside user would, run three turns of a scripted model: a tool (`chaos_lookup`), a slow
tool (`chaos_slow`, 2 to 5 s) beside a `once` tool (`chaos_once`, half as long), and a call
waiting for a person (`approve_payment`), approved through the API after 1 to 3 s. A
`chaos_once` call whose worker was killed mid-call waits as `outcome_unknown`; the client
answers it as a person would who can look at the outside world (the ledger of executions):
`ran` when its effect is there, `did_not_run` when it is not. Conversations start over the
first half of the kill window and pause between turns, so messages keep arriving while a killer thread SIGKILLs a random
worker every `--kill-every-s` (5) for `--kill-for-s` (120) and starts it again; halfway
through, the broker is flushed once (FLUSHDB of its Redis db; on RabbitMQ agentq's queues
deleted with their messages). `--cpu-hog N` keeps N processes spinning beside it all.

At the end (every client done, or `--settle-s` after the kills stopped) it reads each
conversation through the API and judges:

- finished: the three turns answered, the conversation idle; anything else is lost;
- given up: a `max_attempts` error in the log (a step abandoned after its faults);
- duplicate results: more than one `tool_result` for one call in a log;
- duplicate executions: a call the tools (bench/chaos_tools.py) saw start again while the
  process of its earlier execution was alive (a re-run after that process was killed is the
  at-least-once docs/tools.md promises, counted as `reruns_after_kill`);
- duplicated once effects: a `chaos_once` call the tools saw start twice (must be 0); the
  `outcome_unknown` calls the clients answered are counted, by answer;
- violations: `agentq check --all` on every log (the invariants of docs/design.md §3);
- recorded, not judged: the steps that died with their worker, those that died twice and so
  ran alone next, and those with a fault counted (five give a step up).

It prints a JSON verdict (also `<out>/verdict.json`, with the machine's load average sampled
through the run) and exits 1 on anything lost, failed, given up, duplicated or violated.
The processes' logs are in `<out>/` (`--worker-log-level INFO` logs each task a worker
receives and each step it claims; DEBUG also what each advance found to do), each lost conversation's log, calls and steps, with what
its client's streams said, in `<out>/lost/<id>.json`, on Redis the tasks delivered and not
yet acknowledged at the end in `<out>/unacked.json`, and the model steps claimed latest
after the event that called for them in `<out>/late_steps.json`.

    nice -n 10 python bench/chaos.py [--conversations 200] [--kill-every-s 5] [--kill-for-s 120]
                                     [--broker redis|rabbitmq] [--cpu-hog 2] [--seed N]

Needs PostgreSQL (127.0.0.1:5432) and Redis (127.0.0.1:6379); RabbitMQ (127.0.0.1:5672,
guest/guest, `rabbitmqctl` on the path) for `--broker rabbitmq`. The database, the Redis db
and the vhost are removed at the end.
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentq.client import Client, Conflict, Turn, TurnResult, Unreachable  # noqa: E402
from bench.places import postgres_database, redis_database  # noqa: E402
from bench.soak import free_port, wait_ready  # noqa: E402
from tests.support.brokers import RABBITMQ_SERVER, add_vhost, delete_vhost, flush_broker  # noqa: E402
from tests.support.processes import stop  # noqa: E402

TURNS = 3
FINAL = "All three done."


def script(slow_s: float) -> list[dict]:
    """The scripted model's six answers: a tool, a slow tool, a person's approval."""
    def said(text: str) -> dict:
        return {"text": text, "chunks": 3, "delay_s": 0.2}
    return [
        {"text": "Looking it up.", "chunks": 2, "delay_s": 0.2,
         "tool_calls": [{"name": "chaos_lookup", "args": {"key": "k"}}]},
        said("Found it."),
        {"text": "This takes a while.", "chunks": 2, "delay_s": 0.2,
         "tool_calls": [{"name": "chaos_slow", "args": {"seconds": slow_s}},
                        {"name": "chaos_once", "args": {"seconds": round(slow_s / 2, 2)}}]},
        said("Worked it out."),
        {"text": "This needs a person.", "chunks": 2, "delay_s": 0.2,
         "tool_calls": [{"name": "approve_payment", "args": {"amount": 5, "to": "Bob"}}]},
        said(FINAL),
    ]


# -- the deployment -------------------------------------------------------------------------

class Deployment:
    """The API, the gevent workers and beat, each in a process group of its own."""

    def __init__(self, env: dict[str, str], port: int, out: Path, workers: int,
                 worker_log_level: str = "WARNING") -> None:
        self.env, self.port, self.out = env, port, out
        self.worker_log_level = worker_log_level
        self.others: dict[str, subprocess.Popen] = {}
        self.workers: list[subprocess.Popen | None] = [None] * workers
        self.killed: dict[int, float] = {}  # pid: when it was killed (unix time)
        self.lock = threading.Lock()

    def _spawn(self, name: str, command: list[str]) -> subprocess.Popen:
        with open(self.out / f"{name}.log", "ab") as log:
            return subprocess.Popen(command, env=self.env, cwd=ROOT, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)

    def start(self) -> None:
        self.others["api"] = self._spawn("api", self.api_command())
        self.start_beat()
        for index in range(len(self.workers)):
            self.start_worker(index)

    def api_command(self, *extra: str) -> list[str]:
        return [sys.executable, "-m", "gunicorn", "-k", "gevent", "--worker-connections", "10000",
                "-b", f"127.0.0.1:{self.port}", "--log-level", "warning", *extra,
                "agentq.web.app:create_app()"]

    def start_beat(self) -> None:
        self.others["beat"] = self._spawn("beat", [
            sys.executable, "-m", "celery", "-A", "agentq.worker:app", "beat", "--loglevel=WARNING",
            f"--schedule={self.out / 'beat-schedule'}"])

    def start_worker(self, index: int) -> None:
        command = [sys.executable, "-m", "celery", "-A", "agentq.worker:app", "worker",
                   "-n", f"chaos{index}@%h", "--pool=gevent", "--concurrency=1000",
                   f"--loglevel={self.worker_log_level}"]
        self.workers[index] = self._spawn(f"worker{index}", command)

    def kill_and_restart(self, index: int) -> int:
        """SIGKILL worker `index` (no shutdown, no ack), then start it again; its old pid."""
        with self.lock:
            proc = self.workers[index]
            assert proc is not None
            self.killed[proc.pid] = time.time()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            self.start_worker(index)
            return proc.pid

    def processes(self) -> dict[str, subprocess.Popen]:
        return {**self.others, **{f"worker{i}": p for i, p in enumerate(self.workers) if p is not None}}

    def stop(self) -> None:
        for proc in self.processes().values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.processes().values():
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)


@contextlib.contextmanager
def broker_place(kind: str, redis_url: str) -> Iterator[str]:
    """The run's broker URL: its Redis db, or a RabbitMQ vhost made for it."""
    if kind == "redis":
        yield redis_url
        return
    vhost = add_vhost()
    try:
        yield f"{RABBITMQ_SERVER}/{vhost}"
    finally:
        delete_vhost(vhost)


@contextlib.contextmanager
def cpu_hogs(count: int) -> Iterator[None]:
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for hog in hogs:
            stop(hog, term_s=5)


# -- the outside users ----------------------------------------------------------------------

class Conversation(threading.Thread):
    """One user: creates a conversation and goes through its three turns."""

    def __init__(self, url: str, key: str, index: int, seed: int, start_s: float, pause_s: float,
                 ledger: Path) -> None:
        super().__init__(daemon=True, name=f"conversation-{index}")
        self.ledger = ledger
        self.settled: collections.Counter[str] = collections.Counter()  # outcome_unknown answers
        self.url, self.key, self.index = url, key, index
        self.random = random.Random(seed * 100_003 + index)
        self.start_s, self.pause_s = start_s, pause_s
        self.id: str | None = None
        self.outcome = "running"
        self.error = ""
        self.seen: list[dict] = []  # what each turn's stream said, for a lost conversation's file
        self.ended_at: float | None = None  # time.monotonic() when its client was done
        self.create_retries = 0

    turns = TURNS

    def settings(self) -> dict:
        """The conversation's settings: its scripted model."""
        return {"script": script(self.random.uniform(2, 5))}

    def run(self) -> None:
        time.sleep(self.random.uniform(0, self.start_s))
        try:
            with Client(self.url, self.key, timeout_s=60) as client:
                self.id = self._create(client, self.settings())
                for turn in range(1, self.turns + 1):
                    if turn > 1:
                        time.sleep(self.random.uniform(0, self.pause_s))
                    if not self._turn(client, turn):
                        return
                self.outcome = "done"
        except Exception as exc:  # noqa: BLE001 - recorded in the verdict; the run goes on
            self.outcome, self.error = "error", f"{type(exc).__name__}: {exc}"[:300]
        finally:
            self.ended_at = time.monotonic()

    def _create(self, client: Client, settings: dict) -> str:
        """A new conversation; asked again when the API closed the connection unanswered (a
        creation has no idempotency key, so the SDK does not: at worst one is left unused)."""
        for _ in range(2):
            try:
                return client.create_conversation(settings).id
            except Unreachable:
                self.create_retries += 1
                time.sleep(1)
        return client.create_conversation(settings).id

    def _turn(self, client: Client, turn: int) -> bool:
        assert self.id is not None
        sent = client.send(self.id, f"Turn {turn}, please.", idempotency_key=f"turn-{turn}")
        return self._follow(client, turn, sent)

    def _follow(self, client: Client, turn: int, sent: Turn) -> bool:
        """Follow a sent turn to its end, answering what waits for a person; True if idle."""
        assert self.id is not None
        result = sent.wait(stop_for_input=True)
        self._saw(turn, sent, result)
        while result.state == "awaiting_input":
            self._person_reads()
            for call in result.pending:
                if call.outcome_unknown is not None:
                    self._settle(client, call.tool_call_id)
                else:
                    client.approve(self.id, call.tool_call_id)
            result = sent.wait(stop_for_input=True)
            self._saw(turn, sent, result)
        if result.state != "idle":
            self.outcome = f"turn {turn} ended {result.state}"
            return False
        return True

    def _person_reads(self) -> None:
        """A person reads what waits for them before answering."""
        time.sleep(self.random.uniform(1, 3))

    def _settle(self, client: Client, call_id: str) -> None:
        """A `once` call whose outcome is unknown: the person looks at the outside world
        (the executions ledger) and says whether it ran."""
        assert self.id is not None
        started = self.ledger.exists() and any(
            line.startswith(f"{call_id} chaos_once ") and line.endswith(" start")
            for line in self.ledger.read_text().splitlines())
        answer = "ran" if started else "did_not_run"
        try:
            client.settle(self.id, call_id, answer, "paid (found in the ledger)" if started else None)
        except Conflict:  # answered already: a pending list read before the answer landed
            return
        self.settled[answer] += 1

    def _saw(self, turn: int, sent: Turn, result: TurnResult) -> None:
        self.seen.append({"turn": turn, "turn_id": sent.turn_id, "queued": sent.queued,
                          "state": result.state, "text": result.text,
                          "seqs": [e.seq for e in result.events], "at": time.strftime("%H:%M:%S")})


# -- the chaos ------------------------------------------------------------------------------

class Killer(threading.Thread):
    """SIGKILLs a random worker every `every_s` for `for_s`, restarting it; flushes the
    broker once, halfway."""

    def __init__(self, deployment: Deployment, broker_url: str, every_s: float, for_s: float,
                 seed: int) -> None:
        super().__init__(daemon=True, name="killer")
        self.deployment, self.broker_url = deployment, broker_url
        self.every_s, self.for_s = every_s, for_s
        self.random = random.Random(seed)
        self.kills: list[tuple[float, int]] = []
        self.flushed_at: float | None = None

    def run(self) -> None:
        began = time.monotonic()
        while (now := time.monotonic() - began) < self.for_s:
            time.sleep(self.every_s)
            index = self.random.randrange(len(self.deployment.workers))
            self.kills.append((round(time.monotonic() - began, 1), self.deployment.kill_and_restart(index)))
            if self.flushed_at is None and now >= self.for_s / 2:
                flush_broker(self.broker_url)
                self.flushed_at = round(time.monotonic() - began, 1)


class Load(threading.Thread):
    """The machine's 1-minute load average, every 5 s."""

    def __init__(self) -> None:
        super().__init__(daemon=True, name="load")
        self.samples: list[float] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(5):
            self.samples.append(os.getloadavg()[0])


# -- the verdict ----------------------------------------------------------------------------

def executions(ledger: Path, killed: dict[int, float]) -> dict[str, int]:
    """Re-runs of tool calls: after their earlier process was killed, or while it lived."""
    started: dict[str, list[tuple[float, int]]] = collections.defaultdict(list)
    once: set[str] = set()  # the calls of `once` tools: any second start duplicates an effect
    if ledger.exists():
        for line in ledger.read_text().splitlines():
            call, tool, pid, at, phase = line.split()
            if phase == "start":
                started[call].append((float(at), int(pid)))
            if tool == "chaos_once":
                once.add(call)
    reruns = duplicates = 0
    once_runs = {call: runs for call, runs in started.items() if call in once}
    for call, runs in started.items():
        if call in once:
            continue
        runs.sort()
        for (_, earlier), (later_at, _) in zip(runs, runs[1:], strict=False):
            if earlier in killed and killed[earlier] <= later_at:
                reruns += 1
            else:
                duplicates += 1
    return {"tool_calls_run": len(started), "reruns_after_kill": reruns, "duplicate_executions": duplicates,
            "once_calls_run": len(once_runs),
            "once_duplicate_effects": sum(len(runs) - 1 for runs in once_runs.values())}


def judge_conversation(client: Client, cid: str, final: str = FINAL) -> dict[str, object]:
    conversation = client.get_conversation(cid)
    events = list(client.iter_events(cid))
    results = collections.Counter(e.content.get("tool_call_id") for e in events if e.type == "tool_result")
    answers = [e for e in events if e.type == "assistant_msg" and not e.content.get("tool_calls")]
    answered = bool(answers) and answers[-1].content.get("text") == final
    return {
        "state": conversation.state,
        "finished": conversation.state == "idle" and answered,
        "given_up": any(e.type == "error" and e.content.get("code") == "max_attempts" for e in events),
        "errors": [e.content.get("code") for e in events if e.type == "error"],
        "duplicate_results": sum(n - 1 for n in results.values() if n > 1),
    }


def write_lost(out: Path, url: str, key: str, database_url: str, people: list[Conversation],
               lost: dict) -> None:
    """Each lost conversation's log, calls and steps, and what its client saw, into
    `<out>/lost/<id>.json`: why it was lost is read there (and in the workers' logs)."""
    from agentq.store import Store

    folder = out / "lost"
    folder.mkdir(exist_ok=True)
    store = Store.open(database_url)
    try:
        with Client(url, key, timeout_s=60) as client:
            for person in people:
                if person.id is None or person.id not in lost:
                    continue
                record = {"client": {"outcome": person.outcome, "error": person.error, "seen": person.seen},
                          "events": [e.model_dump() for e in client.iter_events(person.id)],
                          "tool_calls": [c.model_dump() for c in client.tool_calls(person.id)],
                          "steps": [dataclasses.asdict(step) for step in store.steps.list_of(person.id)]}
                (folder / f"{person.id}.json").write_text(json.dumps(record, indent=1, default=str))
    finally:
        store.dispose()


def unacked(broker_url: str) -> list[dict]:
    """The tasks Redis delivered and no worker acknowledged yet, oldest delivery first: which
    task, for what (its argsrepr), its ETA, and how long ago it was delivered. kombu's Redis
    transport keeps each in the `unacked` hash, by delivery tag, with its delivery time in
    `unacked_index`; a task held in a live worker stays there until that worker acks it,
    one held by a killed worker until the visibility timeout restores it."""
    import redis

    if not broker_url.startswith("redis"):
        return []
    client = redis.Redis.from_url(broker_url)
    try:
        delivered = dict(client.zrange("unacked_index", 0, -1, withscores=True))
        held = client.hgetall("unacked")
    finally:
        client.close()
    now, found = time.time(), []
    for tag, raw in held.items():
        message, _exchange, routing_key = json.loads(raw)
        headers = message.get("headers", {})
        at = delivered.get(tag)
        found.append({"task": headers.get("task"), "id": headers.get("id"),
                      "args": headers.get("argsrepr"), "eta": headers.get("eta"),
                      "queue": routing_key,
                      "delivered_s_ago": None if at is None else round(now - at, 1)})
    return sorted(found, key=lambda f: -(f["delivered_s_ago"] or 0))


def late_steps(database_url: str, *, top: int = 40) -> dict:
    """How long after the event that called for it each model step was first claimed (its
    row is written by its claim, or when its tenant's share left it waiting): the `top`
    latest, with their conversation, task and worker, to line up with the workers' logs."""
    from agentq.store import Store

    store = Store.open(database_url)
    try:
        with store.engine.connect() as conn:
            rows = conn.exec_driver_sql(
                "SELECT s.conversation_id, s.step_key, s.celery_task_id, s.worker, s.status,"
                " s.deaths, s.created_at, s.started_at, e.type, e.created_at"
                " FROM steps s JOIN events e ON e.conversation_id = s.conversation_id"
                " AND e.seq = CAST(s.ref ->> 'after_seq' AS integer)"
                " WHERE s.kind = 'llm'").all()
    finally:
        store.dispose()
    found = sorted(({"conversation_id": r[0], "step_key": r[1], "task_id": r[2], "worker": r[3],
                     "status": r[4], "deaths": r[5], "created_at": str(r[6]),
                     "started_at": str(r[7]), "after": r[8], "after_at": str(r[9]),
                     "late_s": round((r[6] - r[9]).total_seconds(), 2)} for r in rows),
                   key=lambda f: -f["late_s"])
    lates = [f["late_s"] for f in found]
    return {"model_steps": len(found), "over_10_s": sum(1 for x in lates if x > 10),
            "over_30_s": sum(1 for x in lates if x > 30), "latest": found[:top]}


def violations(database_url: str) -> list[str]:
    from agentq.cli.check import check_all
    from agentq.store import Store

    store = Store.open(database_url)
    try:
        return [str(v) for v in check_all(store)]
    finally:
        store.dispose()


def deaths(database_url: str) -> dict[str, int]:
    """What the kills cost the steps: those that died with their worker (and how many of
    them twice, so that they ran alone next), and those with a fault counted."""
    from agentq.store import Store

    store = Store.open(database_url)
    try:
        with store.engine.connect() as conn:
            died, alone, faulted = conn.exec_driver_sql(
                "SELECT count(*) FILTER (WHERE deaths > 0), count(*) FILTER (WHERE deaths >= 2),"
                " count(*) FILTER (WHERE faults > 0) FROM steps").one()
    finally:
        store.dispose()
    return {"steps_died": died, "steps_ran_alone": alone, "steps_with_faults": faulted}


def verdict(args: argparse.Namespace, url: str, key: str, database_url: str, people: list[Conversation],
            deployment: Deployment, killer: Killer, load: Load, ledger: Path, began: float) -> dict:
    """What the run left: read through the API once every client is done (or the deadline)."""
    seconds = time.monotonic() - began
    outcomes = {person.index: (person.outcome, person.error) for person in people}  # before reading
    judged: dict[str, dict] = {}
    with Client(url, key, timeout_s=60) as client:
        for person in people:
            if person.id is not None:
                judged[person.id] = judge_conversation(client, person.id)
    finished = sum(1 for j in judged.values() if j["finished"])
    lost = {p.id or f"#{p.index}": {"client": outcomes[p.index][0], "error": outcomes[p.index][1],
                                    **judged.get(p.id or "", {})}
            for p in people if p.id is None or not judged[p.id]["finished"]}
    clients = collections.Counter(outcome for outcome, _ in outcomes.values())
    ended = [p.ended_at - began for p in people if p.ended_at is not None and p.outcome == "done"]
    return {
        "broker": args.broker, "conversations": args.conversations, "finished": finished,
        "given_up": sum(1 for j in judged.values() if j["given_up"]),
        "failed": sum(1 for j in judged.values() if j["state"] == "failed"),
        "duplicate_results": sum(int(j["duplicate_results"]) for j in judged.values()),
        **executions(ledger, deployment.killed),
        "violations": violations(database_url), **deaths(database_url),
        "clients": dict(clients), "unsettled": clients["running"],
        "create_retries": sum(p.create_retries for p in people),
        "outcome_unknown": dict(sum((p.settled for p in people), collections.Counter())),
        "last_done_s": round(max(ended), 1) if ended else None,
        "kills": len(killer.kills), "flushed_at_s": killer.flushed_at,
        "cpu_hogs": args.cpu_hog, "seconds": round(seconds, 1),
        "load_1min": {"start": load.samples[0] if load.samples else None,
                      "max": max(load.samples, default=None),
                      "mean": round(sum(load.samples) / len(load.samples), 2) if load.samples else None},
        "lost": lost,
    }


def failed(result: dict) -> bool:
    return bool(result["finished"] != result["conversations"] or result["given_up"] or result["failed"]
                or result["duplicate_results"] or result["duplicate_executions"] or result["violations"]
                or result["once_duplicate_effects"])


def deployment_env(database_url: str, broker_url: str, redis_url: str, out: Path
                   ) -> tuple[dict[str, str], Path]:
    """The processes' environment (every setting at its default, the demo and the chaos tools
    on) and the ledger the tools write their executions to, emptied."""
    ledger = out / "executions.txt"
    ledger.unlink(missing_ok=True)
    return {**os.environ, "AGENTQ_DATABASE_URL": database_url, "AGENTQ_BROKER_URL": broker_url,
            "AGENTQ_REDIS_URL": redis_url, "AGENTQ_DEMO": "on",
            "AGENTQ_TOOLS": "agentq.tools.demo,bench.chaos_tools", "AGENTQ_CHAOS_LEDGER": str(ledger),
            "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH")))),
            "PYTHONUNBUFFERED": "1"}, ledger


def run(args: argparse.Namespace, database_url: str, redis_url: str, broker_url: str) -> int:
    from agentq.process.clock import utcnow
    from agentq.store import Store

    store = Store.open(database_url)
    store.migrate()
    _, key = store.keys.create("chaos", utcnow())
    store.dispose()
    env, ledger = deployment_env(database_url, broker_url, redis_url, args.out)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    deployment = Deployment(env, port, args.out, args.workers, args.worker_log_level)
    load = Load()
    load.start()
    try:
        deployment.start()
        wait_ready(port, deployment.processes())
        began = time.monotonic()
        people = [Conversation(url, key, n, args.seed, args.kill_for_s / 2, args.kill_for_s / 4,
                               ledger)
                  for n in range(args.conversations)]
        killer = Killer(deployment, broker_url, args.kill_every_s, args.kill_for_s, args.seed)
        for person in people:
            person.start()
        killer.start()
        killer.join()
        print(f"{len(killer.kills)} kills, broker flushed at {killer.flushed_at} s; settling", flush=True)
        deadline = time.monotonic() + args.settle_s
        for person in people:
            person.join(timeout=max(0.0, deadline - time.monotonic()))
        held = unacked(broker_url)  # before the workers stop
        (args.out / "unacked.json").write_text(json.dumps(held, indent=1))
        result = verdict(args, url, key, database_url, people, deployment, killer, load, ledger, began)
        result["unacked"] = dict(collections.Counter(item["task"] for item in held))
        late = late_steps(database_url)
        (args.out / "late_steps.json").write_text(json.dumps(late, indent=1))
        result["late_model_steps"] = {k: late[k] for k in ("model_steps", "over_10_s", "over_30_s")}
        write_lost(args.out, url, key, database_url, people, result["lost"])
    finally:
        load.done.set()
        deployment.stop()
    (args.out / "verdict.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))
    return 1 if failed(result) else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2, help="gevent workers, every queue each")
    parser.add_argument("--kill-every-s", type=float, default=5.0)
    parser.add_argument("--kill-for-s", type=float, default=120.0)
    parser.add_argument("--settle-s", type=float, default=300.0,
                        help="how long conversations may take to end after the last kill "
                             "(the run goes on as soon as every client is done)")
    parser.add_argument("--broker", choices=("redis", "rabbitmq"), default="redis")
    parser.add_argument("--cpu-hog", type=int, default=0, help="processes spinning beside the run")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--worker-log-level", default="WARNING",
                        help="INFO logs each task a worker receives and each step it claims "
                             "(with its conversation), to line a late step up with its task")
    parser.add_argument("--out", type=Path, default=Path("chaos-out"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with (postgres_database() as database_url, redis_database() as redis_url,
          broker_place(args.broker, redis_url) as broker_url, cpu_hogs(args.cpu_hog)):
        return run(args, database_url, redis_url, broker_url)


if __name__ == "__main__":
    sys.exit(main())
