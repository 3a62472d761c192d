"""Rolling deploys under a steady load: every process restarted with SIGTERM in turn, and
whether any turn was given up, stuck or duplicated, what it did to turn latency, and what
the stream clients saw.

Starts the deployment of bench/chaos.py (the README's: gevent workers at the default
concurrency, beat, on a PostgreSQL database and a Redis db of their own, `--broker rabbitmq`
on a RabbitMQ vhost made for the run), with `--apis` (2) API processes under gunicorn's
gevent worker sharing one port (`--reuse-port`, as behind a load balancer: one answers
while the other restarts).

The load: `--clients` (20) users, each a thread using the SDK, run conversations of three
turns one after another. Each turn calls a tool (`chaos_lookup`), a slow tool (`chaos_slow`,
1 to 3 s) beside a `once` tool (`chaos_once`, half as long) and a sub-agent (`helper`, whose
answer streams), then a call waiting for a person (`approve_payment`, approved through the
API after 1 to 3 s), then streams its answer. Beside each turn's client a stream client
(a second SDK client) reads the turn's stream to its end; it records how many connections
it took (a restarted API drops them: the SDK resumes with Last-Event-ID), any event it
missed or got twice (against the log), and for each streamed round whether the deltas it
handed out add up to the round's text ("whole"), to a beginning of it (it reconnected
after the round ended: the rest is in the event) or to anything else ("garbled": a delta
twice or one missing).

The deploy: after `--quiet-s` (60) of load alone, every `--restart-every-s` (30) for
`--minutes` (10) the next process in turn (worker 0, worker 1, ..., API 0, API 1, ...) gets
SIGTERM; the bench waits for it to exit, SIGKILLs it if it took longer than `--grace-s`
(60; counted), and starts a new one. Then the clients finish the conversation they are in
and stop (`--settle-s` at most).

It prints a JSON verdict (also `<out>/verdict.json`), judged as bench/chaos.py judges:

- given up: a `max_attempts` error in a conversation's log;
- stuck: a conversation not idle with its last answer at the end (or its client still
  waiting), or a client that failed;
- duplicated: a tool result twice for one call, a tool call started again while its first
  process lived, a `once` call started twice;
- steps run more than once (claimed more than once: a stop that handed a step back, or
  killed it), tool calls re-run after their process stopped, and the invariants of
  `agentq check --all`;
- turn latency p50/p99, without the person's reading time, of the turns that started in the
  quiet period, during the restarts and after;
- each restart: the process, old and new pid, how long it took to exit, and whether it
  went over the grace period; and the messages the stopped workers handed back to the
  broker unstarted (on Redis: kombu's count in their logs, at the default
  `--worker-log-level INFO`; RabbitMQ requeues them itself, unlogged);
- the stream clients' figures, and the machine's load average through the run.

It exits 1 on anything given up, stuck, duplicated, violated or garbled, or a stream that
missed an event.

    nice -n 10 python bench/deploy.py [--minutes 10] [--restart-every-s 30] [--clients 20]
                                      [--workers 2] [--apis 2] [--broker redis|rabbitmq]

Needs what bench/chaos.py needs. The database, the Redis db and the vhost are removed at the end.
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentq import api  # noqa: E402
from agentq.client import Client, Turn  # noqa: E402
from bench.chaos import (  # noqa: E402
    Conversation,
    Deployment,
    Load,
    broker_place,
    deaths,
    deployment_env,
    executions,
    judge_conversation,
    violations,
    write_lost,
)
from bench.places import postgres_database, redis_database  # noqa: E402
from bench.soak import free_port, wait_ready  # noqa: E402

RESTORED = re.compile(r"Restoring (\d+) unacknowledged message")
TURNS = 3
HELPER = "helper"
LAST = f"Turn {TURNS} done: the lookup, the work, the helper's part and the payment are all in."


def answer(turn: int) -> str:
    return f"Turn {turn} done: the lookup, the work, the helper's part and the payment are all in."


def script(slow_s: float) -> list[dict]:
    """The scripted model's answers, three a turn: tools and a sub-agent, a person's approval,
    a streamed answer."""
    answers = []
    for turn in range(1, TURNS + 1):
        answers += [
            {"text": "Looking it up, working it out and asking the helper.", "chunks": 3, "delay_s": 0.1,
             "tool_calls": [{"name": "chaos_lookup", "args": {"key": f"k{turn}"}},
                            {"name": "chaos_slow", "args": {"seconds": slow_s}},
                            {"name": "chaos_once", "args": {"seconds": round(slow_s / 2, 2)}},
                            {"name": HELPER, "args": {"input": f"part {turn}"}}]},
            {"text": "This needs a person.", "chunks": 2, "delay_s": 0.1,
             "tool_calls": [{"name": "approve_payment", "args": {"amount": 5, "to": "Bob"}}]},
            {"text": answer(turn), "chunks": 8, "delay_s": 0.15},
        ]
    return answers


# -- the deployment -------------------------------------------------------------------------

class RollingDeployment(Deployment):
    """bench/chaos.py's deployment with `apis` API processes on one port, each process
    stopped with SIGTERM and started again in turn."""

    def __init__(self, env: dict[str, str], port: int, out: Path, workers: int, apis: int,
                 grace_s: float, worker_log_level: str = "WARNING") -> None:
        super().__init__(env, port, out, workers, worker_log_level)
        self.apis, self.grace_s = apis, grace_s

    def start(self) -> None:
        for index in range(self.apis):
            self.start_api(index)
        self.start_beat()
        for index in range(len(self.workers)):
            self.start_worker(index)

    def start_api(self, index: int) -> None:
        self.others[f"api{index}"] = self._spawn(f"api{index}", self.api_command("--reuse-port"))

    def order(self) -> list[str]:
        """The processes a deploy restarts, in turn: the workers, then the APIs."""
        return [f"worker{i}" for i in range(len(self.workers))] + [f"api{i}" for i in range(self.apis)]

    def restart(self, name: str) -> dict:
        """SIGTERM `name` (its main process, as an orchestrator does), wait for it to exit
        (SIGKILL after the grace period), start a new one; what happened."""
        with self.lock:
            proc = self.processes()[name]
            began = time.monotonic()
            os.kill(proc.pid, signal.SIGTERM)
            exceeded = False
            try:
                proc.wait(timeout=self.grace_s)
            except subprocess.TimeoutExpired:
                exceeded = True
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
            took = time.monotonic() - began
            # a tool call started again after its process stopped is a re-run, not a duplicate
            self.killed[proc.pid] = time.time()
            if name.startswith("worker"):
                self.start_worker(int(name.removeprefix("worker")))
            else:
                self.start_api(int(name.removeprefix("api")))
            return {"process": name, "old_pid": proc.pid, "new_pid": self.processes()[name].pid,
                    "exit_code": proc.returncode, "stop_s": round(took, 2), "over_grace": exceeded}


class Restarts(threading.Thread):
    """Every `every_s` for `for_s`, the next process in the deployment's order restarted."""

    def __init__(self, deployment: RollingDeployment, every_s: float, for_s: float) -> None:
        super().__init__(daemon=True, name="restarts")
        self.deployment, self.every_s, self.for_s = deployment, every_s, for_s
        self.done: list[dict] = []

    def run(self) -> None:
        began = time.monotonic()
        order = self.deployment.order()
        for n in range(max(1, int(self.for_s // self.every_s))):
            time.sleep(max(0.0, began + (n + 1) * self.every_s - time.monotonic()))
            record = self.deployment.restart(order[n % len(order)])
            record["at_s"] = round(time.monotonic() - began, 1)
            self.done.append(record)
            print(f"restart {n + 1}: {json.dumps(record)}", flush=True)


# -- the users and their stream clients -----------------------------------------------------

class StreamWatch(threading.Thread):
    """An SDK client reading one turn's stream to its end, counting its connections."""

    def __init__(self, url: str, key: str, conversation_id: str, turn_id: str) -> None:
        super().__init__(daemon=True, name=f"stream-{turn_id}")
        self.url, self.key, self.conversation_id, self.turn_id = url, key, conversation_id, turn_id
        self.connections = 0
        self.seqs: list[int] = []
        self.texts: dict[str, dict[int, str]] = collections.defaultdict(dict)  # round: attempt: text
        self.end: str | None = None
        self.error = ""

    def run(self) -> None:
        try:
            with Client(self.url, self.key, timeout_s=60) as client:
                turn = client.turn(self.conversation_id, self.turn_id)
                self._count_connections(turn)
                for item in turn.stream():
                    if isinstance(item, api.EventOut):
                        self.seqs.append(item.seq)
                    elif isinstance(item, api.StreamDelta):
                        texts = self.texts[item.round_id]
                        texts[item.attempt] = texts.get(item.attempt, "") + item.text
                    elif isinstance(item, api.StreamEnd):
                        self.end = item.state
        except Exception as exc:  # noqa: BLE001 - recorded in the verdict
            self.error = f"{type(exc).__name__}: {exc}"[:300]

    def _count_connections(self, turn: Turn) -> None:
        connect = turn._connection

        def counted(*args: object, **kwargs: object):  # type: ignore[no-untyped-def]
            self.connections += 1
            return connect(*args, **kwargs)  # type: ignore[arg-type]
        turn._connection = counted  # type: ignore[method-assign]

    def judged(self, log: list[api.EventOut], last_answer: str) -> dict[str, int]:
        """What this stream client saw of its turn, against the turn's events in the log."""
        seen = collections.Counter(self.seqs)
        logged = [e for e in log if e.turn_id == self.turn_id]
        rounds = collections.Counter()
        for event in logged:
            if event.type != "assistant_msg" or event.round_id not in self.texts:
                continue
            texts = self.texts[event.round_id]
            streamed, text = texts[max(texts)], str(event.content.get("text") or "")
            rounds["whole" if streamed == text else "beginning" if text.startswith(streamed)
                   else "garbled"] += 1
        answers = [e for e in logged if e.type == "assistant_msg" and e.seq in seen]
        return {"turns": 1, "connections": self.connections,
                "reconnected": int(self.connections > 1),
                "missed_events": sum(1 for e in logged if e.seq not in seen),
                "duplicate_events": sum(n - 1 for n in seen.values()),
                "rounds_whole": rounds["whole"], "rounds_beginning": rounds["beginning"],
                "rounds_garbled": rounds["garbled"],
                "answer_whole": int(bool(answers) and answers[-1].content.get("text") == last_answer),
                "ended": int(self.end is not None), "errors": int(bool(self.error))}


class DeployConversation(Conversation):
    """One conversation of bench/chaos.py's user, with this bench's turns: each timed, each
    read by a stream client too."""

    turns = TURNS

    def __init__(self, *args: object, timings: list[tuple[float, float]], streams: collections.Counter,
                 **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.timings, self.streams = timings, streams
        self.person_s = 0.0
        self.stream_errors: list[str] = []

    def settings(self) -> dict:
        return {"agents": [HELPER], "script": script(self.random.uniform(1, 3))}

    def _person_reads(self) -> None:
        began = time.monotonic()
        super()._person_reads()
        self.person_s += time.monotonic() - began

    def _turn(self, client: Client, turn: int) -> bool:
        assert self.id is not None
        began = time.monotonic()
        self.person_s = 0.0
        sent = client.send(self.id, f"Turn {turn}, please.", idempotency_key=f"turn-{turn}")
        watch = StreamWatch(self.url, self.key, self.id, sent.turn_id)
        watch.start()
        ok = self._follow(client, turn, sent)
        if ok:
            self.timings.append((began, time.monotonic() - began - self.person_s))
        watch.join(timeout=120)
        self.streams.update(watch.judged(list(client.iter_events(self.id)), answer(turn)))
        if watch.error:
            self.stream_errors.append(watch.error)
        return ok


class User(threading.Thread):
    """An outside user: conversations one after another until told to stop."""

    def __init__(self, url: str, key: str, index: int, seed: int, start_s: float, ledger: Path,
                 stop: threading.Event) -> None:
        super().__init__(daemon=True, name=f"user-{index}")
        self.url, self.key, self.index, self.seed, self.start_s = url, key, index, seed, start_s
        self.ledger, self.stop = ledger, stop
        self.conversations: list[DeployConversation] = []
        self.timings: list[tuple[float, float]] = []  # (start, seconds) of each turn that ended idle
        self.streams: collections.Counter[str] = collections.Counter()

    def run(self) -> None:
        while not self.stop.is_set():
            n = len(self.conversations)
            person = DeployConversation(self.url, self.key, self.index * 10_000 + n, self.seed,
                                        self.start_s if n == 0 else 0.0, 2.0, self.ledger,
                                        timings=self.timings, streams=self.streams)
            self.conversations.append(person)
            person.run()


# -- the verdict ----------------------------------------------------------------------------

def latency(seconds: list[float]) -> dict:
    if not seconds:
        return {"turns": 0}
    ordered = sorted(seconds)
    return {"turns": len(ordered), "p50_s": round(statistics.median(ordered), 2),
            "p99_s": round(ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], 2)}


def steps_run_more_than_once(database_url: str) -> dict[str, int]:
    from agentq.store import Store

    store = Store.open(database_url)
    try:
        with store.engine.connect() as conn:
            steps, again = conn.exec_driver_sql(
                "SELECT count(*), count(*) FILTER (WHERE attempts > 1) FROM steps").one()
    finally:
        store.dispose()
    return {"steps": steps, "steps_run_more_than_once": again}


def handed_back(out: Path) -> int:
    """Messages the stopped workers put back on the broker unstarted (kombu logs how many
    it restores as a channel closes, at INFO)."""
    return sum(int(n) for log in out.glob("worker*.log")
               for n in RESTORED.findall(log.read_text(errors="replace")))


def versions() -> dict[str, str]:
    from importlib.metadata import version

    return {name: version(name) for name in ("celery", "kombu", "gevent", "gunicorn")}


def verdict(args: argparse.Namespace, url: str, key: str, database_url: str, users: list[User],
            deployment: RollingDeployment, restarts: Restarts, load: Load, ledger: Path,
            quiet_until: float, restarts_until: float) -> dict:
    people = [person for user in users for person in user.conversations]
    judged: dict[str, dict] = {}
    with Client(url, key, timeout_s=60) as client:
        for person in people:
            if person.id is not None:
                judged[person.id] = judge_conversation(client, person.id, LAST)
    stuck = {p.id or f"#{p.index}": {"client": p.outcome, "error": p.error, **judged.get(p.id or "", {})}
             for p in people if p.id is None or not judged[p.id]["finished"] or p.outcome != "done"}
    runs = executions(ledger, deployment.killed)
    duplicated = judged_sum(judged, "duplicate_results") + runs["duplicate_executions"] \
        + runs["once_duplicate_effects"]
    timings = [t for user in users for t in user.timings]
    streams = sum((user.streams for user in users), collections.Counter())
    return {
        "broker": args.broker, "versions": versions(), "clients": args.clients,
        "workers": args.workers, "apis": args.apis, "minutes": args.minutes,
        "restart_every_s": args.restart_every_s, "grace_s": args.grace_s,
        "conversations": len(people), "finished": len(people) - len(stuck),
        "given_up": sum(1 for j in judged.values() if j["given_up"]), "stuck": len(stuck),
        "duplicated": duplicated, "duplicate_results": judged_sum(judged, "duplicate_results"),
        **runs, **steps_run_more_than_once(database_url), **deaths(database_url),
        "violations": violations(database_url),
        "turn_latency": {
            "before": latency([s for at, s in timings if at < quiet_until]),
            "during": latency([s for at, s in timings if quiet_until <= at < restarts_until]),
            "after": latency([s for at, s in timings if at >= restarts_until])},
        "streams": dict(streams),
        "stream_errors": [e for p in people for e in p.stream_errors][:20],
        "restarts": len(restarts.done),
        "restarted": dict(collections.Counter(r["process"] for r in restarts.done)),
        "pids_changed": bool(restarts.done) and all(r["old_pid"] != r["new_pid"] for r in restarts.done),
        "stop_s": {kind: max((r["stop_s"] for r in restarts.done if r["process"].startswith(kind)),
                             default=None) for kind in ("worker", "api")},
        "over_grace": sum(1 for r in restarts.done if r["over_grace"]),
        # RabbitMQ requeues what a closing channel held without a word in the worker's log
        "handed_back": handed_back(args.out) if args.broker == "redis" else None,
        "restart_log": restarts.done,
        "load_1min": {"start": load.samples[0] if load.samples else None,
                      "max": max(load.samples, default=None),
                      "mean": round(sum(load.samples) / len(load.samples), 2) if load.samples else None},
        "stuck_conversations": stuck,
    }


def judged_sum(judged: dict[str, dict], field: str) -> int:
    return sum(int(j[field]) for j in judged.values())


def failed(result: dict) -> bool:
    streams = result["streams"]
    return bool(result["given_up"] or result["stuck"] or result["duplicated"] or result["violations"]
                or streams.get("missed_events") or streams.get("duplicate_events")
                or streams.get("rounds_garbled") or not result["pids_changed"])


# -- the run --------------------------------------------------------------------------------

def run(args: argparse.Namespace, database_url: str, redis_url: str, broker_url: str) -> int:
    from agentq.core.agents import AgentDefinition
    from agentq.core.settings import Settings
    from agentq.process.clock import utcnow
    from agentq.store import Store

    store = Store.open(database_url)
    store.migrate()
    tenant = "deploy"
    _, key = store.keys.create(tenant, utcnow())
    store.agents.create(tenant, AgentDefinition(name=HELPER, description="Answers a part.", settings=Settings(
        script=[{"text": "The helper's part, worked out and told.", "chunks": 4, "delay_s": 0.1}])),
        now=utcnow())
    store.dispose()
    env, ledger = deployment_env(database_url, broker_url, redis_url, args.out)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    deployment = RollingDeployment(env, port, args.out, args.workers, args.apis, args.grace_s,
                                   args.worker_log_level)
    load = Load()
    load.start()
    stop = threading.Event()
    try:
        deployment.start()
        wait_ready(port, deployment.processes())
        began = time.monotonic()
        users = [User(url, key, n, args.seed, min(args.quiet_s / 2, 10.0), ledger, stop)
                 for n in range(args.clients)]
        for user in users:
            user.start()
        time.sleep(args.quiet_s)
        quiet_until = time.monotonic()
        restarts = Restarts(deployment, args.restart_every_s, args.minutes * 60)
        restarts.start()
        restarts.join()
        restarts_until = time.monotonic()
        stop.set()
        print(f"{len(restarts.done)} restarts in {restarts_until - began:.0f} s; settling", flush=True)
        deadline = time.monotonic() + args.settle_s
        for user in users:
            user.join(timeout=max(0.0, deadline - time.monotonic()))
        result = verdict(args, url, key, database_url, users, deployment, restarts, load, ledger,
                         quiet_until, restarts_until)
        write_lost(args.out, url, key, database_url, [p for u in users for p in u.conversations],
                   result["stuck_conversations"])
    finally:
        load.done.set()
        deployment.stop()
    (args.out / "verdict.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))
    return 1 if failed(result) else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="how long the restarts go on")
    parser.add_argument("--restart-every-s", type=float, default=30.0)
    parser.add_argument("--quiet-s", type=float, default=60.0, help="load alone, before the restarts")
    parser.add_argument("--grace-s", type=float, default=60.0,
                        help="how long a stopped process may take to exit before it is SIGKILLed")
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2, help="gevent workers, every queue each")
    parser.add_argument("--apis", type=int, default=2, help="API processes on one port")
    parser.add_argument("--settle-s", type=float, default=180.0,
                        help="how long the clients may take to finish their conversations after the restarts")
    parser.add_argument("--broker", choices=("redis", "rabbitmq"), default="redis")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--worker-log-level", default="INFO",
                        help="INFO logs the messages a stopping worker hands back (counted)")
    parser.add_argument("--out", type=Path, default=Path("deploy-out"))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with (postgres_database() as database_url, redis_database() as redis_url,
          broker_place(args.broker, redis_url) as broker_url):
        return run(args, database_url, redis_url, broker_url)


if __name__ == "__main__":
    sys.exit(main())
