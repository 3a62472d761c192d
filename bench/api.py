"""What the HTTP API holds, under gunicorn on PostgreSQL, loopback traffic only.

1. POST …/messages and GET /v1/conversations/{id}: p50/p99 latency and requests/s with
   50 concurrent clients (threads, one keep-alive connection each).
2. Server-Sent Events: how many concurrent streams one API process holds while a delta
   published to every stream still arrives within 100 ms (p99), growing the number of
   streams step by step; it stops at --max-streams, at --time-limit s, or past 100 ms.

    python bench/api.py [--clients 50] [--requests 40] [--max-streams 500] [--time-limit 60]

Needs PostgreSQL (127.0.0.1:5432) and Redis (127.0.0.1:6379). The database it creates is
dropped, and the Redis database it claims is emptied, at the end.
"""
from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import selectors
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


from agentq.process.clock import utcnow  # noqa: E402
from agentq.live.pubsub import PubSub  # noqa: E402
from agentq.store import Store  # noqa: E402
from bench.places import postgres_database, redis_database  # noqa: E402

LATENCY_LIMIT_MS = 100.0


# -- places to run --------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def gunicorn(env: dict[str, str], *, workers: int, threads: int) -> Iterator[int]:
    """gunicorn serving agentq.web.app:create_app() on a free loopback port; stopped by pid."""
    port = _free_port()
    log = open(Path(os.environ.get("TMPDIR", "/tmp")) / f"agentq-bench-gunicorn-{port}.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-k", "gthread", "-w", str(workers), "--threads", str(threads),
         "--worker-connections", "2000", "-b", f"127.0.0.1:{port}", "--log-level", "warning",
         "agentq.web.app:create_app()"],
        env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    try:
        _wait_ready(port, proc)
        yield port
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=15)
        log.close()


def _wait_ready(port: int, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit("gunicorn exited; see its log in $TMPDIR")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/readyz")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit("gunicorn did not become ready in 30 s")


# -- 1. requests ----------------------------------------------------------------------------

class Client:
    """One keep-alive connection speaking JSON with a key."""

    def __init__(self, port: int, key: str) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}

    def call(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        self.conn.request(method, path, body=None if body is None else json.dumps(body), headers=self.headers)
        response = self.conn.getresponse()
        return response.status, json.loads(response.read())


def _create(client: Client) -> str:
    status, body = client.call("POST", "/v1/conversations", {"settings": {}})
    assert status == 201, body
    return body["id"]


def measure(port: int, key: str, clients: int, requests: int,
            make_request: Callable[[Client, str, int], int], expect: int) -> dict[str, float]:
    """`clients` threads, each on its own conversation, `requests` calls each."""
    latencies: list[float] = []
    lock, start_gate = threading.Lock(), threading.Barrier(clients + 1)
    errors: list[str] = []

    def run() -> None:
        client = Client(port, key)
        cid = _create(client)
        make_request(client, cid, -1)  # warm: the first message starts a turn, later ones queue
        mine = []
        start_gate.wait()
        for index in range(requests):
            began = time.perf_counter()
            status = make_request(client, cid, index)
            mine.append(time.perf_counter() - began)
            if status != expect:
                errors.append(f"HTTP {status}")
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=run) for _ in range(clients)]
    for thread in threads:
        thread.start()
    start_gate.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    if errors:
        raise SystemExit(f"{len(errors)} requests failed, e.g. {errors[0]}")
    return _summary(latencies, elapsed)


def _summary(latencies: list[float], elapsed: float) -> dict[str, float]:
    ordered = sorted(latencies)
    return {
        "n": len(ordered),
        "p50_ms": statistics.median(ordered) * 1000,
        "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000,
        "rps": len(ordered) / elapsed,
    }


def post_message(client: Client, cid: str, index: int) -> int:
    return client.call("POST", f"/v1/conversations/{cid}/messages", {"content": f"message {index}"})[0]


def get_conversation(client: Client, cid: str, index: int) -> int:
    return client.call("GET", f"/v1/conversations/{cid}")[0] if index >= 0 else 200


# -- 2. streams -----------------------------------------------------------------------------

class Streams:
    """Many SSE connections read by one selector thread; records how late each delta arrives."""

    def __init__(self, port: int, key: str) -> None:
        self.port, self.key = port, key
        self.selector = selectors.DefaultSelector()
        self.lock = threading.Lock()
        self.ready: set[str] = set()
        self.arrivals: dict[tuple[str, int], float] = {}  # (conversation, round) -> latency s
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def open(self, cid: str) -> None:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        sock.sendall(f"GET /v1/conversations/{cid}/stream HTTP/1.0\r\nHost: 127.0.0.1\r\n"
                     f"Authorization: Bearer {self.key}\r\n\r\n".encode())
        sock.setblocking(False)
        self.selector.register(sock, selectors.EVENT_READ, {"cid": cid, "buffer": b""})

    def _loop(self) -> None:
        while not self.stopping.is_set():
            for key, _ in self.selector.select(timeout=0.2):
                try:
                    data = key.fileobj.recv(65536)
                except BlockingIOError:
                    continue
                if not data:
                    self.selector.unregister(key.fileobj)
                    continue
                self._frames(key.data, data, time.time())

    def _frames(self, state: dict, data: bytes, now: float) -> None:
        state["buffer"] += data
        while b"\n\n" in state["buffer"]:
            frame, state["buffer"] = state["buffer"].split(b"\n\n", 1)
            if b"retry: " in frame:
                with self.lock:
                    self.ready.add(state["cid"])
            elif frame.startswith(b"event: delta"):
                text = json.loads(frame.split(b"data: ", 1)[1])["text"]
                round_, sent = text.split(":")
                with self.lock:
                    self.arrivals[(state["cid"], int(round_))] = now - float(sent)

    def close(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=5)
        for key in list(self.selector.get_map().values()):
            key.fileobj.close()


