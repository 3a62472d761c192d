"""The page in a real headless Chromium against a real `agentq dev` process (SQLite, embedded worker).

A person signs in with a key, opens a conversation that waits on them, approves the call
and watches the answer stream in; the approvals page lists calls of every conversation;
a failed conversation's retry button re-drives it. Chromium and chromedriver are Debian's
(/usr/bin): nothing is downloaded. Missing, they skip these tests, or fail them under CI.
"""
from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.support.emulators import Fail, OpenAIEmulator, Reply
from tests.support.processes import ROOT, wait_for
from tests.support.unavailable import unavailable

pytestmark = pytest.mark.slow  # a browser and an `agentq dev` process

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
WAIT_S = 30
MODEL_KEY_VARIABLE = "AGENTQ_UI_TEST_MODEL_KEY"
ANSWER = "Approved, so the payment of 20 to Bob is on its way now."
APPROVAL = [
    {"text": "A person must approve this payment.", "chunks": 2,
     "tool_calls": [{"name": "approve_payment", "args": {"amount": 20, "to": "Bob"}}]},
    # eight pieces half a second apart: the page shows the answer growing before it is whole
    {"text": ANSWER, "chunks": 8, "delay_s": 4.0},
]

try:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webdriver import WebDriver
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError as exc:  # pragma: no cover - depends on the machine
    webdriver = None
    SELENIUM_MISSING: Exception | None = exc
else:
    SELENIUM_MISSING = None


@dataclass
class DevServer:
    """`agentq dev` in its own process group: its URL, its bootstrap key, and HTTP calls with it."""

    proc: subprocess.Popen
    url: str
    key: str
    database_url: str = ""  # its SQLite file, for a test that writes what no request can

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}

    def call(self, method: str, path: str, body: Any = None) -> Any:
        response = httpx2.request(method, self.url + path, json=body, headers=self.headers, timeout=10)
        assert response.is_success, response.text
        return response.json()

    def create(self, **settings: Any) -> str:
        return self.call("POST", "/v1/conversations", {"settings": settings})["id"]

    def say(self, cid: str, text: str) -> None:
        self.call("POST", f"/v1/conversations/{cid}/messages", {"content": text})

    def wait_for_state(self, cid: str, state: str) -> dict[str, Any]:
        return wait_for(lambda: (c := self.call("GET", f"/v1/conversations/{cid}"))["state"] == state and c,
                        timeout_s=WAIT_S, what=f"{cid} to be {state}")


@pytest.fixture(scope="module")
def model() -> Iterator[OpenAIEmulator]:
    """An OpenAI-compatible model that refuses its first request and answers after that."""
    with OpenAIEmulator() as emulator:
        yield emulator


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, model: OpenAIEmulator) -> Iterator[DevServer]:
    folder = tmp_path_factory.mktemp("ui")
    secret = secrets.token_urlsafe(16)
    policy = folder / "policy.toml"  # the operator's profile of the emulated model, and scripted
    policy.write_text(f'[profiles.scripted]\nkind = "scripted"\nmodels = ["scripted"]\n\n'
                      f'[profiles.emu]\nkind = "openai"\nbase_url = "{model.base_url}"\n'
                      f'key_env = "{MODEL_KEY_VARIABLE}"\n\n'
                      '[schedules]\nmin_interval_s = 1\n')  # a schedule's runs within a test
    env = dict(os.environ, AGENTQ_DATABASE_URL=f"sqlite:///{folder / 'agentq.db'}",
               AGENTQ_API_KEY=f"ui:{secret}", PYTHONUNBUFFERED="1", PYTHONPATH=str(ROOT),
               AGENTQ_POLICY=str(policy), **{MODEL_KEY_VARIABLE: model.api_key})
    for name in ("AGENTQ_BROKER_URL", "AGENTQ_REDIS_URL", "AGENTQ_TOOLS", "AGENTQ_DEMO"):
        env.pop(name, None)  # the embedded defaults and the demo tools
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
        yield DevServer(proc=proc, url=found.group(1), key=secret,
                        database_url=env["AGENTQ_DATABASE_URL"])
    finally:
        _stop(proc)


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM the process group (the worker shuts down warm), SIGKILL it if it lingers."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    if SELENIUM_MISSING is not None:
        unavailable(f"selenium ({SELENIUM_MISSING})")
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        unavailable(f"{CHROMIUM} and {CHROMEDRIVER} (apt-get install chromium chromium-driver)")
    options = Options()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1280,1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()  # stops chromedriver by its pid, and the browser with it


