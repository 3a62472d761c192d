"""The page shows a `once` call whose run was found started and unfinished, with when it
started, on which worker, how long it ran and what the tool does, and takes a person's
"it ran" with its result (a real headless Chromium against a real `agentq dev` process;
the call's unknown run is written into the server's store in-process, as a killed worker
leaves it: the worker tests kill real ones)."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from agentq.commands import Commands
from agentq.config import Config
from agentq.core.scope import Scope
from agentq.runtime import Runtime
from agentq.store import Store
from agentq.tools import Registry
from tests.support.clock import Clock
from tests.support.drive import Recorder, drain
from tests.support.once_runs import DEAD, started_and_died, until_tool
from tests.web.test_ui_browser import (  # noqa: F401 - the page's fixtures, shared
    By,
    browser,
    live,
    model,
    page,
    server,
    texts,
    visible,
    wait,
)

pytestmark = pytest.mark.slow  # a browser and an `agentq dev` process

PAY = [{"text": "Paying.", "tool_calls": [
    {"name": "pay", "args": {"order": "A-17", "amount": 12.5, "seconds": 0}}]},
    {"text": "Paid, as the person said."}]


def unknown_in(server) -> tuple[str, str]:
    """A conversation of the server's tenant whose `pay` call was found unfinished."""
    store = Store.open(server.database_url)
    try:
        clock = Clock(datetime.now(timezone.utc))
        registry = Registry.from_modules(["tests.support.tools_for_tests"])
        runtime = Runtime(store=store, registry=registry, pubsub=Recorder(),
                          config=Config(lease_s=30.0), clock=clock, sleep=lambda s: None)
        commands = Commands(store, registry, clock=clock)
        who = Scope(tenant="ui", user="pat")
        cid = commands.create_conversation(who, {"profile": "scripted", "script": PAY}).id
        runs = until_tool(runtime, commands.post_message(cid, "pay order A-17", who)[1])
        call_id = started_and_died(store, clock, cid, runs)
        drain(runtime, runs)
        return cid, call_id
    finally:
        store.dispose()


def test_a_person_sees_an_unknown_outcome_and_says_it_ran_with_its_result(page, server):
    cid, call_id = unknown_in(server)
    server.wait_for_state(cid, "awaiting_input")
    page.get(f"{server.url}/ui/#/conversation/{cid}")
    card = visible(page, "#pending .pending-call.outcome-unknown")
    live(page)
    assert "outcome unknown" in card.text and "pay" in card.text
    assert DEAD in card.text and "found unfinished 7 s later" in card.text
    assert "Pay for an order" in card.text
    assert [b.text for b in card.find_elements(By.CSS_SELECTOR, ".actions button")] == [
        "It ran", "It did not run", "Abandon"]
    card.find_element(By.CSS_SELECTOR, "input.reply").send_keys("paid, receipt R-9")
    card.find_element(By.CSS_SELECTOR, "button.ran").click()
    assert "It ran, and returned" in visible(card, ".confirm .question").text
    card.find_element(By.CSS_SELECTOR, "button.confirm-approve").click()
    wait(page, lambda d: "Paid, as the person said." in texts(d, "#log .answer.final .text"),
         "the model's answer after the result")
    call = server.call("GET", f"/v1/conversations/{cid}/tool-calls")["tool_calls"][0]
    assert call["tool_call_id"] == call_id and call["status"] == "resolved"
    assert call["result"] == "paid, receipt R-9"
    assert call["outcome_unknown"]["answered"] == "ran"
