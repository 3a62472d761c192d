"""`agentq dev` as a developer runs it: from the directory of their tools, with the console
script (so nothing but the command puts that directory on sys.path), over HTTP only."""
from __future__ import annotations

import os
import re
import subprocess
import textwrap
from pathlib import Path

import httpx2
import pytest

from tests.support.dev import AGENTQ, WAIT_S, Dev
from tests.support.processes import wait_for

SHOP_TOOLS = '''
import asyncio

import agentq


@agentq.tool
async def lookup_order(order_id: str) -> str:
    """Look up an order.

    Args:
        order_id: The order's id, e.g. A-17.
    """
    await asyncio.sleep(0.01)
    return f"order {order_id}: shipped"


@agentq.tool
def cancel_order(order_id: str) -> str:
    """Cancel an order."""
    raise RuntimeError(f"order {order_id} has already shipped")


support = agentq.agent("support", system="You help with orders.", tools=[lookup_order])
'''

REFUND = '''

@agentq.tool
def refund(order_id: str, amount: float) -> str:
    """Refund part of an order."""
    return f"refunded {amount} on {order_id}"
'''


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    (tmp_path / "shop_tools.py").write_text(textwrap.dedent(SHOP_TOOLS))
    return tmp_path


@pytest.fixture
def dev(shop: Path):
    started: list[Dev] = []

    def start(*args: str, **env: str) -> Dev:
        started.append(Dev(shop, *args, **{"AGENTQ_TOOLS": "shop_tools", **env}))
        return started[-1]

    yield start
    for process in started:
        process.stop()


def test_agentq_dev_imports_the_tools_beside_it_and_lists_tools_agents_profiles_and_the_url(dev):
    banner = dev().wait_banner()
    assert re.search(r"API on http://127\.0\.0\.1:\d+,", banner)
    assert "  tools: lookup_order, cancel_order\n" in banner
    assert "  agents: support\n" in banner
    assert ("  profiles: scripted (offline), openai (key in OPENAI_API_KEY, not set), "
            "anthropic (key in ANTHROPIC_API_KEY, not set)\n") in banner


def test_in_agentq_dev_an_async_tool_is_awaited_and_a_raising_tools_traceback_is_printed(dev):
    process = dev()
    process.wait_banner()
    with process.client() as api:
        created = api.post("/v1/conversations", json={"settings": {"script": [
            {"tool_calls": [{"name": "lookup_order", "args": {"order_id": "A-17"}},
                            {"name": "cancel_order", "args": {"order_id": "A-17"}}]},
            {"text": "done"}]}})
        assert created.status_code == 201, created.text
        cid = created.json()["id"]
        assert api.post(f"/v1/conversations/{cid}/messages", json={"content": "go"}).status_code in (201, 202)

        def results() -> dict | None:
            events = api.get(f"/v1/conversations/{cid}/events").json()["events"]
            found = {e["content"]["tool_call_id"]: e["content"] for e in events if e["type"] == "tool_result"}
            return len(found) == 2 and found
        found = wait_for(results, timeout_s=WAIT_S, what=f"both results; output:\n{process.text()}")
    assert sorted((r["status"], r["output"]) for r in found.values()) == [
        ("error", "RuntimeError: order A-17 has already shipped"), ("ok", "order A-17: shipped")]
    output = wait_for(lambda: "Traceback" in process.text() and process.text(), what="the traceback")
    assert "tool cancel_order raised RuntimeError: order A-17 has already shipped" in output
    assert 'raise RuntimeError(f"order {order_id} has already shipped")' in output
    assert f"conversation_id={cid}" in output


def test_the_dev_key_is_kept_across_restarts_and_still_opens_the_api(dev, shop):
    first = dev()
    first.wait_banner()
    key = first.key()
    first.stop()
    second = dev()
    second.wait_banner()
    assert second.key() == key
    with second.client(key) as api:
        assert api.get("/v1/conversations").status_code == 200
    assert (shop / "agentq.db.dev-key").stat().st_mode & 0o077 == 0  # its owner's only