@pytest.fixture
def page(browser: WebDriver, server: DevServer) -> WebDriver:
    """The page, signed in as the person `pat` with the server's key."""
    browser.get(server.url + "/")
    browser.execute_script("sessionStorage.clear()")  # signed out, whatever the last test did
    browser.get(server.url + "/")
    visible(browser, "#key-form")
    browser.find_element(By.ID, "key").send_keys(server.key)
    browser.find_element(By.ID, "user").send_keys("pat")
    browser.find_element(By.CSS_SELECTOR, "#key-form button").click()
    visible(browser, "#nav")
    return browser


def wait(driver: WebDriver, condition, what: str):
    # the page re-renders lists on its own; an element found a moment ago may be gone
    return WebDriverWait(driver, WAIT_S, poll_frequency=0.05,
                         ignored_exceptions=(StaleElementReferenceException,)).until(
        condition, message=f"waiting for {what}")


def visible(driver: WebDriver, selector: str):
    return wait(driver, lambda d: next((e for e in d.find_elements(By.CSS_SELECTOR, selector) if e.is_displayed()), None),
                selector)


def live(driver: WebDriver) -> None:
    """Wait for a conversation page's stream to open: its toolbar's "connecting…" turns "live",
    which can move what is below it, so a click before then may land elsewhere."""
    wait(driver, lambda d: d.find_element(By.ID, "live").text == "live", "the stream to be open")


def texts(driver: WebDriver, selector: str) -> list[str]:
    """The texts of every match, read in one go in the page (so none can go stale midway)."""
    return driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map((e) => e.innerText.trim());", selector)


def test_the_page_and_its_files_are_served_under_a_policy_that_runs_only_them(api):
    home = api.client.get("/")
    assert home.status_code == 302 and home.headers["Location"] == "/ui/"
    assert api.client.get("/ui").status_code == 308  # so the page's relative links resolve
    page = api.client.get("/ui/")
    assert page.status_code == 200 and page.mimetype == "text/html"
    assert "script-src 'self'" in page.headers["Content-Security-Policy"]
    assert "unsafe-inline" not in page.headers["Content-Security-Policy"]
    assert b'<script src="app.js" defer></script>' in page.data
    for name, mimetype in (("app.js", "text/javascript"), ("app.css", "text/css")):
        served = api.client.get(f"/ui/{name}")
        assert served.status_code == 200 and served.mimetype == mimetype
        assert served.headers["X-Content-Type-Options"] == "nosniff"
    assert api.client.get("/ui/../web/ui.py").status_code == 404
    assert b"innerHTML" not in api.client.get("/ui/app.js").data  # text reaches the DOM as text only


def test_a_refused_key_keeps_the_person_at_the_sign_in_form(browser, server):
    browser.get(server.url + "/ui/")
    browser.execute_script("sessionStorage.clear()")
    browser.get(server.url + "/ui/")
    browser.find_element(By.ID, "key").send_keys("not-the-key")
    browser.find_element(By.CSS_SELECTOR, "#key-form button").click()
    wait(browser, lambda d: "refused" in d.find_element(By.ID, "login-error").text, "the refusal")
    assert not browser.find_element(By.ID, "nav").is_displayed()
    assert browser.execute_script("return sessionStorage.getItem('agentq.key')") is None


