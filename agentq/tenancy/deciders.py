"""`[deciders.TOOL]` and `[tenants.NAME.deciders.TOOL]`: who the operator lets decide a tool's calls.

The policy's shape of agentq.core.deciders' rule: the roles a key must carry or the acting
users who may approve, reject or answer the calls of the tool TOOL (or of every call that
waits on a person, `"*"`), for every tenant or for one. The most specific rule applies
(agentq.core.deciders.rule_for).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

from pydantic import BaseModel, ConfigDict, StringConstraints

from agentq.core.deciders import Deciders

Name = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,254}$")]


class DecidersRule(BaseModel):
    """One rule: a key with one of `roles`, or one of `users`; `not_self` keeps the user
    whose turn made the call from deciding it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    roles: tuple[Name, ...] = ()
    users: tuple[Name, ...] = ()
    not_self: bool = False

    def rule(self) -> Deciders:
        return Deciders(roles=self.roles, users=self.users, not_self=self.not_self)


def rules_of(declared: Mapping[str, DecidersRule]) -> dict[str, Deciders]:
    """The core's rules, by tool name (or `*`)."""
    return {name: rule.rule() for name, rule in declared.items()}
