"""Thousands of open streams on one API process, with a conversation producing events.

Starts the API (one process: gunicorn's gevent worker by default, as in the Procfile;
`--server gthread` for the old thread-per-connection line, `--server agentq-api` for
`agentq api`) and a Celery worker, opens --streams SSE streams spread over
--conversations conversations, posts a scripted message to each conversation every
--period-s while the streams are held for --hold-s, and prints:

- streams held (answered 200 and replaying within 20 s), and how long opening took;
- events and deltas delivered per second while held, and the API's CPU per frame delivered;
- /healthz and GET /v1/conversations/{id} latency, p50 and p99, while held;
- memory per open stream (the API process's RSS from /proc, before and after opening);
- whether every stream saw every event of its conversation once, in order;
- the time from closing every client socket until the API holds no stream and Redis
  no subscription (its /metrics and PUBSUB NUMSUB).

    python bench/streams.py [--streams 2000] [--conversations 20] [--hold-s 20]

Needs PostgreSQL (127.0.0.1:5432) and Redis (127.0.0.1:6379); its database is dropped and
its Redis db emptied at the end. The client is one selector thread (HTTP/1.0 streams, so
no chunk framing) plus one prober thread; it raises its own open-files limit.
"""
from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import re
import resource
import selectors
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402

from agentq.process.clock import utcnow  # noqa: E402
from agentq.store import Store  # noqa: E402
from bench.places import postgres_database, redis_database  # noqa: E402

EVENT_ID = re.compile(rb"id: (\d+)\nevent: event\n")
DELTA = b"event: delta\n"
OPEN_WAIT_S = 180.0
TIMEOUT_S = 10.0  # a request the API has not answered by then counts as a failure
SCRIPT = [{"text": f"Answer number {i}, in a few pieces.", "chunks": 4, "delay_s": 0.2}
          for i in range(300)]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def server_command(kind: str, port: int, streams: int) -> list[str]:
    address = f"127.0.0.1:{port}"
    if kind == "gevent":
        return [sys.executable, "-m", "gunicorn", "-k", "gevent", "-w", "1", "--worker-connections",
                str(streams + 1000), "-b", address, "--log-level", "warning", "agentq.web.app:create_app()"]
    if kind == "gthread":
        return [sys.executable, "-m", "gunicorn", "-k", "gthread", "-w", "1", "--threads", "64",
                "-b", address, "--log-level", "warning", "agentq.web.app:create_app()"]
    return [sys.executable, "-m", "agentq.cli", "api", "--host", "127.0.0.1", "--port", str(port)]


@contextlib.contextmanager
def process(command: list[str], env: dict[str, str], name: str) -> Iterator[subprocess.Popen]:
    """A child in its own process group, its output in $TMPDIR; stopped by pid at the end."""
    log_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"agentq-bench-streams-{name}-{os.getpid()}.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(command, env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=15)


def wait_until(condition, timeout_s: float, step_s: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(step_s)
    return condition()


class Api:
    """One keep-alive connection to the API, for the bench's own calls."""

    def __init__(self, port: int, key: str) -> None:
        self.port, self.key = port, key
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT_S)

    def call(self, method: str, path: str, body: dict | None = None) -> tuple[int, bytes]:
        """Status and body; 0 if the call failed twice (the server may close an idle connection)."""
        headers = {"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"}
        for _ in range(2):
            try:
                self.conn.request(method, path, body=None if body is None else json.dumps(body),
                                  headers=headers)
                answer = self.conn.getresponse()
                return answer.status, answer.read()
            except (OSError, http.client.HTTPException):
                self.conn.close()
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=TIMEOUT_S)
        return 0, b""

    def json(self, method: str, path: str, body: dict | None = None) -> dict:
        status, data = self.call(method, path, body)
        if status >= 300 or status == 0:
            raise RuntimeError(f"{method} {path}: {status} {data[:200]!r}")
        return json.loads(data)


