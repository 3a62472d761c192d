"""A turn's timeline on the page, in a real headless Chromium, against real processes: an
`agentq api`, Celery workers (one killed mid-step) and the sweeper on PostgreSQL and Redis.

The turn calls a tool whose worker is killed while it runs, asks a person for approval,
delegates to a sub-agent, and its first model call is refused once and retried; the page,
opened while the turn waits for the person, follows it to its end and shows each with its
attempts, and the sub-agent's own timeline is a click away.
"""
from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
from collections.abc import Iterator

import httpx2
import pytest

from agentq.core.agents import AgentDefinition
from agentq.core.scope import Scope
from agentq.core.settings import Settings
from agentq.process.clock import utcnow
from agentq.worker.tasks import enqueue
from tests.support.api_stack import free_port
from tests.support.processes import FAST_RECOVERY, ROOT, wait_for, worker_env
from tests.web.test_ui_browser import By, browser, shoot, texts, visible, wait  # noqa: F401

pytestmark = [pytest.mark.slow, pytest.mark.worker, pytest.mark.postgres, pytest.mark.redis]

SCOPE = Scope(tenant="t1", user="pat")
WAIT_S = 60
TURN = [
    # refused once by the provider, retried within the attempt, then three calls at once
    {"text": "Looking it up, asking you, and asking the researcher.", "chunks": 2,
     "fail": {"status": 500, "times": 1},
     "tool_calls": [{"name": "slow_lookup", "args": {"key": "order-17", "seconds": 4}},
                    {"name": "approve", "args": {"amount": 20}},
                    {"name": "researcher", "args": {"input": "Is order 17 late?"}}]},
    {"text": "All three answered.", "chunks": 2},
]


@pytest.fixture
def served(tmp_path, pg_url: str, broker_url: str, redis_url: str) -> Iterator[tuple[str, str]]:
    """`agentq api` on the test's database: its URL and a key of tenant t1."""
    key = "aq_" + secrets.token_urlsafe(24)
    port = free_port()
    env = worker_env(pg_url, broker_url, redis_url, AGENTQ_API_KEY=f"t1:{key}", **FAST_RECOVERY)
    with open(tmp_path / "api.log", "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "agentq.cli", "api", "--host", "127.0.0.1",
                                 "--port", str(port)], env=env, cwd=ROOT, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _ready(url, proc), timeout_s=90, what="the API to be ready")
        yield url, key
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def _ready(url: str, proc: subprocess.Popen) -> bool:
    assert proc.poll() is None, "agentq api exited"
    try:
        return httpx2.get(url + "/readyz", timeout=2, trust_env=False).status_code == 200
    except httpx2.TransportError:
        return False


def test_the_timeline_shows_a_killed_worker_a_retried_model_call_an_approval_and_a_sub_agent(
        pg_store_clean, commands, broker, workers, beat, served, browser, tmp_path):
    store = pg_store_clean
    url, key = served
    tool_log = tmp_path / "tool.log"
    tool_log.touch()
    store.agents.create("t1", AgentDefinition(name="researcher", settings=Settings(
        script=[{"text": "It left the warehouse yesterday.", "chunks": 3, "delay_s": 0.5}])),
        now=utcnow())
    conv = commands.create_conversation(SCOPE, {"script": TURN, "agents": ["researcher"]})
    _, follow = commands.post_message(conv.id, "Where is order 17?", SCOPE)
    enqueue(broker, follow)
    first = workers("w1", AGENTQ_TEST_TOOL_LOG=str(tool_log))
    wait_for(lambda: tool_log.read_text(), timeout_s=WAIT_S, what="the slow tool to start")
    first.kill()  # mid-step: the tool runs for four seconds
    workers("w2", AGENTQ_TEST_TOOL_LOG=str(tool_log))
    beat()
    # the sub-agent's call is pending too while its child runs: the approval is the human one
    [approval] = wait_for(lambda: [c for c in store.calls.list_of(conv.id, status="pending")
                                   if c.executor == "human"], timeout_s=WAIT_S,
                          what="the approval to wait")
    turn = store.log.list_events(conv.id)[0].turn_id

    browser.get(url + "/ui/")
    browser.execute_script("sessionStorage.setItem('agentq.key', arguments[0])", key)
    browser.get(f"{url}/ui/#/conversation/{conv.id}")
    visible(browser, "#log .turn h3 .timeline-link").click()
    # live: the turn waits for a person, and the page shows the wait still open
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#timeline[data-state=running] "
                                            ".tl-row.call[data-executor=human] .bar.wait-person"),
         "the running turn's timeline")
    assert "still waiting" in browser.find_element(
        By.CSS_SELECTOR, "#timeline .tl-row.call[data-executor=human] .bar.wait-person").get_attribute("title")
    httpx2.post(f"{url}/v1/conversations/{conv.id}/tool-calls/{approval.id}/resolution",
                json={"status": "resolved", "result": {"approved": True}},
                headers={"Authorization": f"Bearer {key}", "X-Agentq-User": "pat"}, timeout=10)
    # the same page, not reloaded, follows the turn to its end
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#timeline[data-state=ended] .tl-row.step"),
         "the turn's timeline to end")
    outcomes = browser.execute_script("""
        return [...document.querySelectorAll('#timeline .tl-row.step')].map((row) => ({
          kind: row.dataset.kind, label: row.querySelector('.tl-label strong').textContent,
          attempts: [...row.querySelectorAll('.attempt')].map((a) => [a.dataset.outcome, a.dataset.worker]),
          retries: row.querySelector('.tag.retries')?.textContent || ''}));""")
    tool = next(step for step in outcomes if step["label"] == "tool slow_lookup")
    assert [outcome for outcome, _ in tool["attempts"]] == ["died", "done"]
    assert tool["attempts"][0][1] != tool["attempts"][1][1]  # taken over by the other worker
    first_model = next(step for step in outcomes if step["kind"] == "llm")
    assert first_model["retries"] == "1 provider retry" and first_model["attempts"][0][0] == "done"
    assert texts(browser, "#timeline .tl-row.call[data-executor=human] .bar.wait-person")
    assert sorted(texts(browser, "#timeline .tl-row.call .call-name")) == \
        ["approve", "researcher", "slow_lookup"]
    shoot(browser, "turn-timeline")

    browser.find_element(By.CSS_SELECTOR, "#timeline .tl-row.call[data-executor=agent] a.child-timeline").click()
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#timeline[data-state=ended] .tl-row.step[data-kind=llm] .attempt[data-outcome=done]"),
         "the sub-agent's own timeline")
    assert conv.id not in browser.current_url and turn not in browser.current_url
    assert store.conversations.load(conv.id).fsm.rounds == 2

    browser.get(f"{url}/ui/#/tree/{conv.id}")
    wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#tree .tree-node")) == 2, "the tree")
    nodes = texts(browser, "#tree .tree-node .tokens")
    assert all("model call(s)" in node for node in nodes) and len(nodes) == 2
    shoot(browser, "agent-tree")
