"""An hour (or any time) of steady load on the production shape, and whether memory stays flat.

Starts the deployment of the Procfile (docs/operations.md): the API under gunicorn's gevent
worker, a gevent worker for `agentq.model,agentq.timers`, a threads worker for
`agentq.tools` and one beat, on a PostgreSQL database and a Redis db of their own. Then
`--clients` client threads run a steady mix for `--minutes`, each waiting `--think-s` between
turns so the load stays bounded:

- short conversations: created, one turn with a tool and a streamed answer, ended;
- long conversations: one per client, a turn after another with a tool call and a streamed
  answer, compaction on (a small context budget), replaced after `--long-turns` turns;
- approvals: a turn that waits for a person, resolved through the API;
- streams: every turn is followed on `GET …/stream?until_idle=1` to its end.

Each `--sample-s` (a minute) it samples the RSS and open file descriptors of every process,
PostgreSQL (its backends' private memory, the database's connections), Redis (its memory,
the run's clients, the run's keys) and the queue lengths, and rewrites
`<out>/soak.csv` (one row a sample, one column a series) and `<out>/soak.json` (the samples
and the verdict). At the end it judges each series after the warm-up (`--warmup-min`): a
series *grows* when its last values are more than `--tolerance` (10%) above its value at the
end of the warm-up and its least-squares slope over the last half of the run still rises by
more than half that tolerance. The exit status is 1 and the message names the series when
any grows, 0 otherwise.

Redis's memory (`redis.used_mb`) is the whole server's, shared with whatever else runs on
it: it is recorded, and judged only with `--judge-shared`. The log itself grows by design
(`pg.database_mb`, `redis.keys` hold events and results): recorded, not judged.

    nice -n 10 python bench/soak.py --minutes 60 --clients 6 --out /tmp/soak

Needs PostgreSQL (127.0.0.1:5432) and Redis (127.0.0.1:6379); the database is dropped and
the Redis db emptied at the end.
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import http.client
import json
import os
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402
import redis  # noqa: E402

from agentq.worker.rabbitmq import is_amqp  # noqa: E402
from bench.places import postgres_database, redis_database  # noqa: E402

TIMEOUT_S = 60.0
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
QUEUES = ("agentq.model", "agentq.tools", "agentq.timers")


# -- the verdict (pure) ---------------------------------------------------------------------

@dataclass(frozen=True)
class Growth:
    series: str
    warm: float
    last: float
    slope_per_min: float

    def __str__(self) -> str:
        return (f"{self.series} grows: {self.warm:.1f} after warm-up, {self.last:.1f} at the end, "
                f"{self.slope_per_min:+.2f}/min over the last half")


def slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """The least-squares slope of ys over xs (0 for fewer than two points)."""
    if len(xs) < 2:
        return 0.0
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    var = sum((x - mx) ** 2 for x in xs)
    return 0.0 if var == 0 else sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=False)) / var


def growth(series: str, minutes: Sequence[float], values: Sequence[float], *, warmup_min: float,
           tolerance: float, slack: float) -> Growth | None:
    """A Growth when the series keeps rising after the warm-up, else None.

    The value after warm-up is the median of the three samples from the warm-up's end on,
    the last value the median of the last three (one spike decides nothing). It grows when
    the last value is above the warm one by more than `tolerance` of it plus `slack` (an
    absolute allowance for small counts: a queue of 0 may hold 3 at the last sample) and
    the last half of the run still rises by more than half of that.
    """
    after = [(m, v) for m, v in zip(minutes, values, strict=False) if m >= warmup_min and v is not None]
    if len(after) < 4:
        return None
    warm = statistics.median(v for _, v in after[:3])
    last = statistics.median(v for _, v in after[-3:])
    allowed = tolerance * abs(warm) + slack
    half = after[len(after) // 2:]
    rate = slope([m for m, _ in half], [v for _, v in half])
    span = half[-1][0] - half[0][0]
    if last - warm > allowed and rate * span > allowed / 2:
        return Growth(series, warm, last, rate)
    return None


# Absolute allowance per kind of series (see `growth`).
SLACK = {"rss_mb": 2.0, "anon_mb": 2.0, "backend_anon_mb": 0.5, "fds": 5.0, "connections": 3.0,
         "clients": 3.0, "queue": 50.0, "used_mb": 2.0}
# `pg.anon_mb` is the sum over the run's backends: it steps up by a backend's few MB whenever
# a pool opens one more connection within its bound (a burst, the machine busy), which
# `pg.connections` judges on its own. What would leak is a backend's own memory:
# `pg.backend_anon_mb`, judged.
RECORDED_ONLY = ("pg.database_mb", "pg.anon_mb", "redis.keys", "turns", "errors", "deltas",
                 "summaries")


def judged(series: str, judge_shared: bool) -> bool:
    if series in RECORDED_ONLY:
        return False
    return judge_shared or series != "redis.used_mb"


def slack_of(series: str) -> float:
    kind = series.rsplit(".", 1)[-1]
    return SLACK.get(kind, SLACK["queue"] if series.startswith("queue.") else 0.0)


# -- /proc ----------------------------------------------------------------------------------

def status_kib(pid: int, field: str) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def open_fds(pid: int) -> int | None:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


# -- the deployment -------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def commands(port: int, schedule: Path) -> dict[str, list[str]]:
    """The Procfile's processes (one worker for model calls and timers, to spare the CPU)."""
    celery = [sys.executable, "-m", "celery", "-A", "agentq.worker:app"]
    return {
        "api": [sys.executable, "-m", "gunicorn", "-k", "gevent", "--worker-connections", "10000",
                "-b", f"127.0.0.1:{port}", "--log-level", "warning", "agentq.web.app:create_app()"],
        "model": [*celery, "worker", "-Q", "agentq.model,agentq.timers", "-n", "model@%h",
                  "--pool=gevent", "--concurrency=1000", "--loglevel=WARNING"],
        "tools": [*celery, "worker", "-Q", "agentq.tools", "-n", "tools@%h", "--pool=threads",
                  "--concurrency=16", "--loglevel=WARNING"],
        "beat": [*celery, "beat", "--loglevel=WARNING", f"--schedule={schedule}"],
    }


