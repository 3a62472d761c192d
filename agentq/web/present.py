"""Domain values as the API's JSON answers (docs/design.md §10), built via the models of agentq.api."""
from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

from agentq.api.agents import AgentOut, AgentRefOut
from agentq.api.common import States
from agentq.api.conversations import Conversation, ConversationItem, ParentOut, PendingCall, SummarySpan
from agentq.api.events import EventOut
from agentq.api.tool_calls import DecidersOut, ToolCall
from agentq.commands.deciding import DecisionRules
from agentq.core.agents import AgentVersion
from agentq.core.deciders import Decider
from agentq.core.events import Event, ToolCallRecord
from agentq.core.timefmt import format_ts
from agentq.store import ConversationInfo
from agentq.store.overview import Overview

Shown = TypeVar("Shown", bound=ToolCall)


def state_of(info: ConversationInfo) -> States:
    """`ended` once the conversation is ended, else the state of its machine."""
    return "ended" if info.status == "ended" else info.fsm.state


def conversation(overview: Overview) -> Conversation:
    """The full state: pending calls with their arguments, inbox length, latest summary span."""
    info = overview.conversation
    span = overview.summary
    return Conversation(
        id=info.id,
        state=state_of(info),
        last_seq=info.next_seq - 1,
        turn_id=info.fsm.turn_id,
        pending=[
            PendingCall(
                tool_call_id=call.id, name=call.name, args=call.args, executor=call.executor,
                expires_at=None if call.expires_at is None else format_ts(call.expires_at),
                needs_approval=call.needs_approval,
                elicitation=(call.elicitation or {}).get("question"),
                child_conversation_id=call.to_json().get("child_conversation_id"),
                outcome_unknown=call.to_json().get("outcome_unknown"),
            )
            for call in overview.pending
        ],
        inbox=overview.inbox,
        summary=None if span is None else SummarySpan(from_seq=span[0], to_seq=span[1]),
        agent=agent_ref(info),
        parent=None if info.parent is None else ParentOut(**info.parent.to_json()),
        settings=info.settings,
        created_at=format_ts(info.created_at),
        updated_at=format_ts(info.updated_at),
        held_by=held_by(info),
    )


def conversation_item(info: ConversationInfo, title: str | None = None) -> ConversationItem:
    scope = info.fsm.scope or {}
    return ConversationItem(
        id=info.id,
        title=title,
        acting_user=scope.get("user") if scope.get("tenant") != "system" else None,
        state=state_of(info),
        last_seq=info.next_seq - 1,
        agent=agent_ref(info),
        created_at=format_ts(info.created_at),
        updated_at=format_ts(info.updated_at),
    )


def event(item: Event) -> EventOut:
    return EventOut(
        id=item.id,
        seq=item.seq,
        type=item.type,
        turn_id=item.turn_id,
        round_id=item.round_id,
        created_at=format_ts(item.created_at),
        content=item.content,
    )


def tool_call(record: ToolCallRecord, **where: str | None) -> ToolCall:
    """A call as the API shows it; `where` (conversation_id, agent) for a sub-agent's call
    listed with its parent's."""
    return ToolCall.model_validate({**record.to_json(), **where})


def decidable(call: Shown, record: ToolCallRecord, conversation: ConversationInfo,
              rules: DecisionRules, decider: Decider) -> Shown:
    """The call with whether it takes edited arguments and, while a person may decide it,
    whether `decider` may and who may (agentq.commands.deciding)."""
    extra: dict[str, Any] = {"editable": rules.editable(record)}
    if record.status == "pending" and record.executor != "agent":
        rule = rules.rule(record, conversation.tenant)
        extra.update(may_decide=rules.may_decide(record, conversation, decider),
                     deciders=DecidersOut(**rule.to_json()))
    return call.model_copy(update=extra)


def agent_ref(info: ConversationInfo) -> AgentRefOut | None:
    """The agent version the conversation was started from, if it was."""
    if info.agent is None or info.agent.version is None:
        return None
    return AgentRefOut(name=info.agent.name, version=info.agent.version)


def held_by(info: ConversationInfo) -> AgentRefOut | None:
    """The agent a handoff gave the conversation to, if one did (agentq.core.handoffs)."""
    held = info.fsm.agent
    if held is None or held.get("version") is None:
        return None
    return AgentRefOut(name=held["name"], version=held["version"])


def agent(version: AgentVersion) -> dict[str, Any]:
    """One version of an agent; its settings as set, so that what the profile presets for
    what it leaves unset still shows as unset."""
    definition = version.definition
    answer = dump(AgentOut(
        name=definition.name, version=version.version, digest=version.digest,
        source=version.source, description=definition.description, settings=definition.settings,
        overridable=list(definition.overridable), created_at=format_ts(version.created_at),
    ))
    answer["settings"] = definition.settings.model_dump(mode="json", exclude_unset=True)
    return answer


def dump(answer: BaseModel) -> dict[str, Any]:
    return answer.model_dump(mode="json")
