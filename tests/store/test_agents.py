"""Agent versions in the store, on SQLite and PostgreSQL: numbered, immutable, per owner."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone

from agentq.core.agents import AgentDefinition, AgentRef
from agentq.core.settings import Settings
from agentq.store.agents import CODE_OWNER

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def definition(name: str = "support", system: str = "Be kind.", **more) -> AgentDefinition:
    return AgentDefinition(name=name, settings=Settings(system=system), **more)


def test_a_new_agent_is_version_1_and_reads_back_as_written(store):
    made = definition(description="Helps.", overridable=("system",))
    created = store.agents.create("acme", made, now=T0)
    assert (created.version, created.source, created.digest) == (1, "api", made.digest)
    loaded = store.agents.load_version("acme", "support")
    assert loaded == created
    assert loaded.definition.digest == loaded.digest


def test_creating_an_agent_whose_name_the_tenant_has_changes_nothing(store):
    store.agents.create("acme", definition(), now=T0)
    assert store.agents.create("acme", definition(system="other"), now=T0) is None
    assert store.agents.load_version("acme", "support").definition.settings.system == "Be kind."


def test_each_new_version_takes_the_next_number_and_the_earlier_ones_stay_as_they_were(store):
    store.agents.create("acme", definition(system="one"), now=T0)
    second = store.agents.add_version("acme", definition(system="two"), now=T0 + timedelta(seconds=1))
    third = store.agents.add_version("acme", definition(system="three"), now=T0 + timedelta(seconds=2))
    assert (second.version, third.version) == (2, 3)
    assert store.agents.load_version("acme", "support").version == 3
    assert store.agents.load_version("acme", "support", version=1).definition.settings.system == "one"
    assert store.agents.load_version("acme", "support", version=4) is None


def test_a_version_of_an_agent_the_tenant_does_not_have_is_not_added(store):
    store.agents.create("acme", definition(), now=T0)
    assert store.agents.add_version("evil", definition(), now=T0) is None
    assert store.agents.load_version("evil", "support") is None


def test_versions_added_at_once_each_get_their_own_number(store):
    store.agents.create("acme", definition(system="0"), now=T0)
    with ThreadPoolExecutor(4) as pool:
        added = list(pool.map(
            lambda i: store.agents.add_version("acme", definition(system=str(i)), now=T0), range(1, 9)))
    assert sorted(v.version for v in added) == list(range(2, 10))


def test_the_list_holds_the_latest_version_of_each_of_the_tenants_agents_only(store):
    store.agents.create("acme", definition("support"), now=T0)
    store.agents.add_version("acme", definition("support", system="newer"), now=T0)
    store.agents.create("acme", definition("billing"), now=T0)
    store.agents.create("evil", definition("spy"), now=T0)
    store.agents.publish_code(definition("concierge"), now=T0)
    listed = store.agents.list_latest("acme")
    assert [(v.name, v.version) for v in listed] == [("billing", 1), ("support", 2)]
    assert store.agents.count("acme") == 2
    assert [v.name for v in store.agents.list_latest(CODE_OWNER)] == ["concierge"]


def test_publishing_a_code_agent_adds_a_version_only_when_its_definition_changed(store):
    first, published = store.agents.publish_code(definition(system="one"), now=T0)
    assert (first.version, first.source, published) == (1, "code", True)
    assert store.agents.publish_code(definition(system="one"), now=T0) == (first, False)
    changed, published = store.agents.publish_code(definition(system="two"), now=T0)
    assert (changed.version, published) == (2, True)
    back, published = store.agents.publish_code(definition(system="one"), now=T0)
    assert (back.version, published) == (3, True)  # the latest is what the code says


def test_processes_that_start_at_once_with_the_same_code_publish_one_version(store):
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: store.agents.publish_code(definition(), now=T0), range(8)))
    assert {v.version for v, _ in results} == {1}
    assert sum(published for _, published in results) == 1


def test_a_conversation_remembers_the_agent_version_it_was_started_from_and_a_fork_too(store):
    conv = store.conversations.create(tenant="acme", settings=Settings(), now=T0,
                                      agent=AgentRef("support", 2))
    assert store.conversations.load(conv.id).agent == AgentRef("support", 2)
    assert store.overview.load(conv.id).conversation.agent == AgentRef("support", 2)
    fork = store.log.fork(conv.id, at_seq=0, now=T0)
    assert store.conversations.load(fork.id).agent == AgentRef("support", 2)
    plain = store.conversations.create(tenant="acme", settings=Settings(), now=T0)
    assert store.conversations.load(plain.id).agent is None
    assert store.conversations.load(plain.id).to_json()["agent"] is None
