"""Many live streams on one real `agentq api` process (gevent) on PostgreSQL and Redis.

Hundreds of streams get every event once and in order; a tenant past its cap gets 429; a
client that stops reading is dropped (and counted), one that goes away is freed; SIGTERM
with streams open ends them cleanly and the process exits promptly.
"""
from __future__ import annotations

import json
import re
import selectors
import socket
import threading
import time
import urllib.request
import uuid
from datetime import datetime, timezone

import pytest
import redis

from agentq.commands import Commands
from agentq.config import Config
from agentq.followups import Advance
from agentq.tenancy.policy import Policy
from agentq.tenancy.access import ModelAccess
from agentq.live.pubsub import PubSub, channel
from agentq.runtime import Runtime
from agentq.tools import Registry
from tests.support.clock import Clock
from tests.support.drive import drain
from tests.support.processes import wait_for, worker_env
from tests.support.rules import Rules
from tests.web.test_api_e2e import ApiProcess, Http

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]

STREAMS = 300
CONVERSATIONS = 3
TURNS = 4
EVENT_ID = re.compile(rb"id: (\d+)\nevent: event\n")


class RawStreams:
    """SSE streams on raw sockets (HTTP/1.0: no chunk framing), read by one selector thread."""

    def __init__(self, port: int, key: str) -> None:
        self.port, self.key = port, key
        self.selector = selectors.DefaultSelector()
        self.lock = threading.Lock()
        self.states: list[dict] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def open(self, cid: str) -> dict:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        sock.sendall(f"GET /v1/conversations/{cid}/stream HTTP/1.0\r\nHost: t\r\n"
                     f"Authorization: Bearer {self.key}\r\n\r\n".encode())
        sock.setblocking(False)
        state = {"cid": cid, "sock": sock, "head": b"", "tail": b"", "seqs": [], "eof": False}
        with self.lock:
            self.states.append(state)
            self.selector.register(sock, selectors.EVENT_READ, state)
        return state

    def live(self) -> int:
        """Streams whose replay began (their `retry:` frame arrived)."""
        return sum(1 for s in self.states if b"retry: " in s["head"])

    def _loop(self) -> None:
        while not self.stopping.is_set():
            with self.lock:
                ready = self.selector.select(timeout=0.05)
            for key, _ in ready:
                try:
                    data = key.fileobj.recv(65536)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                self._read(key.data, data)

    def _read(self, state: dict, data: bytes) -> None:
        if not data:
            state["eof"] = True
            with self.lock:
                self.selector.unregister(state["sock"])
            return
        if len(state["head"]) < 4096:
            state["head"] += data[:4096]
        buffer = state["tail"] + data
        end = buffer.rfind(b"\n\n")
        cut = 0 if end < 0 else end + 2
        state["seqs"].extend(int(s) for s in EVENT_ID.findall(buffer[:cut]))
        state["tail"] = buffer[cut:]

    def close(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=5)
        for state in self.states:
            state["sock"].close()


