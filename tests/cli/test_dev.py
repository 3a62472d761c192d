"""`agentq dev` (and `agentq policy`, which loads the tools the same way) as a developer runs
it: from the directory of their tools, with the console script (so nothing but the command
puts that directory on sys.path), over HTTP only; webhooks to a receiver on the same machine."""
from __future__ import annotations

import os
import re
import subprocess
import textwrap
from pathlib import Path

import httpx2
import pytest
from standardwebhooks import Webhook
from watchfiles import Change

from agentq.cli.dev import dev_config
from agentq.cli.reload import LoadedFiles, say_loaded
from agentq.config import Config
from tests.support.dev import AGENTQ, WAIT_S, Dev
from tests.support.processes import wait_for
from tests.support.receiver import Receiver

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


OFFLINE_AGENT = '''

def greeter_model(request: agentq.ModelRequest):
    """Look the order up, then say what the lookup returned."""
    if not request.results:
        return {"tool_calls": [{"name": "lookup_order", "args": {"order_id": request.text}}]}
    return f"{request.results[0].status}: {request.results[0].text}"


greeter = agentq.agent("greeter", model=greeter_model, tools=[lookup_order])
'''


def test_with_the_demo_off_a_code_agents_model_function_answers_and_no_tenant_names_it(dev, shop):
    (shop / "shop_tools.py").write_text(textwrap.dedent(SHOP_TOOLS) + OFFLINE_AGENT)
    process = dev(AGENTQ_DEMO="off")
    banner = process.wait_banner()
    assert "  agents: greeter, support\n" in banner
    with process.client() as api:
        created = api.post("/v1/conversations", json={"agent": "greeter"})
        assert created.status_code == 201, created.text
        cid = created.json()["id"]
        posted = api.post(f"/v1/conversations/{cid}/messages", json={"content": "A-17"})
        assert posted.status_code in (201, 202)

        def answered() -> str | None:
            events = api.get(f"/v1/conversations/{cid}/events").json()["events"]
            texts = [e["content"]["text"] for e in events if e["type"] == "assistant_msg"]
            return len(texts) == 2 and texts[-1]
        assert wait_for(answered, timeout_s=WAIT_S, what=f"the answer; output:\n{process.text()}") == (
            "ok: order A-17: shipped")
        named = api.post("/v1/conversations", json={"settings": {"profile": "function",
                                                                 "model": "greeter_model"}})
        assert named.status_code == 422 and named.json()["error"]["code"] == "unknown_profile"


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


# ---- what dev and policy load, and list ----------------------------------------------------------

SHOP_PACKAGE = {
    "shop/__init__.py": "",
    "shop/prices.py": "def price(order_id: str) -> float:\n    return 12.5\n",
    "shop/tools.py": '''
import agentq
from shop.prices import price


@agentq.tool
def lookup(order_id: str) -> str:
    """Look an order up."""
    return f"{order_id}: {price(order_id)}"


@agentq.tool(needs_approval=True)
def refund(order_id: str, amount: float) -> str:
    """Refund part of an order."""
    return f"refunded {amount} on {order_id}"


@agentq.tool(executor="human")
def ask(question: str) -> None:
    """Ask a person."""


support = agentq.agent("support", system="You help with orders.", tools=[lookup, refund])
''',
    "policy.toml": '''
[mcp.files]
command = ["python", "files_server.py"]

[mcp.crm]
url = "https://crm.example.com/mcp"
tenants = ["acme"]
''',
    "client.py": "# the developer's own script, which the server never imports\n",
}
SHOP_TOOLS_LINE = "  tools: lookup, refund (needs approval), ask (human)\n"
SHOP_SERVERS_LINE = ("  mcp servers: mcp:files (stdio: python files_server.py; tenants all), "
                     "mcp:crm (https://crm.example.com/mcp; tenants acme)\n")


@pytest.fixture
def package(tmp_path: Path) -> Path:
    """A project whose tools are a package (`shop.tools`) importing a sibling, with a policy."""
    for name, text in SHOP_PACKAGE.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(textwrap.dedent(text))
    return tmp_path


