"""Agents through the SDK, sync and async: create, publish versions, read, list, and
conversations started from an agent's latest or a pinned version."""
from __future__ import annotations

import uuid

import pytest

from agentq.client import Conflict, InvalidRequest, NotFound

pytestmark = [pytest.mark.worker, pytest.mark.postgres, pytest.mark.redis]


def answer(text: str) -> dict:
    return {"profile": "scripted", "system": "You help.", "script": [{"text": text, "chunks": 2}]}


def test_an_agent_is_created_versioned_read_and_listed(client):
    name = f"support-{uuid.uuid4().hex[:8]}"
    first = client.create_agent(name, answer("one"), description="helps", overridable=["system"])
    assert (first.name, first.version, first.source, first.overridable) == (name, 1, "api", ["system"])
    with pytest.raises(Conflict) as taken:
        client.create_agent(name, answer("again"))
    assert taken.value.code == "agent_exists"
    second = client.publish_agent_version(name, answer("two"))
    assert second.version == 2 and second.digest != first.digest
    assert client.get_agent(name).version == 2
    assert client.get_agent(name, 1).settings.script[0].text == "one"
    assert [a.version for a in client.list_agents(limit=200).agents if a.name == name] == [2]
    assert [v.version for v in client.list_agent_versions(name).versions] == [1, 2]
    with pytest.raises(NotFound):
        client.get_agent(f"no-{name}")


def test_a_conversation_from_an_agent_runs_its_latest_or_its_pinned_version(client):
    name = f"pinned-{uuid.uuid4().hex[:8]}"
    client.create_agent(name, answer("from version one"))
    client.publish_agent_version(name, answer("from version two"))
    latest = client.create_conversation(agent=name)
    pinned = client.create_conversation(agent=f"{name}@1")
    assert (latest.agent.name, latest.agent.version, pinned.agent.version) == (name, 2, 1)
    assert client.send(latest.id, "hi").wait().text == "from version two"
    assert client.send(pinned.id, "hi").wait().text == "from version one"
    with pytest.raises(InvalidRequest) as unknown:
        client.create_conversation(agent=f"no-{name}")
    assert unknown.value.code == "unknown_agent"