def test_a_person_approves_a_waiting_call_and_watches_the_answer_stream_in(page, server):
    cid = server.create(profile="scripted", script=APPROVAL)
    server.say(cid, "pay Bob 20")
    server.wait_for_state(cid, "awaiting_input")

    page.get(server.url + "/ui/#/conversations/awaiting_input")
    wait(page, lambda d: cid in texts(d, "#conversations .conversation-link"), "the waiting conversation listed")
    page.find_element(By.LINK_TEXT, cid).click()
    visible(page, "#pending .pending-call button.approve")
    assert "approve_payment" in page.find_element(By.CSS_SELECTOR, "#pending .call-name").text
    live(page)
    page.find_element(By.CSS_SELECTOR, "#pending button.approve").click()
    page.find_element(By.CSS_SELECTOR, "#pending button.confirm-approve").click()

    def partial(d):
        shown = [t for t in texts(d, "#log .answer.partial") if t]
        return shown[0] if shown else None

    growing = wait(page, partial, "part of the answer")
    assert ANSWER.startswith(growing) and len(growing) < len(ANSWER)
    wait(page, lambda d: ANSWER in texts(d, "#log .answer.final .text"), "the whole answer")
    assert texts(page, "#log .answer.partial") == []  # the finished message replaced the deltas
    assert re.fullmatch(r"#\d+\s*model\s*" + re.escape(ANSWER), texts(page, "#log .answer.final")[-1])
    [resolution] = texts(page, "#log .note.resolution")
    assert "resolved by pat" in resolution
    call = page.find_element(By.CSS_SELECTOR, "#log .call .result")
    assert "ok" in call.text and '"approved": true' in call.text
    wait(page, lambda d: d.find_element(By.ID, "state").text == "idle", "the turn to end")
    assert not page.find_element(By.ID, "pending").is_displayed()


def test_messages_from_the_box_are_shown_as_text_never_as_markup(page, server):
    cid = server.create(profile="scripted", script=[])
    page.get(f"{server.url}/ui/#/conversation/{cid}")
    live(page)
    markup = 'hi <img src=x id=injected onerror="document.title=1"> <b>bold</b>'
    page.find_element(By.ID, "message").send_keys(markup)
    page.find_element(By.CSS_SELECTOR, "#message-form button[type=submit]").click()
    wait(page, lambda d: markup in texts(d, "#log .msg.user .text"), "the message in the log")
    wait(page, lambda d: f"echo: {markup}" in texts(d, "#log .answer.final .text"), "the echo")
    assert page.find_elements(By.CSS_SELECTOR, "#log img, #log b, #injected") == []
    assert page.find_element(By.ID, "message").get_attribute("value") == ""


def test_the_approvals_page_lists_calls_of_every_conversation_and_rejects_one(page, server):
    first, second = server.create(script=APPROVAL), server.create(script=APPROVAL)
    for cid in (first, second):
        server.say(cid, "pay Bob 20")
    calls = {cid: server.wait_for_state(cid, "awaiting_input")["pending"][0]["tool_call_id"] for cid in (first, second)}

    page.find_element(By.LINK_TEXT, "Approvals").click()
    listed = lambda d: set(texts(d, "#approvals .approval .conversation-link"))
    wait(page, lambda d: {first, second} <= listed(d), "both waiting calls")
    card = page.find_element(By.CSS_SELECTOR, f"#approvals .approval[data-key='{first}/{calls[first]}']")
    assert card.find_element(By.CSS_SELECTOR, ".fields").text.split() == ["amount", "20", "to", "Bob"]
    card.find_element(By.CSS_SELECTOR, "input.reply").send_keys("Bob is not a known payee")
    card.find_element(By.CSS_SELECTOR, "button.reject").click()
    assert "Bob is not a known payee" in visible(card, ".confirm .question").text
    card.find_element(By.CSS_SELECTOR, "button.confirm-reject").click()

    wait(page, lambda d: first not in listed(d), "the rejected call to leave the queue")
    assert second in listed(page)
    [closed] = server.call("GET", f"/v1/conversations/{first}/tool-calls")["tool_calls"]
    assert closed["status"] == "resolved"
    assert closed["result"] == {"approved": False, "reason": "Bob is not a known payee"}


SCREENS = Path(os.environ.get("AGENTQ_SCREENS", "/work/coord/screens"))
REFUND = [
    {"text": "Let me look the order up first.", "chunks": 2,
     "tool_calls": [{"name": "lookup_order", "args": {"order": "A-17"}}]},
    {"text": "The order exists; refunding the espresso machine now.", "chunks": 2,
     "tool_calls": [{"name": "refund_order",
                     "args": {"order": "A-17", "amount": 1299.0, "reason": "arrived broken"}}]},
    {"text": "I could not refund it: the refund was not approved.", "chunks": 2},
]
ASKED = "My espresso machine arrived broken. Please refund order A-17."


