"""The policy's `[deciders.TOOL]` and `[tenants.NAME.deciders.TOOL]` (agentq.tenancy.deciders)."""
from __future__ import annotations

from pathlib import Path

import pytest

from agentq.core.deciders import Deciders
from agentq.tenancy.policy import PolicyError, load_policy

POLICY = """
[deciders.refund_order]
roles = ["finance"]

[deciders."*"]
roles = ["approver"]

[tenants.acme.deciders."*"]
users = ["carol"]
not_self = true
"""


def loaded(tmp_path: Path, text: str):
    path = tmp_path / "policy.toml"
    path.write_text(text)
    return load_policy(str(path))


def test_the_policy_s_rules_are_read_for_every_tenant_and_for_one(tmp_path):
    policy = loaded(tmp_path, POLICY)
    own, every = policy.deciders_for("acme")
    assert own == {"*": Deciders(users=("carol",), not_self=True)}
    assert every == {"refund_order": Deciders(roles=("finance",)), "*": Deciders(roles=("approver",))}
    assert policy.deciders_for("other") == ({}, every)


def test_without_a_rule_the_policy_names_no_deciders():
    assert load_policy(None).deciders_for("acme") == ({}, {})


@pytest.mark.parametrize("bad", [
    '[deciders.refund_order]\nrole = ["finance"]\n',  # a misspelt field
    '[deciders.refund_order]\nroles = ["has space"]\n',
    '[tenants.acme.deciders.x]\nnot_self = "yes please"\n',
])
def test_a_rule_that_does_not_parse_stops_the_process_at_start(tmp_path, bad):
    with pytest.raises(PolicyError, match="not valid"):
        loaded(tmp_path, bad)
