"""An agent's code changed under conversations waiting on approvals, every process restarted:
`agentq api` and a worker on PostgreSQL and Redis, run on a module in a temporary folder that
is rewritten between the two deploys. Each conversation resumes under the agent version it
started with; a tool removed, or whose schema changed, gives the model an error result; a new
conversation runs the new version."""
from __future__ import annotations

import json
import os
import uuid

import pytest

from agentq.client import Client
from tests.support.api_stack import ApiStack
from tests.support.processes import ROOT, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.postgres, pytest.mark.redis]

# The model is a function of the code: it writes down every request it is asked, and calls
# `lookup` or `refund` as the message says, then reports what the call returned.
MODEL = '''
def decide(request):
    with open(os.environ["AGENTQ_TEST_ASKED"], "a") as log:
        log.write(json.dumps({
            "cid": request.conversation_id, "system": request.system,
            "tools": {t.name: sorted(t.parameters.get("properties", {})) for t in request.tools},
            "results": [[r.name, r.status, r.text] for r in request.results]}) + "\\n")
    if request.results:
        (result,) = request.results
        return f"{result.name}: {result.status}: {result.text}"
    if "lookup" in request.text:
        return {"tool_calls": [{"name": "lookup", "args": {"order": "A-17"}}]}
    return {"tool_calls": [{"name": "refund", "args": REFUND_ARGS}]}
'''

FIRST = '''import json, os
import agentq

REFUND_ARGS = {"order": "A-17", "amount": 12.5}


@agentq.tool(needs_approval=True)
def lookup(order: str) -> str:
    """Where an order is."""
    return f"order {order} is shipped"


@agentq.tool(needs_approval=True)
def refund(order: str, amount: float) -> str:
    """Refund an order."""
    return f"refunded {amount:.2f} on {order}"
''' + MODEL + '''

clerk = agentq.agent("NAME", model=decide, system="You are clerk one.", tools=[lookup, refund])
'''

# The next deploy: `lookup` is gone, `refund` needs a reason, `note` is new, a new prompt.
SECOND = '''import json, os
import agentq

REFUND_ARGS = {"order": "A-17", "amount": 12.5, "reason": "damaged"}


@agentq.tool(needs_approval=True)
def refund(order: str, amount: float, reason: str) -> str:
    """Refund an order, saying why."""
    return f"refunded {amount:.2f} on {order} ({reason})"


@agentq.tool
def note(text: str) -> str:
    """Write a note on the order."""
    return "noted"
''' + MODEL + '''

clerk = agentq.agent("NAME", model=decide, system="You are clerk two.", tools=[refund, note])
'''


@pytest.fixture
def deploy(tmp_path, pg_url, redis_url):
    """`deploy(code)` writes the module and starts `agentq api` and a worker on it, after
    stopping the ones before; each deploy gets its own folder for the processes' logs."""
    code_dir, started = tmp_path / "code", []
    code_dir.mkdir()
    asked = tmp_path / "asked.jsonl"
    asked.touch()

    def start(code: str) -> ApiStack:
        if started:
            started[-1].stop()
        (code_dir / "deploy_clerk.py").write_text(code)
        logs = tmp_path / f"deploy-{len(started) + 1}"
        logs.mkdir()
        started.append(ApiStack(logs, pg_url, redis_url, concurrency=4,
                                AGENTQ_TOOLS="deploy_clerk", AGENTQ_TEST_ASKED=str(asked),
                                PYTHONDONTWRITEBYTECODE="1",  # the rewritten module is read anew
                                PYTHONPATH=os.pathsep.join([str(code_dir), str(ROOT)])))
        return started[-1]

    try:
        yield start, asked
    finally:
        if started:
            started[-1].stop()


def requests_of(asked, cid: str) -> list[dict]:
    return [r for r in map(json.loads, asked.read_text().splitlines()) if r["cid"] == cid]


def pending(client: Client, cid: str):
    return wait_for(lambda: client.tool_calls(cid, status="pending").tool_calls,
                    timeout_s=60, what="the call to wait for approval")


def answered(asked, cid: str) -> dict:
    """The request that carried the approved call's result to the model."""
    return wait_for(lambda: next((r for r in requests_of(asked, cid) if r["results"]), None),
                    timeout_s=60, what="the result to reach the model")


def test_conversations_waiting_across_a_deploy_resume_under_their_own_agent_version(deploy):
    start, asked = deploy
    name = f"clerk-{uuid.uuid4().hex[:8]}"
    first = start(FIRST.replace("NAME", name))
    with Client(first.url, first.key) as client:
        looking = client.create_conversation(agent=name)
        refunding = client.create_conversation(agent=name)
        client.send(looking.id, "lookup order A-17")
        client.send(refunding.id, "refund order A-17")
        (lookup_call,) = pending(client, looking.id)
        (refund_call,) = pending(client, refunding.id)
    assert (lookup_call.name, refund_call.name) == ("lookup", "refund")

    second = start(SECOND.replace("NAME", name))  # every process stopped, then started anew
    with Client(second.url, second.key) as client:
        client.approve(looking.id, lookup_call.tool_call_id)
        client.approve(refunding.id, refund_call.tool_call_id)
        removed, changed = answered(asked, looking.id), answered(asked, refunding.id)
        assert [client.get_conversation(c).agent.version for c in (looking.id, refunding.id)] == [
            looking.agent.version, looking.agent.version]
        fresh = client.create_conversation(agent=name)
        client.send(fresh.id, "refund order A-17")
        (fresh_call,) = pending(client, fresh.id)
        client.approve(fresh.id, fresh_call.tool_call_id)
        new = answered(asked, fresh.id)

    # the first version's prompt and tool list, as far as the code still has its tools
    assert {r["system"] for r in requests_of(asked, looking.id) + requests_of(asked, refunding.id)
            } == {"You are clerk one."}
    assert removed["tools"] == changed["tools"] == {"refund": ["amount", "order", "reason"]}
    assert removed["results"] == [["lookup", "error", (
        "tool 'lookup' is no longer available: it was removed since this conversation "
        "started; available: refund")]]
    ((tool, status, text),) = changed["results"]
    assert (tool, status) == ("refund", "error")
    assert text.startswith("invalid arguments for 'refund'") and "reason" in text
    # a conversation started after the deploy runs the new version
    assert fresh.agent.version == looking.agent.version + 1
    assert new["system"] == "You are clerk two."
    assert new["tools"] == {"refund": ["amount", "order", "reason"], "note": ["text"]}
    assert new["results"] == [["refund", "ok", "refunded 12.50 on A-17 (damaged)"]]
