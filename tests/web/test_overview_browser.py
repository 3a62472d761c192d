"""The operator's overview on the page, in a real headless Chromium against `agentq dev`
(SQLite, embedded worker) whose policy prices the scripted model and which has an operator's
key: two tenants' conversations, with and without an agent, are charted per tenant and agent
at what their tokens cost, and the costliest turn links to its timeline."""
from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx2
import pytest

from agentq.process.clock import utcnow
from agentq.store import Store
from tests.support.processes import ROOT, wait_for
from tests.web.test_ui_browser import WAIT_S, DevServer, _stop, browser, shoot, visible, wait

pytestmark = pytest.mark.slow  # a browser and an `agentq dev` process
__all__ = ["browser"]  # the browser fixture, shared with the page's other tests

try:
    from selenium.webdriver.common.by import By
except ImportError:  # pragma: no cover - the browser fixture skips without selenium
    By = None

# per million tokens: one input token costs 1,500 nanos, one output token 6,000
PRICES = '[prices.scripted]\ninput = 1.5\noutput = 6\n'
NANOS_PER_INPUT, NANOS_PER_OUTPUT = 1500, 6000
LONG = " ".join(["The refund of order A-17 is approved and on its way back to your card."] * 12)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ui-overview")


@pytest.fixture(scope="module")
def operator_key() -> str:
    return secrets.token_urlsafe(16)


@pytest.fixture(scope="module")
def server(folder: Path, operator_key: str) -> Iterator[DevServer]:
    secret = secrets.token_urlsafe(16)
    policy = folder / "policy.toml"
    policy.write_text('[profiles.scripted]\nkind = "scripted"\nmodels = ["scripted"]\n\n' + PRICES)
    env = dict(os.environ, AGENTQ_DATABASE_URL=f"sqlite:///{folder / 'agentq.db'}",
               AGENTQ_API_KEY=f"ui:{secret}", AGENTQ_OPERATOR_KEY=operator_key,
               PYTHONUNBUFFERED="1", PYTHONPATH=str(ROOT), AGENTQ_POLICY=str(policy))
    for name in ("AGENTQ_BROKER_URL", "AGENTQ_REDIS_URL", "AGENTQ_TOOLS", "AGENTQ_DEMO"):
        env.pop(name, None)
    log_path = folder / "dev.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agentq.cli", "dev", "--host", "127.0.0.1", "--port", "0"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        found = wait_for(
            lambda: proc.poll() is not None
            or re.search(r"API on (http://127\.0\.0\.1:\d+)", log_path.read_text()),
            timeout_s=WAIT_S, what="agentq dev to serve")
        assert proc.poll() is None, log_path.read_text()
        yield DevServer(proc=proc, url=found.group(1), key=secret, database_url=env["AGENTQ_DATABASE_URL"])
    finally:
        _stop(proc)


@pytest.fixture(scope="module")
def other_tenant(server: DevServer) -> DevServer:
    """The same server with a key of the tenant acme, made as `agentq keys create` does."""
    store = Store.open(server.database_url)
    try:
        secret = store.keys.create("acme", utcnow())[1]
    finally:
        store.dispose()
    return DevServer(proc=server.proc, url=server.url, key=secret, database_url=server.database_url)


def run_turn(server: DevServer, text: str, agent: str | None = None,
             script_text: str = "Done.") -> tuple[str, str]:
    """A conversation (of `agent`, else with a script of its own) whose one turn has ended."""
    if agent is None:
        cid = server.create(script=[{"text": script_text}])
    else:
        cid = server.call("POST", "/v1/conversations", {"agent": agent})["id"]
    server.say(cid, text)
    return cid, server.wait_for_state(cid, "idle")["turn_id"]


def cost_by(server: DevServer, dimension: str) -> dict[str | None, tuple[int, int]]:
    """Per `dimension`, from the tenant's own /v1/usage: its tokens and their cost in nanos at
    the policy's prices (tokens times prices, not the overview's figures)."""
    today = utcnow().replace(hour=0, minute=0, second=0, microsecond=0)
    params = {"from": today.isoformat(), "to": (today + timedelta(days=1)).isoformat(), "by": dimension}
    rows = httpx2.get(server.url + "/v1/usage", headers=server.headers, timeout=10,
                      params=params).json()["rows"]
    out: dict[str | None, tuple[int, int]] = {}
    for row in rows:
        tokens, nanos = out.get(row["group"][dimension], (0, 0))
        cost = row["input_tokens"] * NANOS_PER_INPUT + row["output_tokens"] * NANOS_PER_OUTPUT
        out[row["group"][dimension]] = (tokens + row["input_tokens"] + row["output_tokens"], nanos + cost)
    return out


