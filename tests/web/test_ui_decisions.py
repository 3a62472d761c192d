"""The page and who may decide, in a real headless Chromium against `agentq dev` (SQLite,
embedded worker) whose policy lets only keys with the role finance decide refunds: a key
without it sees who may and no buttons; a key with it approves with edited arguments."""
from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from agentq.process.clock import utcnow
from agentq.store import Store
from tests.support.processes import ROOT, wait_for
from tests.web.test_ui_browser import (
    ASKED,
    REFUND,
    WAIT_S,
    DevServer,
    _stop,
    browser,
    texts,
    visible,
    wait,
)

pytestmark = pytest.mark.slow  # a browser and an `agentq dev` process
__all__ = ["browser"]  # the browser fixture, shared with the page's other tests

try:
    from selenium.webdriver.common.by import By
except ImportError:  # pragma: no cover - the browser fixture skips without selenium
    By = None


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ui-deciders")


@pytest.fixture(scope="module")
def server(folder: Path) -> Iterator[DevServer]:
    secret = secrets.token_urlsafe(16)
    policy = folder / "policy.toml"
    policy.write_text('[profiles.scripted]\nkind = "scripted"\nmodels = ["scripted"]\n\n'
                      '[deciders.refund_order]\nroles = ["finance"]\n')
    env = dict(os.environ, AGENTQ_DATABASE_URL=f"sqlite:///{folder / 'agentq.db'}",
               AGENTQ_API_KEY=f"ui:{secret}", PYTHONUNBUFFERED="1", PYTHONPATH=str(ROOT),
               AGENTQ_POLICY=str(policy))
    for name in ("AGENTQ_BROKER_URL", "AGENTQ_REDIS_URL", "AGENTQ_TOOLS", "AGENTQ_DEMO"):
        env.pop(name, None)
    log_path = folder / "dev.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agentq.cli", "dev", "--host", "127.0.0.1", "--port", "0"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
    try:
        found = wait_for(
            lambda: proc.poll() is not None or re.search(r"API on (http://127\.0\.0\.1:\d+)", log_path.read_text()),
            timeout_s=WAIT_S, what="agentq dev to serve",
        )
        assert proc.poll() is None, log_path.read_text()
        yield DevServer(proc=proc, url=found.group(1), key=secret)
    finally:
        _stop(proc)


@pytest.fixture(scope="module")
def finance_key(server: DevServer, folder: Path) -> str:
    """A key of the server's tenant with the role finance, made as `agentq keys create --role` does."""
    store = Store.open(f"sqlite:///{folder / 'agentq.db'}")
    try:
        return store.keys.create("ui", utcnow(), roles=("finance",))[1]
    finally:
        store.dispose()


def sign_in(driver, server: DevServer, key: str, user: str):
    driver.get(server.url + "/")
    driver.execute_script("sessionStorage.clear()")
    driver.get(server.url + "/")
    visible(driver, "#key-form")
    driver.find_element(By.ID, "key").send_keys(key)
    driver.find_element(By.ID, "user").send_keys(user)
    driver.find_element(By.CSS_SELECTOR, "#key-form button").click()
    visible(driver, "#nav")
    return driver


def gated_refund(server: DevServer, user: str) -> tuple[str, str]:
    cid = server.create(script=REFUND)
    answer = httpx2.post(f"{server.url}/v1/conversations/{cid}/messages", json={"content": ASKED},
                         headers={**server.headers, "X-Agentq-User": user}, timeout=10)
    assert answer.is_success, answer.text
    [call] = server.wait_for_state(cid, "awaiting_input")["pending"]
    return cid, call["tool_call_id"]


def test_a_key_without_the_role_sees_who_may_decide_and_no_buttons(browser, server):
    cid, call_id = gated_refund(server, "carla")
    page = sign_in(browser, server, server.key, "pat")
    page.find_element(By.LINK_TEXT, "Approvals").click()
    other = visible(page, f"#others-decide li[data-call-id='{call_id}']")
    assert "only a key with role finance may decide it" in other.text
    assert page.find_elements(By.CSS_SELECTOR, f"#approvals .approval[data-key='{cid}/{call_id}']") == []
    page.get(f"{server.url}/ui/#/conversation/{cid}")
    box = visible(page, f"#pending .pending-call.others[data-call-id='{call_id}']")
    assert "only a key with role finance may decide it" in box.text
    assert box.find_elements(By.CSS_SELECTOR, "button") == []
    refused = httpx2.post(f"{server.url}/v1/conversations/{cid}/tool-calls/{call_id}/resolution",
                          json={"status": "approved"}, headers=server.headers, timeout=10)
    assert refused.status_code == 403
    assert server.call("GET", f"/v1/conversations/{cid}")["state"] == "awaiting_input"


def test_a_key_with_the_role_approves_with_edited_arguments_and_the_tool_runs_with_them(
    browser, server, finance_key
):
    cid, call_id = gated_refund(server, "carla")
    page = sign_in(browser, server, finance_key, "pat")
    page.find_element(By.LINK_TEXT, "Approvals").click()
    card = visible(page, f"#approvals .approval[data-key='{cid}/{call_id}']")
    edits = card.find_element(By.CSS_SELECTOR, "textarea.edit-args")
    edits.clear()
    edits.send_keys('{"order": "A-17", "amount": 129.9, "reason": "arrived broken"}')
    card.find_element(By.CSS_SELECTOR, "button.approve").click()
    assert "It runs with your arguments" in visible(card, ".confirm .question").text
    card.find_element(By.CSS_SELECTOR, "button.confirm-approve").click()
    page.get(f"{server.url}/ui/#/conversation/{cid}")
    wait(page, lambda d: "refunded 129.90 EUR on order A-17" in " ".join(texts(d, "#log .call .result")),
         "the refund's result, with the person's amount")
    [note] = texts(page, "#log .note.resolution")
    assert "approved by pat" in note and "arguments changed to" in note
