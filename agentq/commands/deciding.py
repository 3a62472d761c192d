"""Who may decide a call, and the person's edits to it: the rules of agentq.core.deciders
and agentq.core.edits, fed with the tool's definition and the operator's policy.

The API asks `may_decide` for every call it lists, and the resolve command asks
`check_decider` before it classifies an answer, so a refused decision writes nothing.
"""
from __future__ import annotations

from typing import Any

from agentq.commands.refusals import refused
from agentq.core.deciders import Decider, Deciders, refusal, rule_for, why_not
from agentq.core.edits import with_edits
from agentq.core.events import ToolCallRecord
from agentq.core.resolution_rules import Approve, ResolutionVerdict
from agentq.errors import InvalidInput
from agentq.store import ConversationInfo
from agentq.tenancy.policy import Policy
from agentq.tools import Registry
from agentq.tools.definition import ToolArgsError


class DecisionRules:
    """Who may decide a tenant's calls, and whether a call takes edited arguments."""

    def __init__(self, registry: Registry, policy: Policy) -> None:
        self.registry = registry
        self.policy = policy

    def rule(self, call: ToolCallRecord, tenant: str) -> Deciders:
        """The rule that says who may decide `call` of a conversation of `tenant`."""
        tool = self.registry.get(call.name)
        tenant_rules, policy_rules = self.policy.deciders_for(tenant)
        return rule_for(call, tool_rule=None if tool is None else tool.deciders,
                        tenant_rules=tenant_rules, policy_rules=policy_rules)

    def may_decide(self, call: ToolCallRecord, conversation: ConversationInfo,
                   decider: Decider) -> bool:
        return why_not(self.rule(call, conversation.tenant), decider,
                       caused_by=caused_by(conversation)) is None

    def check_decider(self, call: ToolCallRecord, conversation: ConversationInfo,
                      decider: Decider) -> None:
        """Forbidden (403) if `decider` may not decide `call`."""
        found = refusal(call, self.rule(call, conversation.tenant), decider,
                        caused_by=caused_by(conversation))
        if found is not None:
            raise refused(found)

    def editable(self, call: ToolCallRecord) -> bool:
        """Whether a person may edit the arguments of `call` before approving it."""
        tool = self.registry.get(call.name)
        return bool(call.needs_approval and tool is not None and tool.editable)

    def with_edits(self, verdict: ResolutionVerdict, status: str,
                   args: dict[str, Any] | None) -> ResolutionVerdict:
        """The verdict with the edited `args` weighed; edits that do not fit the tool's
        schema are InvalidInput (422), before anything is written."""
        if args is None:
            return with_edits(verdict, status, None, editable=False)
        call: ToolCallRecord | None = getattr(verdict, "call", None)
        weighed = with_edits(verdict, status, args,
                             editable=call is not None and self.editable(call))
        if isinstance(weighed, Approve) and weighed.args is not None:
            tool = self.registry.get(weighed.call.name)
            assert tool is not None  # editable() found it
            try:
                tool.validate(weighed.args)
            except ToolArgsError as exc:
                raise InvalidInput(f"the edited arguments do not fit tool {tool.name}: {exc}",
                                   code="invalid_tool_args") from None
        return weighed


def caused_by(conversation: ConversationInfo) -> str | None:
    """The acting user whose turn made the conversation's open calls."""
    scope = conversation.fsm.scope or {}
    return scope.get("user")