def money(nanos: int) -> str:
    return f"{nanos // 10**9}.{nanos % 10**9:09d}"


def test_the_overview_charts_each_tenant_and_agent_at_its_cost_and_links_the_costliest_turn(
        browser, server, other_tenant, operator_key):
    server.call("POST", "/v1/agents", {"name": "support",
                                       "settings": {"script": [{"text": "Your parcel left today."}]}})
    other_tenant.call("POST", "/v1/agents", {"name": "billing",
                                             "settings": {"script": [{"text": "Invoice 9 is paid."}]}})
    run_turn(server, "Where is my parcel?", agent="support")
    run_turn(server, "Where is my other parcel?", agent="support")
    costly, costly_turn = run_turn(server, "Please refund order A-17 and tell me all about it.",
                                   script_text=LONG)
    run_turn(other_tenant, "Is invoice 9 paid?", agent="billing")
    expected = {("ui", agent): figures for agent, figures in cost_by(server, "agent").items()}
    expected |= {("acme", agent): figures for agent, figures in cost_by(other_tenant, "agent").items()}
    assert set(expected) == {("ui", "support"), ("ui", None), ("acme", "billing")}
    assert all(nanos > 0 for _, nanos in expected.values())
    by_conversation = cost_by(server, "conversation") | cost_by(other_tenant, "conversation")
    assert max(by_conversation, key=lambda cid: by_conversation[cid][1]) == costly

    browser.get(server.url + "/")
    browser.execute_script("sessionStorage.clear()")
    browser.get(server.url + "/")
    visible(browser, "#key-form")
    browser.find_element(By.ID, "key").send_keys(operator_key)
    browser.find_element(By.CSS_SELECTOR, "#key-form button").click()
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#overview[data-state=loaded]"), "the overview")
    # the operator's key reads no tenant's pages: the nav offers the overview alone
    shown = [link.text for link in browser.find_elements(By.CSS_SELECTOR, "#nav a") if link.is_displayed()]
    assert shown == ["Overview"]

    legend = browser.execute_script("""
        return [...document.querySelectorAll('#overview-series .ov-series')].map((li) => ({
          tenant: li.dataset.tenant, agent: li.dataset.agent, cost: li.dataset.cost,
          tokens: Number(li.dataset.tokens), text: li.innerText}));""")
    assert {(item["tenant"], item["agent"] or None): (item["tokens"], item["cost"]) for item in legend} == \
        {key: (tokens, money(nanos)) for key, (tokens, nanos) in expected.items()}
    for item in legend:
        name = f"{item['tenant']} / {item['agent'] or 'no agent'}"
        assert name in item["text"] and f"{item['tokens']:,} tokens" in item["text"]
        assert item["cost"].rstrip("0") in item["text"]
        for chart in ("overview-cost", "overview-tokens"):
            selector = f"#{chart} rect.ov-bar[data-tenant='{item['tenant']}'][data-agent='{item['agent']}']"
            bars = browser.find_elements(By.CSS_SELECTOR, selector)
            assert len(bars) == 1 and float(bars[0].get_attribute("height")) > 0  # today's bar
    total = sum(nanos for _, nanos in expected.values())
    assert money(total).rstrip("0") in browser.find_element(By.ID, "overview-total").text

    first = browser.find_element(By.CSS_SELECTOR, "#overview-costliest tbody tr")
    assert first.get_attribute("data-turn") == costly_turn and first.get_attribute("data-tenant") == "ui"
    assert first.get_attribute("data-cost") == money(by_conversation[costly][1])
    shoot(browser, "usage-overview")  # docs/images/usage-overview.png is one of these

    first.find_element(By.CSS_SELECTOR, "a.timeline-link").click()
    ended = "#timeline[data-state=ended] .tl-row.step[data-kind=llm]"
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ended), "the costliest turn's timeline")
    assert costly in browser.current_url and costly_turn in browser.current_url