@contextlib.contextmanager
def deployment(env: dict[str, str], port: int, out: Path) -> Iterator[dict[str, subprocess.Popen]]:
    procs: dict[str, subprocess.Popen] = {}
    try:
        for name, command in commands(port, out / "beat-schedule").items():
            with open(out / f"{name}.log", "ab") as log:
                procs[name] = subprocess.Popen(command, env=env, cwd=ROOT, stdout=log,
                                               stderr=subprocess.STDOUT, start_new_session=True)
        yield procs
    finally:
        for proc in procs.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs.values():
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)


def process_pids(procs: dict[str, subprocess.Popen]) -> dict[str, int]:
    """Each process to sample: the API's master and its workers, the Celery processes."""
    pids = {}
    for name, proc in procs.items():
        pids[name] = proc.pid
        for index, child in enumerate(children(proc.pid)):
            pids[f"{name}.child{index}"] = child
    return pids


# -- the clients ----------------------------------------------------------------------------

class Api:
    """One keep-alive connection to the API with a key."""

    def __init__(self, port: int, key: str) -> None:
        self.port, self.key = port, key
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT_S)

    def call(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        headers = {"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"}
        # A new connection a call: the API closes idle keep-alive connections after 2 s, and
        # a request sent on one it is closing would fail for the client, not the server.
        self.conn.close()
        try:
            self.conn.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
            answer = self.conn.getresponse()
            data = answer.read()
        except (OSError, http.client.HTTPException):
            self.conn.close()
            raise
        return answer.status, (json.loads(data) if data else {})

    def expect(self, status: int, method: str, path: str, body: dict | None = None) -> dict:
        got, answer = self.call(method, path, body)
        if got != status:
            raise RuntimeError(f"{method} {path}: {got} {str(answer)[:200]}")
        return answer

    def follow(self, cid: str, after_seq: int) -> tuple[str, int, int]:
        """Read the stream until the turn ends: its final state, last seq and deltas seen."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=TIMEOUT_S)
        try:
            conn.request("GET", f"/v1/conversations/{cid}/stream?until_idle=1&after_seq={after_seq}",
                         headers={"Authorization": f"Bearer {self.key}"})
            answer = conn.getresponse()
            if answer.status != 200:
                raise RuntimeError(f"stream {cid}: {answer.status}")
            body = answer.read().decode()
        finally:
            conn.close()
        deltas = body.count("event: delta\n")
        for frame in reversed(body.split("\n\n")):
            if frame.startswith("event: end"):
                end = json.loads(frame.split("data: ", 1)[1])
                return end["state"], end["last_seq"], deltas
        raise RuntimeError(f"stream {cid} ended without `event: end`")


def answer(n: int) -> dict:
    return {"text": f"Answer {n}: " + "a few words of a streamed reply " * 3, "chunks": 4, "delay_s": 0.05}


SHORT = {"script": [{"text": "Checking.", "chunks": 2,
                     "tool_calls": [{"name": "get_weather", "args": {"city": "Oslo"}}]},
                    answer(0)]}
LONG = {"script": [{"text": "Looking.", "chunks": 2,
                    "tool_calls": [{"name": "add", "args": {"a": 2, "b": 3}}]},
                   answer(1)],
        "script_repeat": True,
        "compaction": {"max_context_tokens": 600, "min_keep_turns": 2}}
APPROVAL = {"script": [{"text": "This needs a person.", "chunks": 2,
                        "tool_calls": [{"name": "approve_payment", "args": {"amount": 5, "to": "Bob"}}]},
                       answer(2)]}


class Client(threading.Thread):
    """Runs the mix until `stop` is set; counts turns and errors."""

    def __init__(self, port: int, key: str, think_s: float, long_turns: int, stop: threading.Event,
                 seed: int) -> None:
        super().__init__(daemon=True)
        self.api = Api(port, key)
        self.think_s, self.long_turns, self.stop = think_s, long_turns, stop
        self.random = random.Random(seed)
        self.turns = self.errors = self.deltas = 0
        self.last_error = ""
        self.error_kinds: dict[str, int] = {}
        self.long: tuple[str, int, int] | None = None  # id, last seq, turns

    def run(self) -> None:
        while not self.stop.is_set():
            kind = self.random.choices(("short", "long_turn", "approval"), weights=(3, 5, 2))[0]
            try:
                getattr(self, kind)()
                self.turns += 1
            except Exception as err:  # noqa: BLE001 - counted and shown; the load goes on
                self.errors += 1
                self.last_error = "".join(traceback.format_exception_only(err)).strip()
                kind_of_error = UUID.sub("…", self.last_error)[:160]
                self.error_kinds[kind_of_error] = self.error_kinds.get(kind_of_error, 0) + 1
                self.long = None
                self.api = Api(self.api.port, self.api.key)
            self.stop.wait(self.think_s * self.random.uniform(0.5, 1.5))

    def _turn(self, cid: str, after_seq: int, text: str) -> tuple[str, int]:
        self.api.expect(202, "POST", f"/v1/conversations/{cid}/messages", {"content": text})
        state, last_seq, deltas = self.api.follow(cid, after_seq)
        self.deltas += deltas  # live only: a turn done before its stream opened shows none
        if state not in ("idle", "awaiting_input"):
            raise RuntimeError(f"turn of {cid} ended {state}")
        return state, last_seq

    def short(self) -> None:
        cid = self.api.expect(201, "POST", "/v1/conversations", {"settings": SHORT})["id"]
        self._turn(cid, 0, "Weather in Oslo?")
        self.api.expect(200, "GET", f"/v1/conversations/{cid}/events?after_seq=0")
        self.api.call("DELETE", f"/v1/conversations/{cid}")

    def long_turn(self) -> None:
        if self.long is None or self.long[2] >= self.long_turns:
            if self.long is not None:
                self.api.call("DELETE", f"/v1/conversations/{self.long[0]}")
            cid = self.api.expect(201, "POST", "/v1/conversations", {"settings": LONG})["id"]
            self.long = (cid, 0, 0)
        cid, seq, turns = self.long
        _, seq = self._turn(cid, seq, f"Turn {turns}: what is 2 + 3? " + "Some context. " * 10)
        self.long = (cid, seq, turns + 1)

    def approval(self) -> None:
        cid = self.api.expect(201, "POST", "/v1/conversations", {"settings": APPROVAL})["id"]
        state, seq = self._turn(cid, 0, "Pay Bob 5.")
        if state != "awaiting_input":
            raise RuntimeError(f"approval turn of {cid} ended {state}")
        pending = self.api.expect(200, "GET", f"/v1/conversations/{cid}/tool-calls?status=pending")
        call = pending["tool_calls"][0]["tool_call_id"]
        self.api.expect(200, "POST", f"/v1/conversations/{cid}/tool-calls/{call}/resolution",
                        {"status": "resolved", "result": {"approved": True}})
        state, _, deltas = self.api.follow(cid, seq)
        self.deltas += deltas
        if state != "idle":
            raise RuntimeError(f"approved turn of {cid} ended {state}")
        self.api.call("DELETE", f"/v1/conversations/{cid}")

# -- the samples ----------------------------------------------------------------------------

class Sampler:
    """One row of every series, read from /proc, PostgreSQL and Redis."""

    def __init__(self, procs: dict[str, subprocess.Popen], database_url: str, redis_url: str,
                 clients: list[Client], broker_url: str) -> None:
        self.procs, self.clients, self.broker_url = procs, clients, broker_url
        self.database = database_url.rsplit("/", 1)[1]
        self.pg = psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True)
        self.run_db = psycopg.connect(database_url.replace("+psycopg", ""), autocommit=True)
        self.redis = redis.Redis.from_url(redis_url)
        self.redis_db = int(redis_url.rsplit("/", 1)[1])

    def row(self) -> dict[str, float | None]:
        row: dict[str, float | None] = {}
        for name, pid in process_pids(self.procs).items():
            rss = status_kib(pid, "VmRSS")
            row[f"{name}.rss_mb"] = None if rss is None else round(rss / 1024, 1)
            row[f"{name}.fds"] = open_fds(pid)
        backends = [pid for (pid,) in self.pg.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s", (self.database,))]
        row["pg.connections"] = len(backends)
        anon_mb = sum(status_kib(pid, "RssAnon") or 0 for pid in backends) / 1024
        row["pg.anon_mb"] = round(anon_mb, 1)
        row["pg.backend_anon_mb"] = round(anon_mb / len(backends), 2) if backends else None
        (size,) = self.pg.execute("SELECT pg_database_size(%s)", (self.database,)).fetchone()
        row["pg.database_mb"] = round(size / 2**20, 1)
        (row["summaries"],) = self.run_db.execute("SELECT count(*) FROM summaries").fetchone()
        row["redis.used_mb"] = round(self.redis.info("memory")["used_memory"] / 2**20, 1)
        row["redis.clients"] = sum(1 for c in self.redis.client_list()
                                   if int(c.get("db", -1)) == self.redis_db)
        row["redis.keys"] = self.redis.dbsize()
        row.update(self.queues())
        row["turns"] = sum(c.turns for c in self.clients)
        row["errors"] = sum(c.errors for c in self.clients)
        row["deltas"] = sum(c.deltas for c in self.clients)
        return row

    def queues(self) -> dict[str, int]:
        """Tasks waiting in each queue, and those delivered but not acknowledged."""
        if not is_amqp(self.broker_url):
            return {**{f"queue.{q}": self.redis.llen(q) for q in QUEUES},
                    "queue.unacked": self.redis.hlen("unacked")}
        import kombu  # RabbitMQ: a passive declare answers the ready count

        with kombu.Connection(self.broker_url) as conn:
            channel = conn.channel()
            try:
                return {f"queue.{q}": channel.queue_declare(q, passive=True).message_count for q in QUEUES}
            finally:
                channel.close()

    def close(self) -> None:
        self.pg.close()
        self.run_db.close()
        self.redis.close()


def write(out: Path, samples: list[dict], verdict: dict | None) -> None:
    names = list(dict.fromkeys(k for s in samples for k in s))
    with open(out / "soak.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=names)
        writer.writeheader()
        writer.writerows(samples)
    (out / "soak.json").write_text(json.dumps({"samples": samples, "verdict": verdict}, indent=1))


def judge(samples: list[dict], *, warmup_min: float, tolerance: float, judge_shared: bool) -> list[Growth]:
    minutes = [s["minute"] for s in samples]
    grown = []
    for name in dict.fromkeys(k for s in samples for k in s):
        if name in ("minute", "time") or not judged(name, judge_shared):
            continue
        values = [s.get(name) for s in samples]
        found = growth(name, minutes, values, warmup_min=warmup_min, tolerance=tolerance,
                       slack=slack_of(name))
        if found:
            grown.append(found)
    return grown


def wait_ready(port: int, procs: dict[str, subprocess.Popen], timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for name, proc in procs.items():
            if proc.poll() is not None:
                raise SystemExit(f"{name} exited with {proc.returncode} (see its log)")
        with contextlib.suppress(OSError, http.client.HTTPException):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/readyz")
            if conn.getresponse().status == 200:
                return
        time.sleep(0.5)
    raise SystemExit("the API was not ready in time")


def run(args: argparse.Namespace, database_url: str, redis_url: str) -> int:
    from agentq.process.clock import utcnow
    from agentq.store import Store

    store = Store.open(database_url)
    store.migrate()
    _, key = store.keys.create("soak", utcnow())
    store.dispose()
    env = {**os.environ, "AGENTQ_DATABASE_URL": database_url, "AGENTQ_BROKER_URL": args.broker or redis_url,
           "AGENTQ_REDIS_URL": redis_url, "AGENTQ_DEMO": "on",
           "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH")))),
           "PYTHONUNBUFFERED": "1"}
    port, stop, samples = free_port(), threading.Event(), []
    with deployment(env, port, args.out) as procs:
        wait_ready(port, procs)
        clients = [Client(port, key, args.think_s, args.long_turns, stop, seed)
                   for seed in range(args.clients)]
        sampler = Sampler(procs, database_url, redis_url, clients, env["AGENTQ_BROKER_URL"])
        began = time.monotonic()
        for client in clients:
            client.start()
        try:
            while True:
                minute = (time.monotonic() - began) / 60
                samples.append({"minute": round(minute, 2), "time": time.strftime("%H:%M:%S", time.gmtime()),
                                **sampler.row()})
                write(args.out, samples, None)
                line = samples[-1]
                print(f"[{line['time']}] min {minute:5.1f} turns {line['turns']} errors {line['errors']} "
                      + " ".join(f"{k.removesuffix('.rss_mb')}={v}" for k, v in line.items()
                                 if k.endswith("rss_mb")),
                      flush=True)
                for name, proc in procs.items():
                    if proc.poll() is not None:
                        raise SystemExit(f"{name} exited with {proc.returncode} during the run")
                if minute >= args.minutes:
                    break
                time.sleep(max(0.0, began + len(samples) * args.sample_s - time.monotonic()))
        finally:
            stop.set()
            for client in clients:
                client.join(timeout=TIMEOUT_S)
            sampler.close()
    grown = judge(samples, warmup_min=args.warmup_min, tolerance=args.tolerance,
                  judge_shared=args.judge_shared)
    kinds: dict[str, int] = {}
    for client in clients:
        for kind, count in client.error_kinds.items():
            kinds[kind] = kinds.get(kind, 0) + count
    verdict = {"grown": [str(g) for g in grown], "turns": samples[-1]["turns"],
               "errors": samples[-1]["errors"],
               "error_kinds": kinds, "warmup_min": args.warmup_min,
               "tolerance": args.tolerance}
    write(args.out, samples, verdict)
    print(json.dumps(verdict, indent=1))
    for g in grown:
        print(f"FAIL: {g}", file=sys.stderr)
    return 1 if grown else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--clients", type=int, default=6, help="client threads, one turn at a time each")
    parser.add_argument("--think-s", type=float, default=1.0, help="mean pause between a client's turns")
    parser.add_argument("--long-turns", type=int, default=100, help="turns of a long conversation")
    parser.add_argument("--sample-s", type=float, default=60.0)
    parser.add_argument("--warmup-min", type=float, default=None,
                        help="default: a quarter of the run, at most 15")
    parser.add_argument("--tolerance", type=float, default=0.10)
    parser.add_argument("--judge-shared", action="store_true",
                        help="also judge the whole Redis server's memory")
    parser.add_argument("--broker", default=None,
                        help="a broker URL (amqp://… for RabbitMQ, a vhost of the run's own); "
                             "default: the run's Redis db")
    parser.add_argument("--out", type=Path, default=Path("soak-out"))
    args = parser.parse_args()
    if args.warmup_min is None:
        args.warmup_min = min(15.0, args.minutes / 4)
    args.out.mkdir(parents=True, exist_ok=True)
    # SIGTERM ends the run as Ctrl-C does: the processes stopped, the database dropped, the
    # Redis db emptied (Python's default would exit at once and leave them all running).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with postgres_database() as database_url, redis_database() as redis_url:
        return run(args, database_url, redis_url)


if __name__ == "__main__":
    sys.exit(main())