def test_a_key_given_with_key_is_the_one_accepted_and_is_not_printed(dev):
    process = dev("--key", "aq_given_for_this_test")
    wait_for(lambda: "profiles:" in process.text(), timeout_s=WAIT_S, what=f"the banner:\n{process.text()}")
    assert "API key of tenant" not in process.text()
    with process.client("aq_given_for_this_test") as api:
        assert api.get("/v1/conversations").status_code == 200
    with process.client("aq_some_other_key") as api:
        assert api.get("/v1/conversations").status_code == 401


def test_a_tool_module_that_cannot_be_imported_is_named_with_what_to_check(shop):
    done = subprocess.run([AGENTQ, "dev", "--port", "0"], cwd=shop, capture_output=True, text=True,
                          timeout=60, env={**os.environ, "AGENTQ_TOOLS": "shop_tool"})
    assert done.returncode == 2
    assert done.stderr.startswith(f"agentq dev: cannot import 'shop_tool' (AGENTQ_TOOLS=shop_tool) from {shop}")


def test_with_the_demo_off_a_conversation_naming_no_profile_gets_the_policys_default(dev):
    process = dev(AGENTQ_DEMO="off")
    banner = wait_for(lambda: "warning:" in process.text() and process.text(), timeout_s=WAIT_S,
                      what=f"the banner:\n{process.text()}")
    assert ("  warning: no profile can answer: openai needs OPENAI_API_KEY, anthropic needs "
            "ANTHROPIC_API_KEY (set a key, or AGENTQ_DEMO=on for the offline scripted profile)") in banner
    process.wait_banner()
    with process.client() as api:
        bare = api.post("/v1/conversations", json={"settings": {}})
        assert bare.status_code == 422 and bare.json()["error"]["code"] == "model_required", bare.text
        assert "profile 'openai' needs a model" in bare.json()["error"]["message"]
        created = api.post("/v1/conversations", json={"settings": {"model": "gpt-4o-mini"}})
        assert created.status_code == 201, created.text
        assert created.json()["settings"]["profile"] == "openai"


def test_agentq_policy_reads_the_demo_default_the_procfiles_processes_read(shop):
    def policy(**env: str) -> str:
        clean = {k: v for k, v in os.environ.items() if not k.startswith("AGENTQ_")}
        return subprocess.run([AGENTQ, "policy"], cwd=shop, capture_output=True, text=True,
                              timeout=60, env={**clean, **env}, check=True).stdout

    fleet = policy(AGENTQ_BROKER_URL="redis://127.0.0.1:6379/0")
    assert fleet.startswith("policy: built-in (demo mode off: the default with a named broker")
    assert "profile scripted" not in fleet and "settings that name no profile get: openai" in fleet
    alone = policy()
    assert alone.startswith("policy: built-in (demo mode on: the default with the embedded broker)")


def test_dev_reload_restarts_on_a_change_and_serves_the_new_tool_on_the_same_url_and_key(dev, shop):
    process = dev("--reload")
    first = process.wait_banner()
    assert "tools: lookup_order, cancel_order\n" in first
    url, key = process.url(), process.key()
    with open(shop / "shop_tools.py", "a") as module:
        module.write(REFUND)
    second = process.wait_banner(2)
    assert "tools: lookup_order, cancel_order, refund\n" in second
    assert (process.url(), process.key()) == (url, key)
    with process.client(key) as api:
        created = wait_for(lambda: _created(api, {"tools": ["refund"]}), timeout_s=WAIT_S,
                           what="the restarted API")
    assert created["settings"]["tools"] == ["refund"]


def _created(api: httpx2.Client, settings: dict) -> dict | None:
    try:
        answer = api.post("/v1/conversations", json={"settings": settings})
    except httpx2.TransportError:
        return None  # the new child is not listening yet
    assert answer.status_code == 201, answer.text
    return answer.json()
