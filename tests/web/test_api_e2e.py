"""End to end over HTTP only: `agentq api` + a Celery worker process + PostgreSQL + Redis."""
from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.support.api import Frame, parse_frame
from tests.support.processes import ROOT, WorkerProcess, wait_for, worker_env

pytestmark = [pytest.mark.worker, pytest.mark.postgres, pytest.mark.redis]

SCRIPT = [
    {"text": "Let me look up the weather in Oslo.",
     "tool_calls": [{"name": "get_weather", "args": {"city": "Oslo"}}], "chunks": 4, "delay_s": 0.2},
    {"text": "It is cold in Oslo. Paying Bob needs your approval.",
     "tool_calls": [{"name": "approve_payment", "args": {"amount": 20.0, "to": "Bob"}}],
     "chunks": 3, "delay_s": 0.2},
    {"text": "The payment to Bob was approved. All done.", "chunks": 3, "delay_s": 0.2},
]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ApiProcess:
    """`agentq api` on a free loopback port, in its own process group."""

    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        with open(log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "agentq.cli", "api", "--host", "127.0.0.1", "--port", str(self.port)],
                env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)


class Http:
    """JSON over urllib with the API key."""

    def __init__(self, base: str, key: str) -> None:
        self.base, self.headers = base, {"Authorization": f"Bearer {key}"}

    def request(self, method: str, path: str, body=None, headers=None, timeout=10.0):
        data = None if body is None else json.dumps(body).encode()
        all_headers = {**self.headers, **(headers or {})}
        if data is not None:
            all_headers["Content-Type"] = "application/json"
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=all_headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read())

    def stream(self, path: str, stop, headers=None, timeout=60.0, into=None) -> list[Frame]:
        """Read SSE frames (into `into`, as they come) until `stop(frame)` or the stream ends."""
        req = urllib.request.Request(self.base + path, headers={**self.headers, **(headers or {})})
        frames: list[Frame] = [] if into is None else into
        with urllib.request.urlopen(req, timeout=timeout) as response:
            assert response.headers["Content-Type"].startswith("text/event-stream")
            lines: list[str] = []
            for raw in response:
                line = raw.decode().rstrip("\n")
                if line:
                    lines.append(line)
                    continue
                frames.append(parse_frame("\n".join(lines)))
                lines = []
                if stop(frames[-1]):
                    break
        return frames


@pytest.fixture
def stack(tmp_path, pg_store_clean, pg_url, redis_url):
    """An API process and a worker process on the run's PostgreSQL and Redis; both stopped after."""
    key = "aq_" + secrets.token_urlsafe(24)
    env = worker_env(pg_url, redis_url, redis_url, AGENTQ_API_KEY=f"e2e:{key}")
    api = ApiProcess(env, tmp_path / "api.log")
    worker = WorkerProcess(env, tmp_path / "worker.log", name="e2e").start()
    try:
        http = Http(api.base, key)
        wait_for(lambda: _ready(http), timeout_s=60,
                 what=f"the API to be ready; log:\n{api.log_path.read_text(errors='replace')}")
        yield http, pg_store_clean, worker, api
    finally:
        api.stop()
        worker.stop()


def _ready(http: Http) -> bool:
    try:
        return http.request("GET", "/readyz")[0] == 200
    except OSError:
        return False


def test_a_conversation_with_a_server_tool_and_an_approval_runs_over_http(stack):
    http, store, worker, api = stack
    status, conversation = http.request("POST", "/v1/conversations", {"settings": {"script": SCRIPT}})
    assert status == 201
    cid = conversation["id"]
    final = SCRIPT[-1]["text"]
    live: list[Frame] = []
    reader = threading.Thread(target=lambda: http.stream(
        f"/v1/conversations/{cid}/stream", into=live,
        stop=lambda f: f.event == "event" and f.data["content"].get("text") == final))
    reader.start()
    wait_for(lambda: live, timeout_s=10, what="the stream to open")  # subscribed: nothing missed

    status, answer = http.request("POST", f"/v1/conversations/{cid}/messages",
                                  {"content": "Weather in Oslo? Then pay Bob 20 EUR."},
                                  headers={"Idempotency-Key": "e2e-1"})
    assert status == 202 and answer["queued"] is False
    assert http.request("POST", f"/v1/conversations/{cid}/messages",
                        {"content": "Weather in Oslo? Then pay Bob 20 EUR."},
                        headers={"Idempotency-Key": "e2e-1"}) == (202, answer)
    status, refused = http.request("POST", f"/v1/conversations/{cid}/messages", {"content": "again"},
                                   headers={"Idempotency-Key": "e2e-1"})
    assert status == 422 and refused["error"]["code"] == "idempotency_key_reused"

    state = wait_for(lambda: _awaiting(http, cid), timeout_s=60,
                     what=f"the approval; worker log:\n{worker.log_text()}")
    [pending] = state["pending"]
    assert pending["name"] == "approve_payment" and pending["args"] == {"amount": 20.0, "to": "Bob"}
    body = {"status": "resolved", "result": {"approved": True}}
    path = f"/v1/conversations/{cid}/tool-calls/{pending['tool_call_id']}/resolution"
    assert http.request("POST", path, body)[0] == 200
    assert http.request("POST", path, body)[0] == 200  # the same answer twice is fine
    assert http.request("POST", path, {"status": "errored", "result": "no"})[0] == 409

    reader.join(timeout=60)
    assert not reader.is_alive(), f"the stream never saw the end; worker log:\n{worker.log_text()}"
    _check_stream(http, cid, live)


def _awaiting(http: Http, cid: str):
    status, state = http.request("GET", f"/v1/conversations/{cid}")
    return state if state["state"] == "awaiting_input" else None


def _check_stream(http: Http, cid: str, live: list[Frame]) -> None:
    status, page = http.request("GET", f"/v1/conversations/{cid}/events")
    log = page["events"]
    assert [e["type"] for e in log] == [
        "user_msg", "assistant_msg", "tool_call", "tool_result", "assistant_msg", "tool_call",
        "suspension", "resolution", "tool_result", "assistant_msg",
    ]
    streamed = [f.data for f in live if f.event == "event"]
    assert streamed == log  # live: every event once, in seq order, as the log has it
    answers = [e for e in log if e["type"] == "assistant_msg"]
    deltas = [f.data for f in live if f.event == "delta"]
    for answer in answers:  # each answer's chunks, published a window's worth at a time
        mine = [d for d in deltas if d["round_id"] == answer["round_id"]]
        assert "".join(d["text"] for d in mine) == answer["content"]["text"]
        assert mine and [d["index"] for d in mine] == list(range(len(mine)))
    resumed = http.stream(f"/v1/conversations/{cid}/stream?until_idle=1", stop=lambda f: False,
                          headers={"Last-Event-ID": "6"})
    assert [f.data["seq"] for f in resumed if f.event == "event"] == [7, 8, 9, 10]
    assert resumed[-1].event == "end" and resumed[-1].data == {"state": "idle", "last_seq": 10}
    assert http.request("GET", f"/v1/conversations/{cid}")[1]["state"] == "idle"