def _metric(base: str, name: str) -> float:
    with urllib.request.urlopen(f"{base}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name) and not line.startswith("#"))


def _start(tmp_path, pg_url: str, redis_url: str, name: str, **settings: str):
    key = "aq_" + uuid.uuid4().hex
    env = worker_env(pg_url, redis_url, redis_url, AGENTQ_API_KEY=f"acme:{key}", **settings)
    api = ApiProcess(env, tmp_path / f"{name}.log")
    http = Http(api.base, key)
    wait_for(lambda: _healthy(http), timeout_s=60,
             what=f"the API to answer; log:\n{api.log_path.read_text(errors='replace')}")
    return api, http, key


def _healthy(http: Http) -> bool:
    try:
        return http.request("GET", "/healthz")[0] == 200
    except OSError:
        return False


def _runtime(store, redis_url: str) -> Runtime:
    """What a worker would do, in this process: the events and notices are real."""
    policy = Policy.default()
    registry = Registry.from_modules(["agentq.tools.demo"])
    access = ModelAccess(policy, lambda *a, **k: None, env={})
    return Runtime(store=store, registry=registry, pubsub=PubSub(redis_url), config=Config(),
                   clock=Clock(datetime.now(timezone.utc)), sleep=lambda s: None,
                   rules=Rules(providers=access.provider_for))


@pytest.fixture
def tight(tmp_path, pg_store_clean, pg_url, redis_url):
    """An API whose tenants may hold 3 streams, 8 notices each, and no write stuck over 1 s."""
    api, http, key = _start(tmp_path, pg_url, redis_url, "tight", AGENTQ_MAX_STREAMS_PER_TENANT="3",
                            AGENTQ_STREAM_BUFFER="8", AGENTQ_STREAM_STALL_S="1")
    streams = RawStreams(api.port, key)
    yield api, http, streams, redis.Redis.from_url(redis_url)
    streams.close()
    api.stop()


def test_hundreds_of_streams_get_every_event_once_and_in_order(tmp_path, pg_store_clean, pg_url,
                                                                 redis_url):
    api, http, key = _start(tmp_path, pg_url, redis_url, "many")
    streams = RawStreams(api.port, key)
    runtime = _runtime(pg_store_clean, redis_url)
    try:
        cids = [http.request("POST", "/v1/conversations", {"settings": {}})[1]["id"]
                for _ in range(CONVERSATIONS)]
        for i in range(STREAMS):
            streams.open(cids[i % CONVERSATIONS])
        wait_for(lambda: streams.live() == STREAMS, timeout_s=120, what="every stream to be live")
        assert _metric(api.base, "agentq_streams_open") == STREAMS
        for turn in range(TURNS):  # user_msg, then the scripted answer: two events a turn
            for cid in cids:
                assert http.request("POST", f"/v1/conversations/{cid}/messages",
                                    {"content": f"turn {turn}"})[0] == 202
                drain(runtime, [Advance(cid)])
        expected = list(range(1, 2 * TURNS + 1))
        wait_for(lambda: all(len(s["seqs"]) >= len(expected) for s in streams.states),
                 timeout_s=60, what="every stream to receive every event")
        assert all(s["seqs"] == expected for s in streams.states)
        assert _subscriptions(redis_url) == {channel(c) for c in cids}  # one per conversation
        started = time.monotonic()
        api.proc.send_signal(15)  # SIGTERM with 300 streams open
        api.proc.wait(timeout=30)
        took_s = time.monotonic() - started
        wait_for(lambda: all(s["eof"] for s in streams.states), timeout_s=10,
                 what="every stream to end")
        assert api.proc.returncode == 0
        assert all(s["tail"] == b"" for s in streams.states)  # each ended after a whole frame
        assert took_s < 5.0, f"agentq api took {took_s:.1f} s to stop with {STREAMS} streams open"
    finally:
        streams.close()
        api.stop()


def _subscriptions(redis_url: str) -> set[str]:
    client = redis.Redis.from_url(redis_url)
    names = {n.decode() for n in client.pubsub_channels("agentq:conversation:*")}
    counts = dict(client.pubsub_numsub(*names)) if names else {}
    assert all(n == 1 for n in counts.values()), counts  # one subscriber: the process's fanout
    return names


def test_a_tenant_past_its_stream_cap_gets_429_and_a_closed_stream_frees_its_slot(tight):
    api, http, streams, client = tight
    cid = http.request("POST", "/v1/conversations", {"settings": {}})[1]["id"]
    held = [streams.open(cid) for _ in range(3)]
    wait_for(lambda: streams.live() == 3, timeout_s=30, what="three live streams")
    request = urllib.request.Request(f"{api.base}/v1/conversations/{cid}/stream",
                                     headers=http.headers)
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 429
    assert refused.value.headers["Retry-After"] == "5"
    body = json.loads(refused.value.read())
    assert body["error"]["code"] == "too_many_streams" and body["error"]["details"] == {"limit": 3}
    assert _metric(api.base, "agentq_streams_refused_total") == 1
    held[0]["sock"].close()  # the client goes away without a word
    wait_for(lambda: _metric(api.base, "agentq_streams_open") == 2, timeout_s=10,
             what="the closed stream to be freed")
    assert _metric(api.base, 'agentq_streams_dropped_total{reason="gone"}') == 1
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status == 200


def test_a_client_that_stops_reading_is_dropped_and_counted(tight):
    api, http, streams, client = tight
    cid = http.request("POST", "/v1/conversations", {"settings": {}})[1]["id"]
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a small window, never read
    sock.connect(("127.0.0.1", api.port))
    sock.sendall(f"GET /v1/conversations/{cid}/stream HTTP/1.0\r\nHost: t\r\n"
                 f"Authorization: {http.headers['Authorization']}\r\n\r\n".encode())
    other = http.request("POST", "/v1/conversations", {"settings": {}})[1]["id"]
    reader = streams.open(other)  # a client that reads, on another conversation
    wait_for(lambda: _metric(api.base, "agentq_streams_open") == 2, timeout_s=30,
             what="both streams to be open")
    text = "x" * 65536
    for index in range(200):  # 13 MB of deltas: more than any socket buffers
        client.publish(channel(cid), json.dumps({"kind": "delta", "data": {
            "round_id": "r1", "turn_id": "t1", "index": index, "attempt": 1, "text": text}}))
    wait_for(lambda: _metric(api.base, "agentq_streams_open") == 1, timeout_s=30,
             what="the stream that does not read to be dropped")
    dropped = (_metric(api.base, 'agentq_streams_dropped_total{reason="overflow"}')
               + _metric(api.base, 'agentq_streams_dropped_total{reason="stalled"}'))
    assert dropped == 1
    assert not reader["eof"]  # the reader keeps its stream
    assert "dropped a stream of tenant acme" in api.log_path.read_text(errors="replace")
    sock.close()
