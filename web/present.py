"""Domain values as the API's answers (DESIGN section 10's JSON shapes), built through web.models."""
from __future__ import annotations

from typing import Any

from agentq.core.events import Event, ToolCallRecord
from agentq.core.timefmt import format_ts
from agentq.store import ConversationInfo, Store
from web import models


def state_of(info: ConversationInfo) -> str:
    """`ended` once the conversation is ended, else the state of its machine."""
    return "ended" if info.status == "ended" else info.fsm.state


def conversation(store: Store, info: ConversationInfo) -> models.Conversation:
    """The full state: pending calls with their arguments, inbox length, latest summary span."""
    pending = [call for call in store.list_tool_calls(info.id, status="pending")]
    summaries = store.list_summaries(info.id)
    latest = summaries[-1] if summaries else None
    return models.Conversation(
        id=info.id,
        state=state_of(info),
        last_seq=info.next_seq - 1,
        pending=[
            models.PendingCall(
                tool_call_id=call.id, name=call.name, args=call.args, executor=call.executor,
                expires_at=None if call.expires_at is None else format_ts(call.expires_at),
            )
            for call in pending
        ],
        inbox=len(store.list_inbox(info.id)),
        summary=None if latest is None else models.SummarySpan(from_seq=latest.from_seq, to_seq=latest.to_seq),
        settings=info.settings,
        created_at=format_ts(info.created_at),
        updated_at=format_ts(info.updated_at),
    )


def conversation_item(info: ConversationInfo) -> models.ConversationItem:
    return models.ConversationItem(
        id=info.id,
        state=state_of(info),
        last_seq=info.next_seq - 1,
        created_at=format_ts(info.created_at),
        updated_at=format_ts(info.updated_at),
    )


def event(item: Event) -> models.EventOut:
    return models.EventOut(
        id=item.id,
        seq=item.seq,
        type=item.type,
        turn_id=item.turn_id,
        round_id=item.round_id,
        created_at=format_ts(item.created_at),
        content=item.content,
    )


def tool_call(record: ToolCallRecord) -> models.ToolCall:
    return models.ToolCall.model_validate(record.to_json())


def dump(answer: models.BaseModel) -> dict[str, Any]:
    return answer.model_dump(mode="json")
