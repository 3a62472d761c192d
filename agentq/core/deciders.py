"""Who may decide a call that waits on a person: the rule, who is deciding, and the verdict.

A tool (`@agentq.tool(deciders=...)`) or the operator's policy names who may approve, reject
or answer its calls: API keys carrying one of some roles, or some acting users. Anyone
else is refused with 403 and nothing is written. `not_self` keeps the user whose turn
made the call from deciding it. The rule that applies is the most specific one
(`rule_for`); with none, any key of the conversation's tenant decides, as before.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from agentq.core.events import EventDraft, ToolCallRecord
from agentq.core.refusal import Refusal

EVERY_TOOL = "*"  # a policy's rule for every call that waits on a person


@dataclass(frozen=True)
class Deciders:
    """Who may decide: a key with one of `roles`, or one of `users`; nobody listed is anyone."""

    roles: tuple[str, ...] = ()
    users: tuple[str, ...] = ()
    not_self: bool = False  # the user whose turn made the call may not decide it

    @classmethod
    def of(cls, value: Deciders | Iterable[str]) -> Deciders:
        """A rule from itself or from role names (`deciders=["finance"]`)."""
        if isinstance(value, Deciders):
            return value
        if isinstance(value, str):
            raise ValueError("deciders is a Deciders or a list of role names, not one string")
        return cls(roles=tuple(value))

    @property
    def anyone(self) -> bool:
        return not self.roles and not self.users

    def describe(self) -> str:
        """Who may decide, as a person reads it beside a call they may not decide."""
        named = []
        if self.roles:
            named.append(f"a key with role {' or '.join(self.roles)}")
        if self.users:
            named.append(f"user {' or '.join(self.users)}")
        who = " or ".join(named) if named else "any key of the tenant"
        return who + (", not the user whose turn made the call" if self.not_self else "")

    def to_json(self) -> dict[str, Any]:
        return {"roles": list(self.roles), "users": list(self.users), "not_self": self.not_self,
                "description": self.describe()}


ANYONE = Deciders()


@dataclass(frozen=True)
class Decider:
    """Who is deciding: the acting user the request names and the key it came with."""

    user: str | None
    key_id: str | None = None
    roles: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """What the log records of them: never the key's secret, only its id."""
        return {"user": self.user, "key_id": self.key_id}


def why_not(rule: Deciders, decider: Decider, *, caused_by: str | None) -> str | None:
    """Why `decider` may not decide under `rule`, or None if they may."""
    if rule.not_self and decider.user is not None and decider.user == caused_by:
        return f"user {decider.user} made this call's turn and may not decide it"
    if rule.anyone:
        return None
    if set(rule.roles) & set(decider.roles) or (decider.user is not None
                                                 and decider.user in rule.users):
        return None
    return f"only {rule.describe()} may decide this call"


def refusal(call: ToolCallRecord, rule: Deciders, decider: Decider, *,
            caused_by: str | None) -> Refusal | None:
    """A 403 for a decision `decider` may not make on `call`, or None."""
    reason = why_not(rule, decider, caused_by=caused_by)
    if reason is None:
        return None
    return Refusal.forbidden(f"tool call {call.id}: {reason}", details={
        "deciders": rule.to_json()})


def waits_on_person(call: ToolCallRecord) -> bool:
    """Whether a person decides the call: a gated call, a human tool's, or a server's question."""
    return call.needs_approval or call.executor == "human" or call.elicitation is not None


def rule_for(
    call: ToolCallRecord, *, tool_rule: Deciders | None,
    tenant_rules: Mapping[str, Deciders], policy_rules: Mapping[str, Deciders],
) -> Deciders:
    """The most specific rule: the tenant's for this tool, the tenant's for every call, the
    policy's for this tool, the tool's own, the policy's for every call, else anyone.

    The rules for every call (`*`) cover only calls a person decides, never a client's.
    """
    person = waits_on_person(call)
    ladder: Sequence[Deciders | None] = (
        tenant_rules.get(call.name),
        tenant_rules.get(EVERY_TOOL) if person else None,
        policy_rules.get(call.name),
        tool_rule,
        policy_rules.get(EVERY_TOOL) if person else None,
    )
    return next((rule for rule in ladder if rule is not None), ANYONE)


def signed(drafted: Sequence[EventDraft], decider: Decider | None) -> list[EventDraft]:
    """The drafts with the decider on each `resolution`: who made it and with which key."""
    if decider is None:
        return list(drafted)
    return [replace(d, content={**d.content, "decider": decider.to_json()})
            if d.type == "resolution" else d for d in drafted]
