"""`agentq chat` shows a call whose outcome is unknown, with what a person needs, and posts
their answer (the Chat over the real SDK and the API app in-process; the terminal tests
drive `agentq dev` through a pseudo-terminal)."""
from __future__ import annotations

import io

import httpx2
import pytest

from agentq.cli.chat import Chat, outcome_for
from agentq.client import Client
from tests.support.api import Api
from tests.support.once_runs import DEAD, started_and_died, until_tool

PAY = [{"text": "Paying.", "tool_calls": [
    {"name": "pay", "args": {"order": "A-17", "amount": 12.5, "seconds": 0}}]},
    {"text": "Done."}]


@pytest.mark.parametrize(("typed", "parsed"), [
    ("ran paid, receipt R-9", ("ran", "paid, receipt R-9", None)),
    ("rerun", ("did_not_run", None, None)),
    ("abandon", ("abandoned", None, None)),
    ("abandon the bank will call", ("abandoned", None, "the bank will call")),
    ("ran", None), ("rerun now", None), ("yes", None), ("", None)])
def test_a_typed_answer_to_an_unknown_outcome_is_parsed_or_asked_again(typed, parsed):
    assert outcome_for(typed) == parsed


def test_the_chat_shows_the_unknown_outcome_and_posts_the_persons_answer(store, monkeypatch):
    api = Api(store)
    secret = api.key("acme", "alice")["Authorization"].removeprefix("Bearer ")
    http = httpx2.Client(base_url="http://api", transport=httpx2.WSGITransport(app=api.app),
                         headers={"Authorization": f"Bearer {secret}"})
    with Client("http://api", secret, user="alice", http=http) as client:
        cid = client.create_conversation({"script": PAY}).id
        client.send(cid, "pay order A-17")
        sent, api.sent[:] = list(api.sent), []
        runs = until_tool(api.runtime, sent)
        call_id = started_and_died(api.store, api.clock, cid, runs)
        api.sent.extend(runs)
        api.run()
        typed = iter(["yes", "ran paid, receipt R-9"])  # the first does not parse: asked again
        monkeypatch.setattr("builtins.input", lambda prompt: next(typed))
        out = io.StringIO()
        chat = Chat(client, cid, out=out)
        chat.cursor = client.get_conversation(cid).last_seq
        chat.ask_waiting()
    shown = out.getvalue()
    assert "pay(order='A-17', amount=12.5, seconds=0) may or may not have run" in shown
    assert DEAD in shown and "found unfinished 7.0 s later" in shown
    assert "Pay for an order" in shown
    call = api.store.calls.load(cid, call_id)
    assert call.status == "resolved" and call.result == "paid, receipt R-9"
