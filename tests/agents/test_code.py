"""Agents defined in Python: found in the modules the processes load, published by content."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

import agentq
from agentq.agents import CodeAgents
from agentq.agents.catalog import Catalog
from agentq.store.agents import CODE_OWNER
from agentq.tools import Registry
from tests.support.tools_for_tests import lookup

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
MODULES = ["tests.support.agents_for_tests"]


def test_an_agent_takes_its_tools_as_functions_and_keeps_their_names():
    defined = agentq.agent("helper", tools=[lookup, "approve"], model="m1", temperature=0.5)
    settings = defined.definition.settings
    assert (settings.tools, settings.model, settings.temperature) == (["lookup", "approve"], "m1", 0.5)


def test_an_agent_with_settings_that_cannot_work_fails_where_it_is_defined():
    with pytest.raises(ValueError, match="agent 'helper' is not valid"):
        agentq.agent("helper", temperature=9.0)
    with pytest.raises(ValueError, match="agent 'helper'"):
        agentq.agent("helper", overridable=["base_url"])
    with pytest.raises(TypeError, match="tools are @tool functions"):
        agentq.agent("helper", tools=[42])


def test_the_agents_of_a_module_are_its_module_level_agent_values():
    agents = CodeAgents.from_modules(MODULES, Registry.from_modules(["tests.support.tools_for_tests"]))
    assert agents.names == {"support", "concierge"}
    assert agents.get("support").definition.settings.tools == ["lookup"]


def test_an_agent_naming_a_tool_no_module_offers_stops_the_process_at_start():
    with pytest.raises(ValueError, match="agent 'support': unknown tools: lookup"):
        CodeAgents.from_modules(MODULES, Registry.from_modules(["agentq.tools.demo"]))


def test_two_agents_of_one_name_are_refused():
    with pytest.raises(ValueError, match="two agents are named 'twin'"):
        CodeAgents([agentq.agent("twin"), agentq.agent("twin", system="other")])


def test_a_process_that_starts_with_the_same_code_publishes_no_new_version(store):
    agents = CodeAgents.from_modules(MODULES)
    first = {v.name: v for v in agents.publish(store, now=T0)}
    again = {v.name: v for v in agents.publish(store, now=T0)}
    assert {name: v.version for name, v in again.items()} == {"support": 1, "concierge": 1}
    assert again == first


def test_a_changed_definition_is_published_as_the_next_version_and_the_old_one_stays(store):
    CodeAgents([agentq.agent("helper", system="v1")]).publish(store, now=T0)
    [changed] = CodeAgents([agentq.agent("helper", system="v2")]).publish(store, now=T0)
    assert (changed.version, changed.source, changed.definition.settings.system) == (2, "code", "v2")
    first = store.agents.load_version(CODE_OWNER, "helper", version=1)
    assert first.definition.settings.system == "v1"


def test_code_agents_are_offered_to_the_tenants_the_policy_names(store):
    agents = CodeAgents.from_modules(MODULES)
    catalog = Catalog.published(store, lambda name, tenant: name != "concierge" or tenant == "acme",
                                agents, now=T0)
    assert [v.name for v in catalog.list("acme")] == ["concierge", "support"]
    assert [v.name for v in catalog.list("evil")] == ["support"]
    assert catalog.find("evil", "concierge") is None
    assert catalog.find("acme", "concierge").source == "code"


def test_an_agent_removed_from_the_code_is_not_offered_any_more(store):
    code = CodeAgents.from_modules(MODULES)
    code.publish(store, now=T0)
    catalog = Catalog(store, lambda name, tenant: True, CodeAgents([code.get("support")]),
                      clock=lambda: T0)
    assert [v.name for v in catalog.list("acme")] == ["support"]
    assert catalog.find("acme", "concierge") is None


def test_a_catalog_publishes_the_codes_agents_once_at_its_first_read(store):
    catalog = Catalog(store, lambda name, tenant: True, CodeAgents.from_modules(MODULES),
                      clock=lambda: T0)
    assert store.agents.list_latest(CODE_OWNER) == []  # a process starts without its database
    assert [v.name for v in catalog.list("acme")] == ["concierge", "support"]
    catalog.list("acme")
    assert [v.version for v in store.agents.list_latest(CODE_OWNER)] == [1, 1]


def test_an_agent_hands_over_to_agents_given_as_values_with_their_descriptions():
    billing = agentq.agent("billing", description="Refunds and invoices.")
    support = agentq.agent("support", handoffs=[billing, "tech"])
    targets = support.definition.settings.handoffs
    assert [(t.name, t.description) for t in targets] == [
        ("billing", "Refunds and invoices."), ("tech", "")]


def test_an_agent_handing_over_to_an_agent_no_module_defines_stops_the_process_at_start():
    billing = agentq.agent("billing")
    with pytest.raises(ValueError, match="agent 'support' offers handoffs to agents no module "
                                         "defines: tech"):
        CodeAgents([agentq.agent("support", handoffs=[billing, "tech"]), billing]
                   ).check_tools(Registry([]))
    CodeAgents([agentq.agent("support", handoffs=[billing]), billing]).check_tools(Registry([]))


def recent_only(events):
    return list(events)[-4:]


def test_a_handoff_input_filter_that_is_a_function_is_named_in_the_definition_and_collected():
    billing = agentq.agent("billing", description="Refunds.")
    support = agentq.agent("support", handoffs=[agentq.handoff(billing, input_filter=recent_only),
                                                agentq.handoff("tech", input_filter="turn")])
    (to_billing, to_tech) = support.definition.settings.handoffs
    assert (to_billing.input_filter, to_billing.description) == ("code:recent_only", "Refunds.")
    assert to_tech.input_filter == "turn"
    assert CodeAgents([support, billing]).input_filters == {"recent_only": recent_only}