def _wait(condition: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def stream_capacity(port: int, key: str, store: Store, redis_url: str, *, max_streams: int,
                    time_limit_s: float) -> list[dict[str, float]]:
    """Grow the number of open streams; per level, one delta to each stream, three rounds."""
    pubsub, streams, cids = PubSub(redis_url), Streams(port, key), []
    rows, started, round_no = [], time.monotonic(), 0
    levels = [n for n in (25, 50, 100, 200, 300, 400, 500, 750, 1000) if n <= max_streams] or [max_streams]
    try:
        for level in levels:
            if time.monotonic() - started > time_limit_s:
                break
            for _ in range(level - len(cids)):
                cid = store.conversations.create(tenant="bench", settings=_settings(), now=utcnow()).id
                cids.append(cid)
                streams.open(cid)
            if not _wait(lambda: len(streams.ready) >= len(cids), 30):
                rows.append({"streams": level, "opened": len(streams.ready)})
                break
            latencies, missing = [], 0
            for _ in range(3):
                round_no += 1
                for cid in cids:
                    pubsub.publish(cid, "delta", {"round_id": "bench", "turn_id": None, "index": round_no,
                                                  "attempt": 1, "text": f"{round_no}:{time.time()}"})
                _wait(lambda: all((cid, round_no) in streams.arrivals for cid in cids), 5)
                with streams.lock:
                    got = [streams.arrivals.get((cid, round_no)) for cid in cids]
                latencies += [g for g in got if g is not None]
                missing += sum(g is None for g in got)
            row = {"streams": level, "opened": len(streams.ready), "missing": missing,
                   **_latency(latencies)}
            rows.append(row)
            if missing or row["p99_ms"] > LATENCY_LIMIT_MS:
                break
    finally:
        streams.close()
    return rows


def _settings():
    from agentq.core.settings import Settings

    return Settings()


def _latency(values: list[float]) -> dict[str, float]:
    ordered = sorted(values) or [float("nan")]
    return {
        "p50_ms": statistics.median(ordered) * 1000,
        "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000,
        "max_ms": ordered[-1] * 1000,
    }


# -- the run --------------------------------------------------------------------------------

def _env(database_url: str, redis_url: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(AGENTQ_DATABASE_URL=database_url, AGENTQ_BROKER_URL=redis_url, AGENTQ_REDIS_URL=redis_url,
               AGENTQ_DEMO="on", PYTHONPATH=str(ROOT))  # the scripted profile, off with a broker named
    return env


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--requests", type=int, default=40, help="requests per client and endpoint")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers for the request table")
    parser.add_argument("--threads", type=int, default=32, help="threads per gunicorn worker")
    parser.add_argument("--max-streams", type=int, default=500)
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds for the stream table")
    args = parser.parse_args()
    with postgres_database() as database_url, redis_database() as redis_url:
        store = Store.open(database_url)
        store.migrate()
        _, key = store.keys.create("bench", utcnow())
        env = _env(database_url, redis_url)
        with gunicorn(env, workers=args.workers, threads=args.threads) as port:
            post = measure(port, key, args.clients, args.requests, post_message, 202)
            get = measure(port, key, args.clients, args.requests, get_conversation, 200)
        with gunicorn(env, workers=1, threads=args.max_streams + 50) as port:
            rows = stream_capacity(port, key, store, redis_url, max_streams=args.max_streams,
                                   time_limit_s=args.time_limit)
        store.dispose()
    _print_requests(args, post, get)
    _print_streams(rows)
    return 0


def _print_requests(args: argparse.Namespace, post: dict, get: dict) -> None:
    print(f"\nrequests: {args.clients} concurrent clients, gunicorn -k gthread -w {args.workers} "
          f"--threads {args.threads}, PostgreSQL, Redis broker")
    print(f"{'endpoint':<34} {'requests':>8} {'p50 ms':>8} {'p99 ms':>8} {'req/s':>8}")
    for name, row in (("POST /v1/conversations/{id}/messages", post), ("GET /v1/conversations/{id}", get)):
        print(f"{name:<34} {row['n']:>8} {row['p50_ms']:>8.1f} {row['p99_ms']:>8.1f} {row['rps']:>8.0f}")


def _print_streams(rows: list[dict]) -> None:
    print(f"\nSSE streams on one API process (gunicorn -w 1 -k gthread), a delta to every stream, "
          f"3 rounds per level; limit p99 < {LATENCY_LIMIT_MS:.0f} ms")
    print(f"{'streams':>8} {'open':>6} {'missing':>8} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    for row in rows:
        if "p50_ms" not in row:
            print(f"{row['streams']:>8} {row['opened']:>6}  (not all streams opened in 30 s)")
            continue
        print(f"{row['streams']:>8} {row['opened']:>6} {row['missing']:>8} {row['p50_ms']:>8.1f} "
              f"{row['p99_ms']:>8.1f} {row['max_ms']:>8.1f}")
    held = [r["streams"] for r in rows if "p99_ms" in r and not r["missing"] and r["p99_ms"] <= LATENCY_LIMIT_MS]
    print(f"held with deltas under {LATENCY_LIMIT_MS:.0f} ms: {max(held) if held else 0} streams")


if __name__ == "__main__":
    sys.exit(main())