class Streams:
    """N SSE connections read by one selector thread: the seqs each one saw, frames counted."""

    def __init__(self, port: int, key: str) -> None:
        self.port, self.key = port, key
        self.selector = selectors.DefaultSelector()
        self.conns: list[dict] = []
        self.frames = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def open(self, cids: list[str]) -> None:
        for cid in cids:
            sock = socket.socket()
            sock.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                sock.connect(("127.0.0.1", self.port))
            state = {"cid": cid, "sock": sock, "tail": b"", "seqs": [], "ok": False, "sent": False}
            self.conns.append(state)
            self.selector.register(sock, selectors.EVENT_WRITE, state)
        self.thread.start()

    def held(self) -> int:
        return sum(1 for c in self.conns if c["ok"])

    def _loop(self) -> None:
        while not self.stopping.is_set():
            for key, events in self.selector.select(timeout=0.1):
                state = key.data
                if events & selectors.EVENT_WRITE and not state["sent"]:
                    self._request(state)
                    continue
                try:
                    data = state["sock"].recv(262144)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    data = b""
                if not data:
                    self.selector.unregister(state["sock"])
                    continue
                self._read(state, data)

    def _request(self, state: dict) -> None:
        request = (f"GET /v1/conversations/{state['cid']}/stream HTTP/1.0\r\nHost: bench\r\n"
                   f"Authorization: Bearer {self.key}\r\n\r\n").encode()
        try:
            state["sock"].send(request)
        except OSError:
            self.selector.unregister(state["sock"])
            return
        state["sent"] = True
        self.selector.modify(state["sock"], selectors.EVENT_READ, state)

    def _read(self, state: dict, data: bytes) -> None:
        buffer = state["tail"] + data
        if not state["ok"] and b"retry: " in buffer and buffer.startswith(b"HTTP/1."):
            state["ok"] = buffer.split(b" ", 2)[1] == b"200"
        end = buffer.rfind(b"\n\n")
        cut = 0 if end < 0 else end + 2  # whole frames only; the rest waits for more bytes
        whole, state["tail"] = buffer[:cut], buffer[cut:]
        state["seqs"].extend(int(s) for s in EVENT_ID.findall(whole))
        self.frames += whole.count(b"\n\n")

    def close_all(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=5)
        for state in self.conns:
            state["sock"].close()


class Prober:
    """GET /healthz and GET /v1/conversations/{id} in turn, latency of each kept."""

    def __init__(self, port: int, key: str, cid: str) -> None:
        self.api, self.cid = Api(port, key), cid
        self.latency: dict[str, list[float]] = {"healthz": [], "conversation": []}
        self.failures = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        paths = {"healthz": "/healthz", "conversation": f"/v1/conversations/{self.cid}"}
        while not self.stopping.wait(0.02):
            for name, path in paths.items():
                started = time.perf_counter()
                status, _ = self.api.call("GET", path)
                if status == 200:
                    self.latency[name].append(time.perf_counter() - started)
                else:
                    self.failures += 1


class Producer:
    """Posts a message to every conversation each `period_s` (queued while a turn runs)."""

    def __init__(self, port: int, key: str, cids: list[str], period_s: float) -> None:
        self.api, self.cids, self.period_s = Api(port, key), cids, period_s
        self.posted = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self.stopping.is_set():
            started = time.monotonic()
            for cid in self.cids:
                if self.api.call("POST", f"/v1/conversations/{cid}/messages",
                                 {"content": f"message {self.posted}"})[0] == 202:
                    self.posted += 1
            self.stopping.wait(max(0.0, self.period_s - (time.monotonic() - started)))


def cpu_s(pid: int) -> float:
    """User + system CPU seconds the process has used (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def api_pid(proc: subprocess.Popen, kind: str) -> int:
    """The process that serves: gunicorn's one worker, or `agentq api` itself."""
    if kind == "agentq-api":
        return proc.pid
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
    wait_until(lambda: children.read_text().split(), 30)
    return int(children.read_text().split()[0])


def open_streams_metric(api: Api) -> float | None:
    status, body = api.call("GET", "/metrics")
    if status != 200:
        return None
    match = re.search(rb"^agentq_streams_open ([0-9.e+]+)$", body, re.M)
    return float(match.group(1)) if match else None


def percentiles(values: list[float]) -> str:
    if not values:
        return "no answers"
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"p50 {statistics.median(ordered) * 1000:7.1f} ms  p99 {p99 * 1000:7.1f} ms  (n={len(ordered)})"


