"""Who may decide a call (agentq.core.deciders): the rule that applies, and its verdict."""
from __future__ import annotations

import pytest

from agentq.core.deciders import ANYONE, Decider, Deciders, refusal, rule_for, signed, why_not
from agentq.core.events import EventDraft, ToolCallRecord
from tests.support.clock import T0

FINANCE = Deciders(roles=("finance",))
NOT_SELF = Deciders(not_self=True)


def call(name="refund", *, executor="server", needs_approval=True) -> ToolCallRecord:
    return ToolCallRecord(
        conversation_id="c1", id="call1", name=name, executor=executor, status="pending",
        args={"amount": 5}, round_id="r1", turn_id="t1", created_at=T0,
        needs_approval=needs_approval,
    )


def test_a_rule_that_names_nobody_lets_any_key_of_the_tenant_decide():
    assert why_not(ANYONE, Decider(user=None), caused_by="alice") is None


def test_a_key_with_a_named_role_may_decide():
    assert why_not(FINANCE, Decider(user="bob", key_id="k1", roles=("support", "finance")),
                   caused_by="alice") is None


def test_a_key_without_the_role_may_not_decide_and_is_told_who_may():
    reason = why_not(FINANCE, Decider(user="bob", key_id="k1", roles=("support",)),
                     caused_by="alice")
    assert reason == "only a key with role finance may decide this call"


def test_a_named_user_may_decide_with_a_key_without_the_role():
    rule = Deciders(roles=("finance",), users=("carol",))
    assert why_not(rule, Decider(user="carol", key_id="k1"), caused_by="alice") is None


def test_the_user_whose_turn_made_the_call_may_not_decide_it_when_the_rule_says_so():
    reason = why_not(Deciders(roles=("finance",), not_self=True),
                     Decider(user="alice", key_id="k1", roles=("finance",)), caused_by="alice")
    assert reason is not None and "alice made this call's turn" in reason


def test_another_user_may_decide_a_call_under_not_self():
    assert why_not(NOT_SELF, Decider(user="bob"), caused_by="alice") is None


def test_a_refusal_is_forbidden_and_names_the_rule():
    found = refusal(call(), FINANCE, Decider(user="bob"), caused_by=None)
    assert found is not None and found.kind == "forbidden"
    assert found.details == {"deciders": FINANCE.to_json()}


def test_role_names_alone_make_a_rule_of_roles():
    assert Deciders.of(["finance", "ops"]) == Deciders(roles=("finance", "ops"))


def test_one_string_is_not_taken_for_a_list_of_roles():
    with pytest.raises(ValueError, match="not one string"):
        Deciders.of("finance")


@pytest.mark.parametrize("rules, expected", [
    ({"tenant": {"refund": FINANCE, "*": NOT_SELF}, "policy": {"refund": NOT_SELF}}, FINANCE),
    ({"tenant": {"*": NOT_SELF}, "policy": {"refund": FINANCE}}, NOT_SELF),
    ({"tenant": {}, "policy": {"refund": FINANCE, "*": NOT_SELF}}, FINANCE),
    ({"tenant": {}, "policy": {"*": NOT_SELF}}, Deciders(users=("tool",))),
    ({"tenant": {}, "policy": {}}, Deciders(users=("tool",))),
])
def test_the_most_specific_rule_applies(rules, expected):
    found = rule_for(call(), tool_rule=Deciders(users=("tool",)), tenant_rules=rules["tenant"],
                     policy_rules=rules["policy"])
    assert found == expected


def test_the_policy_rule_for_every_call_applies_without_a_rule_of_the_tool():
    assert rule_for(call(), tool_rule=None, tenant_rules={},
                    policy_rules={"*": FINANCE}) == FINANCE


def test_the_rules_for_every_call_skip_a_client_tool_s_calls():
    client_call = call(executor="client", needs_approval=False)
    assert rule_for(client_call, tool_rule=None, tenant_rules={"*": FINANCE},
                    policy_rules={"*": FINANCE}) == ANYONE


def test_a_rule_named_for_a_client_tool_applies_to_its_calls():
    client_call = call(executor="client", needs_approval=False)
    assert rule_for(client_call, tool_rule=None, tenant_rules={},
                    policy_rules={"refund": FINANCE}) == FINANCE


def test_signing_puts_the_decider_on_resolutions_only():
    drafts = [EventDraft("resolution", {"tool_call_id": "call1", "status": "rejected"}, T0),
              EventDraft("tool_result", {"tool_call_id": "call1", "status": "rejected"}, T0)]
    done = signed(drafts, Decider(user="bob", key_id="k1", roles=("finance",)))
    assert done[0].content["decider"] == {"user": "bob", "key_id": "k1"}
    assert "decider" not in done[1].content