def shoot(driver: WebDriver, name: str) -> None:
    """A screenshot for people to look at; the folder is the operator's (AGENTQ_SCREENS)."""
    SCREENS.mkdir(parents=True, exist_ok=True)
    height = driver.execute_script("return document.body.scrollHeight")
    driver.set_window_size(1280, max(1000, min(int(height) + 100, 4000)))
    driver.save_screenshot(str(SCREENS / f"{name}.png"))
    driver.set_window_size(1280, 1000)


def gated_refund(server: DevServer, user: str) -> tuple[str, str]:
    cid = server.create(script=REFUND)
    answer = httpx2.post(f"{server.url}/v1/conversations/{cid}/messages", json={"content": ASKED},
                         headers={**server.headers, "X-Agentq-User": user}, timeout=10)
    assert answer.is_success, answer.text
    [call] = server.wait_for_state(cid, "awaiting_input")["pending"]
    assert call["needs_approval"] and call["name"] == "refund_order"
    return cid, call["tool_call_id"]


def test_an_approval_card_shows_what_a_person_decides_on_and_a_rejection_reads_as_one(page, server):
    cid, call_id = gated_refund(server, "carla")
    page.find_element(By.LINK_TEXT, "Approvals").click()
    card = visible(page, f"#approvals .approval[data-key='{cid}/{call_id}']")
    wait(page, lambda d: card.find_element(By.CSS_SELECTOR, ".title").text == ASKED, "the title")
    assert card.find_element(By.CSS_SELECTOR, ".acting-user").text == "Acting for carla"
    assert ASKED in card.find_element(By.CSS_SELECTOR, ".asked").text
    assert "refunding the espresso machine" in card.find_element(By.CSS_SELECTOR, ".said").text
    assert "Refunds above 100 EUR wait" in card.find_element(By.CSS_SELECTOR, ".description").text
    assert card.find_element(By.CSS_SELECTOR, ".fields").text.split("\n") == [
        "order", "A-17", "amount", "1299", "reason", "arrived broken"]
    earlier = card.find_element(By.CSS_SELECTOR, "details.earlier")
    assert "lookup_order" in earlier.text and "129.9" in earlier.text
    assert card.find_elements(By.CSS_SELECTOR, "button.answer") == []  # approve or reject only
    shoot(page, "approvals-gated-refund")

    card.find_element(By.CSS_SELECTOR, "input.reply").send_keys("the order says 129.90 EUR")
    card.find_element(By.CSS_SELECTOR, "button.reject").click()
    question = visible(card, ".confirm .question").text
    assert "refund_order" in question and "129.90 EUR" in question and "will not run" in question
    shoot(page, "approvals-reject-confirm")
    assert server.call("GET", f"/v1/conversations/{cid}")["state"] == "awaiting_input"  # not yet
    card.find_element(By.CSS_SELECTOR, "button.confirm-reject").click()
    wait(page, lambda d: not d.find_elements(By.CSS_SELECTOR, f"#approvals .approval[data-key='{cid}/{call_id}']"),
         "the rejected call to leave the queue")

    page.get(f"{server.url}/ui/#/conversation/{cid}")
    wait(page, lambda d: "the refund was not approved" in " ".join(texts(d, "#log .answer.final .text")),
         "the model's answer after the refusal")
    result = page.find_element(By.CSS_SELECTOR, f"#log .call[data-call-id='{call_id}'] .result .tag")
    assert result.text == "rejected" and "result-rejected" in result.get_attribute("class")
    [note] = texts(page, "#log .note.resolution.refused")
    assert "rejected by pat: the order says 129.90 EUR" in note
    shoot(page, "conversation-rejected-refund")
    [closed] = [c for c in server.call("GET", f"/v1/conversations/{cid}/tool-calls")["tool_calls"]
                if c["tool_call_id"] == call_id]
    assert closed["status"] == "rejected"


def test_an_approved_gated_call_runs_as_shown_after_the_confirmation(page, server):
    cid, call_id = gated_refund(server, "dave")
    page.get(f"{server.url}/ui/#/conversation/{cid}")
    box = visible(page, f"#pending .pending-call[data-call-id='{call_id}']")
    live(page)
    box.find_element(By.CSS_SELECTOR, "button.approve").click()
    assert "It runs as shown." in visible(box, ".confirm .question").text
    box.find_element(By.CSS_SELECTOR, "button.confirm-approve").click()
    wait(page, lambda d: "refunded 1299.00 EUR on order A-17" in " ".join(texts(d, "#log .call .result")),
         "the refund's result")
    [note] = texts(page, "#log .note.resolution")
    assert "approved by pat" in note