def policy_of(cwd: Path, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AGENTQ_") and k != "PYTHONPATH"}
    return subprocess.run([AGENTQ, "policy"], cwd=cwd, capture_output=True, text=True, timeout=60,
                          env={**clean, **env})


def test_agentq_policy_loads_the_tools_dev_loads_and_lists_gated_tools_agents_and_mcp_servers(package):
    done = policy_of(package, AGENTQ_TOOLS="shop.tools", AGENTQ_POLICY="policy.toml")
    assert done.returncode == 0, done.stderr
    assert SHOP_TOOLS_LINE in done.stdout and SHOP_SERVERS_LINE in done.stdout
    assert "  agent support: defined in code; tenants all\n" in done.stdout


def test_agentq_policy_names_a_tool_module_that_cannot_be_imported_in_one_line(package):
    done = policy_of(package, AGENTQ_TOOLS="shop.missing")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (f"agentq policy: cannot import 'shop.missing' (AGENTQ_TOOLS=shop.missing) "
                           f"from {package} or sys.path: is the module's file in this directory, "
                           "or its package installed?\n")


@pytest.mark.slow
def test_agentq_devs_banner_lists_gated_tools_and_the_policys_mcp_servers(package):
    process = Dev(package, AGENTQ_TOOLS="shop.tools", AGENTQ_POLICY="policy.toml")
    try:
        banner = process.wait_banner()
    finally:
        process.stop()
    assert SHOP_TOOLS_LINE in banner and SHOP_SERVERS_LINE in banner
    assert "  agents: support\n" in banner


def test_the_reload_filter_takes_what_the_child_said_it_loaded_and_before_that_any_python_file(tmp_path):
    said, policy = tmp_path / "loaded.json", str(tmp_path / "policy.toml")
    watched = LoadedFiles(said, policy)
    tools, client = str(tmp_path / "shop_tools.py"), str(tmp_path / "client.py")
    assert watched(Change.modified, client) and watched(Change.modified, policy)  # nothing said yet
    assert not watched(Change.modified, str(tmp_path / "agentq.db"))
    say_loaded(str(said), [tools, policy])
    assert watched(Change.modified, tools) and watched(Change.modified, policy)
    assert not watched(Change.modified, client)
    said.unlink()  # a restart: the next child has not said yet
    assert watched(Change.modified, client)


@pytest.mark.slow
def test_dev_reload_restarts_for_what_the_server_loads_and_the_policy_not_for_a_client_script(package):
    process = Dev(package, "--reload", AGENTQ_TOOLS="shop.tools", AGENTQ_POLICY="policy.toml")
    try:
        first = process.wait_banner()
        for name, count in (("client.py", 0), ("shop/prices.py", 2), ("policy.toml", 3)):
            with open(package / name, "a") as edited:
                edited.write("\n# edited\n")
            if count:  # the client script's change comes before the next one's, in order
                process.wait_banner(count)
        restarts = re.findall(r"agentq dev --reload: (.*) changed; restarting", process.text())
    finally:
        process.stop()
    assert restarts == ["shop/prices.py", "policy.toml"]
    assert ("  reloads when these change: policy.toml, shop/__init__.py, shop/prices.py, "
            "shop/tools.py\n") in first


# ---- webhooks on the developer's own box -----------------------------------------------------------

def test_dev_opens_webhooks_to_loopback_and_http_unless_told_otherwise_and_production_stays_strict(tmp_path):
    database = {"AGENTQ_DATABASE_URL": f"sqlite:///{tmp_path / 'agentq.db'}"}
    config, sealed_in = dev_config(database)
    assert config.webhook_allow_http and config.webhook_allow_loopback
    assert sealed_in == tmp_path / "agentq.db.dev-encryption-key"
    assert config.encryption_keys == sealed_in.read_text().strip()
    assert dev_config(database)[0].encryption_keys == config.encryption_keys  # kept, not made again
    told, _ = dev_config({**database, "AGENTQ_WEBHOOK_ALLOW_HTTP": "off"})
    assert not told.webhook_allow_http and told.webhook_allow_loopback
    production = Config.from_env(database)
    assert not (production.webhook_allow_http or production.webhook_allow_loopback)
    assert production.encryption_keys is None


@pytest.mark.slow
def test_a_webhook_registered_in_dev_is_delivered_signed_to_a_loopback_receiver_after_a_restart(dev):
    first = dev()
    assert "  webhooks: http and loopback URLs allowed (dev only); secrets sealed with the dev " \
           "encryption key in " in first.wait_banner()
    with Receiver() as receiver:
        with first.client() as api:
            made = api.post("/v1/webhooks", json={"url": receiver.url, "event_types": ["turn.completed"]})
        assert made.status_code == 201, made.text
        first.stop()
        second = dev()
        second.wait_banner()
        with second.client(first.key()) as api:
            created = api.post("/v1/conversations", json={"settings": {"script": [{"text": "Shipped."}]}})
            cid = created.json()["id"]
            assert api.post(f"/v1/conversations/{cid}/messages", json={"content": "Where is A-17?"}
                            ).status_code in (201, 202)
        [delivery] = wait_for(lambda: receiver.requests, timeout_s=WAIT_S, what="the delivery")
    payload = Webhook(made.json()["secret"]).verify(delivery.body, delivery.headers)
    assert payload["type"] == "turn.completed" and payload["data"]["conversation_id"] == cid
    assert payload["data"]["answer"]["text"] == "Shipped."
