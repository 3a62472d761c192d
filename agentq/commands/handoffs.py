"""What a person can do to the agent that holds a conversation: hand it to another agent
between turns, through the API or the SDK, as the model does with a transfer tool.

The handoff is an event of the log (by "person", with who acted), so the agent that holds
the conversation stays a fold of its log (agentq.core.handoffs). The target must be an agent
the tenant may use, its settings admitted as a new conversation's would be; the agent the
conversation started from takes it back with the conversation's own settings.

A target may name a version (`support@4`): that is how the operator moves a running
conversation to a newer version of its own agent on purpose (a deploy never does: a
conversation keeps the version it started with).
"""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from agentq.core.agents import AgentRef, parse_agent_ref
from agentq.core.handoff_targets import InputFilter
from agentq.core.handoffs import BY_PERSON, Handoff, holder_name
from agentq.core.scope import Scope
from agentq.errors import Conflict, InvalidInput, NotFound
from agentq.store import ConversationInfo

if TYPE_CHECKING:
    from agentq.commands.conversations import Commands


class HandoffCommands:
    """Entry calls on who holds a conversation, over the conversation `Commands`."""

    def __init__(self, commands: Commands) -> None:
        self.commands = commands  # its store, catalog, clock and admission of settings

    def hand_off(self, conversation_id: str, scope: Scope, *, to: str, why: str = "",
                 input_filter: InputFilter = "all") -> ConversationInfo:
        """Give the conversation to the agent `to` from its next turn on; 409 while a turn
        runs, 422 for an agent the tenant may not use."""
        commands = self.commands
        now = commands.clock()
        with commands.store.writes.locked(conversation_id) as tx:
            conversation = tx.conversation
            if conversation.tenant != scope.tenant:
                raise NotFound(f"no conversation {conversation_id}")
            _between_turns(conversation)
            handoff = self._handoff(conversation, scope, to=to, why=why,
                                    input_filter=input_filter)
            # shown with the turn it follows (a person hands over between turns)
            draft = handoff.draft(created_at=now, turn_id=conversation.fsm.turn_id)
            tx.append_and_fold([draft], now=now)
        return conversation

    def _handoff(self, conversation: ConversationInfo, scope: Scope, *, to: str, why: str,
                 input_filter: InputFilter) -> Handoff:
        started = conversation.agent
        source = holder_name(conversation.fsm, started.name if started else None)
        try:
            ref = parse_agent_ref(to)
        except ValueError as exc:
            raise InvalidInput(str(exc), code="invalid_agent") from None
        if (ref.name == source and ref.version is None) or ref == _held(conversation):
            raise Conflict(f"the agent {to!r} holds the conversation already",
                           code="already_held")
        own = Handoff(source=source, target=ref.name, version=None, why=why, by=BY_PERSON,
                      settings=None, input_filter=input_filter, user=scope.user or scope.tenant)
        if started is not None and ref in (started, AgentRef(started.name)):  # its own settings
            return replace(own, version=started.version)
        version = self.commands.catalog.find(scope.tenant, ref.name, version=ref.version)
        if version is None:
            raise InvalidInput(f"no agent {to}; GET /v1/agents lists yours", code="unknown_agent")
        settings = self.commands.settings_for(version.definition.settings, scope,
                                              defining=version.name,
                                              from_code=version.source == "code",
                                              code_filters=version.source == "code")
        return replace(own, version=version.version, settings=settings.model_dump(mode="json"))


def _held(conversation: ConversationInfo) -> AgentRef | None:
    """The agent and version that hold the conversation: the last handoff's, else its own."""
    held = conversation.fsm.agent
    if held is not None:
        return AgentRef(held["name"], held.get("version"))
    return conversation.agent


def _between_turns(conversation: ConversationInfo) -> None:
    """Conflict unless no turn runs: a person hands a conversation over between turns."""
    if conversation.status == "ended":
        raise Conflict("the conversation has ended", code="conversation_ended")
    if conversation.fsm.state in ("running", "awaiting_input"):
        raise Conflict("a turn is running: hand the conversation over once it ends",
                       code="turn_running")
