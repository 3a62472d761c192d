"""The SDK lists an outcome_unknown call with what a person needs and settles it: `settle`
on the blocking Client, over the API app in-process (the worker tests kill real workers to
make such calls; tests/worker/test_once_calls.py)."""
from __future__ import annotations

import httpx2
import pytest

from agentq.client import Client
from agentq.client.errors import Conflict
from tests.support.api import Api
from tests.support.once_runs import DEAD, started_and_died, until_tool

PAY = [{"text": "Paying.", "tool_calls": [
    {"name": "pay", "args": {"order": "A-17", "amount": 12.5, "seconds": 0}}]},
    {"text": "Done."}]


@pytest.fixture
def api(store):
    return Api(store)


@pytest.fixture
def client(api):
    secret = api.key("acme", "alice")["Authorization"].removeprefix("Bearer ")
    http = httpx2.Client(base_url="http://api", transport=httpx2.WSGITransport(app=api.app),
                         headers={"Authorization": f"Bearer {secret}"})
    with Client("http://api", secret, user="alice", http=http) as made:
        yield made


def unknown(api, client) -> tuple[str, str]:
    conversation = client.create_conversation({"script": PAY})
    client.send(conversation.id, "pay order A-17")
    sent, api.sent[:] = list(api.sent), []
    runs = until_tool(api.runtime, sent)
    call_id = started_and_died(api.store, api.clock, conversation.id, runs)
    api.sent.extend(runs)
    api.run()
    return conversation.id, call_id


def test_the_sdk_lists_an_outcome_unknown_call_and_settles_it_as_ran(api, client):
    cid, call_id = unknown(api, client)
    [call] = list(client.pending_calls())
    assert call.tool_call_id == call_id and call.outcome_unknown["worker"] == DEAD
    settled = client.settle(cid, call_id, "ran", "paid, receipt R-9")
    assert settled.status == "resolved" and settled.result == "paid, receipt R-9"
    assert client.settle(cid, call_id, "ran", "paid, receipt R-9").status == "resolved"
    api.run()
    assert list(client.pending_calls()) == []
    assert client.get_conversation(cid).state == "idle"


def test_the_sdk_says_did_not_run_and_a_later_abandon_is_a_conflict(api, client):
    cid, call_id = unknown(api, client)
    assert client.settle(cid, call_id, "did_not_run").status == "scheduled"
    with pytest.raises(Conflict):
        client.settle(cid, call_id, "abandoned", reason="too late")
    api.run()
    assert [c.status for c in client.tool_calls(cid)] == ["done"]