def test_the_conversation_list_shows_titles_states_acting_users_and_last_activity(page, server):
    cid, _ = gated_refund(server, "erin")
    page.get(server.url + "/ui/#/conversations")
    row = wait(page, lambda d: next((r for r in d.find_elements(By.CSS_SELECTOR, "#conversations tr")
                                     if cid in r.text), None), "the conversation's row")
    cells = [c.text for c in row.find_elements(By.CSS_SELECTOR, "td")]
    assert cells[0] == ASKED and cells[1] == "awaiting input" and cells[2] == "erin"
    assert cells[4] and cells[5] == cid
    shoot(page, "conversations-list")


def test_the_retry_button_re_drives_a_failed_conversation(page, server, model):
    model.then(Fail(400, "this request was refused"), Reply(text="Back on track.", chunks=2))
    cid = server.create(profile="emu", model="emu-model-1")
    server.say(cid, "hello")
    server.wait_for_state(cid, "failed")

    page.find_element(By.LINK_TEXT, "Failed").click()
    card = visible(page, f"#failed .failed[data-key='{cid}']")
    wait(page, lambda d: "this request was refused" in card.find_element(By.CSS_SELECTOR, ".why").text,
         "the failure's reason")
    card.find_element(By.CSS_SELECTOR, "button.retry").click()

    wait(page, lambda d: not d.find_elements(By.CSS_SELECTOR, f"#failed .failed[data-key='{cid}']"),
         "the conversation to leave the failed list")
    page.find_element(By.CSS_SELECTOR, "#main .outcome .conversation-link").click()
    wait(page, lambda d: "Back on track." in texts(d, "#log .answer.final .text"), "the answer after the retry")
    notes = texts(page, "#log .note.error")
    assert any("this request was refused" in n for n in notes) and any("retried" in n for n in notes)
    assert server.call("GET", f"/v1/conversations/{cid}")["state"] == "idle"


def test_the_page_s_stream_parser_reads_each_field_of_a_server_sent_event(page):
    parse = lambda block: page.execute_script("return parseFrame(arguments[0])", block)  # noqa: E731
    assert parse('id: 7\nevent: event\ndata: {"seq":7}') == {"event": "event", "id": "7", "retry": None,
                                                          "data": {"seq": 7}}
    assert parse('event: delta\ndata: {"text":\ndata: "a:b"}')["data"] == {"text": "a:b"}  # lines joined
    assert parse(": keep-alive")["data"] is None  # a comment carries nothing
    assert parse("retry: 2000")["retry"] == 2000
    assert parse("data:{not json")["data"] is None


def test_the_schedules_page_lists_next_runs_and_runs_so_far_and_pauses_a_schedule(page, server):
    server.call("POST", "/v1/agents", {"name": "pulse", "settings": {
        "profile": "scripted", "script": [{"text": "pulse answered"}], "script_repeat": True}})
    made = server.call("POST", "/v1/schedules", {"name": "every two seconds", "every_s": 2,
                                                 "agent": "pulse", "message": "pulse"})
    page.get(server.url + "/ui/#/schedules")
    card = visible(page, f"#schedules .schedule[data-key='{made['id']}']")
    assert "every two seconds" in card.text and "next:" in card.text
    link = wait(page, lambda d: next(iter(d.find_elements(
        By.CSS_SELECTOR, f"#schedules .schedule[data-key='{made['id']}'] .runs .conversation-link")),
        None), "a run linked to its conversation")
    cid = link.text
    visible(page, f"#schedules .schedule[data-key='{made['id']}'] button.toggle").click()
    wait(page, lambda d: "fires nothing while paused" in d.find_element(
        By.CSS_SELECTOR, f"#schedules .schedule[data-key='{made['id']}']").text, "the pause")
    assert server.call("GET", f"/v1/schedules/{made['id']}")["paused"] is True
    page.find_element(By.CSS_SELECTOR, f"#schedules .schedule[data-key='{made['id']}'] "
                                       f".runs .conversation-link").click()
    wait(page, lambda d: "pulse answered" in " ".join(texts(d, "#log .answer .text")),
         f"the run's conversation {cid}")
