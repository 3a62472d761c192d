"""An agent defined in a Python module, end to end: `agentq api` publishes it at start, a
conversation started from it over HTTP runs its tool on a real worker."""
from __future__ import annotations

import secrets

import pytest

from tests.support.processes import WorkerProcess, wait_for, worker_env
from tests.web.test_api_e2e import ApiProcess, Http

pytestmark = [pytest.mark.worker, pytest.mark.postgres, pytest.mark.redis]

MODULES = "agentq.tools.demo,tests.support.tools_for_tests,tests.support.agents_for_tests"


def _ready(http: Http) -> bool:
    try:
        return http.request("GET", "/readyz")[0] == 200
    except OSError:
        return False


def _start_api(env: dict[str, str], tmp_path, key: str) -> tuple[ApiProcess, Http]:
    api = ApiProcess(env, tmp_path / "api.log")
    http = Http(api.base, key)
    wait_for(lambda: _ready(http), timeout_s=60,
             what=f"the API to be ready; log:\n{api.log_path.read_text(errors='replace')}")
    return api, http


def test_a_conversation_from_an_agent_defined_in_code_runs_its_tool_on_a_worker(
        tmp_path, pg_store_clean, pg_url, redis_url):
    key = "aq_" + secrets.token_urlsafe(24)
    env = worker_env(pg_url, redis_url, redis_url, AGENTQ_API_KEY=f"e2e:{key}",
                     AGENTQ_TOOLS=MODULES)
    api, http = _start_api(env, tmp_path, key)
    worker = WorkerProcess(env, tmp_path / "worker.log", name="agents").start()
    try:
        status, listed = http.request("GET", "/v1/agents")
        assert status == 200
        assert [(a["name"], a["version"], a["source"]) for a in listed["agents"]] == [
            ("concierge", 1, "code"), ("support", 1, "code")]

        status, conversation = http.request("POST", "/v1/conversations", {"agent": "support"})
        assert status == 201, conversation
        assert conversation["agent"] == {"name": "support", "version": 1}
        cid = conversation["id"]
        assert http.request("POST", f"/v1/conversations/{cid}/messages",
                            {"content": "Where is order 7?"})[0] == 202
        wait_for(lambda: http.request("GET", f"/v1/conversations/{cid}")[1]["last_seq"] == 5
                 and http.request("GET", f"/v1/conversations/{cid}")[1]["state"] == "idle",
                 timeout_s=60, what=f"the turn; worker log:\n{worker.log_text()}")
        events = http.request("GET", f"/v1/conversations/{cid}/events")[1]["events"]
        assert [e["type"] for e in events] == [
            "user_msg", "assistant_msg", "tool_call", "tool_result", "assistant_msg"]
        assert events[3]["content"]["output"] == "value of order-7"
        assert events[4]["content"]["text"] == "Found it."
    finally:
        api.stop()
        worker.stop()

    again, http = _start_api(env, tmp_path, key)  # the same code starts again
    try:
        assert http.request("GET", "/v1/agents/support")[1]["version"] == 1
    finally:
        again.stop()