def run(args: argparse.Namespace, database_url: str, redis_url: str) -> None:
    store = Store.open(database_url)
    store.migrate()
    _, key = store.keys.create("bench", utcnow())
    store.dispose()
    env = {**os.environ, "AGENTQ_DATABASE_URL": database_url, "AGENTQ_BROKER_URL": redis_url,
           "AGENTQ_REDIS_URL": redis_url, "AGENTQ_DEMO": "on",
           "AGENTQ_MAX_STREAMS_PER_TENANT": str(args.streams * 2), "PYTHONUNBUFFERED": "1"}
    port = free_port()
    worker = [sys.executable, "-m", "celery", "-A", "agentq.worker:app", "worker", "-P", "threads",
              "-c", "8", "-Q", "agentq.model,agentq.tools,agentq.timers", "-l", "WARNING",
              "--without-heartbeat", "--without-mingle", "--without-gossip"]
    with process(server_command(args.server, port, args.streams), env, "api") as server, \
            process(worker, env, "worker"):
        api = Api(port, key)
        if not wait_until(lambda: api.call("GET", "/healthz")[0] == 200, 60, 0.2):
            raise SystemExit("the API did not answer /healthz within 60 s")
        pid = api_pid(server, args.server)
        cids = [api.json("POST", "/v1/conversations", {"settings": {"script": SCRIPT}})["id"]
                for _ in range(args.conversations)]
        time.sleep(1.0)
        rss_before = rss_kib(pid)
        streams = Streams(port, key)
        opened_at = time.monotonic()
        streams.open([cids[i % len(cids)] for i in range(args.streams)])
        all_held = wait_until(lambda: streams.held() == args.streams, OPEN_WAIT_S, 0.1)
        open_s = time.monotonic() - opened_at
        held = streams.held()
        time.sleep(1.0)
        rss_held = rss_kib(pid)
        prober, producer = Prober(port, key, cids[0]), Producer(port, key, cids, args.period_s)
        frames_before, started, cpu_before = streams.frames, time.monotonic(), cpu_s(pid)
        prober.thread.start()
        producer.thread.start()
        time.sleep(args.hold_s)
        producer.stopping.set()
        producer.thread.join(timeout=30)
        held_s = time.monotonic() - started
        frames_held = streams.frames - frames_before
        cpu_held = cpu_s(pid) - cpu_before
        prober.stopping.set()
        prober.thread.join(timeout=30)
        try:
            complete, events_total, caught_up = check_delivery(api, cids, streams)
        except RuntimeError as exc:  # the API does not answer while the streams are held
            print(f"  (could not check delivery: {exc})")
            complete, events_total, caught_up = None, 0, False
        client = redis.Redis.from_url(redis_url)
        closed_at = time.monotonic()
        streams.close_all()
        freed = wait_until(lambda: open_streams_metric(api) == 0
                           and not client.pubsub_channels("agentq:conversation:*"), 30, 0.02)
        free_s = time.monotonic() - closed_at
        rss_after = rss_kib(pid)
        print_report(args, held=held, all_held=all_held, open_s=open_s, frames=frames_held,
                     held_s=held_s, cpu_held=cpu_held, prober=prober, posted=producer.posted,
                     rss=(rss_before, rss_held, rss_after), complete=complete, caught_up=caught_up,
                     events_total=events_total, freed=freed, free_s=free_s)


def check_delivery(api: Api, cids: list[str], streams: Streams) -> tuple[int, int, bool]:
    """Streams that saw every event of their conversation once, in order; events; all caught up."""
    def state(cid: str) -> dict:
        return api.json("GET", f"/v1/conversations/{cid}")

    idle = wait_until(lambda: all(state(c)["state"] == "idle" and not state(c)["inbox"] for c in cids),
                      120, 0.5)
    last_seq = {c: state(c)["last_seq"] for c in cids}
    caught_up = wait_until(lambda: all(s["seqs"] and s["seqs"][-1] == last_seq[s["cid"]]
                                       for s in streams.conns if s["ok"]), 30, 0.2)
    complete = sum(1 for s in streams.conns
                   if s["ok"] and s["seqs"] == list(range(1, last_seq[s["cid"]] + 1)))
    return complete, sum(last_seq.values()), idle and caught_up


def print_report(args, *, held, all_held, open_s, frames, held_s, cpu_held, prober, posted, rss, complete,
                 caught_up, events_total, freed, free_s) -> None:
    rss_before, rss_held, rss_after = rss
    per_stream = (rss_held - rss_before) / held if held else 0.0
    print(f"server {args.server}: {args.streams} streams over {args.conversations} conversations, "
          f"held {args.hold_s:.0f} s, a message to each conversation every {args.period_s:.1f} s")
    print(f"  streams held           {held} of {args.streams}"
          f" ({'all' if all_held else 'NOT all'} within {OPEN_WAIT_S:.0f} s; took {open_s:.1f} s)")
    print(f"  delivered while held   {frames / held_s:9.0f} frames/s (events and deltas, all streams);"
          f" {posted} messages posted")
    print(f"  API CPU while held     {cpu_held / held_s:9.2f} cores"
          f" ({cpu_held * 1e6 / frames if frames else 0:.0f} µs per frame delivered)")
    print(f"  /healthz               {percentiles(prober.latency['healthz'])}")
    print(f"  GET conversation       {percentiles(prober.latency['conversation'])}")
    print(f"  probe failures         {prober.failures}")
    print(f"  memory                 {rss_before / 1024:.0f} MiB before, {rss_held / 1024:.0f} MiB held "
          f"({per_stream:.1f} KiB per stream), {rss_after / 1024:.0f} MiB after close")
    if complete is not None:
        print(f"  every event once, in order: {complete} of {held} streams "
              f"({events_total} events in the log{'' if caught_up else '; NOT all caught up'})")
    print(f"  freed after close      {'yes' if freed else 'NO'} in {free_s:.2f} s "
          "(no open stream in /metrics, no subscription in Redis)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, default=2000)
    parser.add_argument("--conversations", type=int, default=20)
    parser.add_argument("--hold-s", type=float, default=20.0)
    parser.add_argument("--period-s", type=float, default=2.0)
    parser.add_argument("--server", choices=("gevent", "gthread", "agentq-api"), default="gevent")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = min(hard, max(soft, args.streams * 2 + 2000))
    resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))  # the children inherit it
    with postgres_database() as database_url, redis_database() as redis_url:
        run(args, database_url, redis_url)
    return 0


if __name__ == "__main__":
    sys.exit(main())
