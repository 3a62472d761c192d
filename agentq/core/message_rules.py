"""What becomes of a posted message: the rules of `post_message`, as a pure classifier.

`message_request` checks the request alone, before anything is read; `classify_message`
takes what was read under the conversation's lock and returns one verdict: refuse it,
replay the first answer to its idempotency key (inv. 5), queue it, or append it (inv. 2).
The command writes what the verdict says; nothing here reads a clock or a database.
"""
from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeGuard

from agentq.core.decide import message_action
from agentq.core.events import FsmState, OnBusy
from agentq.core.keys import canonical_json
from agentq.core.parts import BadContent, read_content
from agentq.core.refusal import Refusal
from agentq.core.timefmt import format_ts, to_utc

ON_BUSY: tuple[OnBusy, ...] = ("enqueue", "interrupt", "reject")


@dataclass(frozen=True)
class MessageRequest:
    """A message as posted, its shape already checked; `request_hash` is what it said."""

    content: str | list[Any]
    on_busy: OnBusy
    request_hash: str
    idempotency_key: str | None = None


@dataclass(frozen=True)
class LockedConversation:
    """What posting a message reads under the conversation's lock.

    `replayed` is the answer already given to the request's idempotency key, with the hash
    of that request (`message_id`, `turn_id`, `queued`, `request_hash`), or None;
    `inbox_waiting` matters only while the conversation is idle.
    """

    status: str
    fsm: FsmState
    max_image_bytes: int
    replayed: Mapping[str, Any] | None = None
    inbox_waiting: bool = False


@dataclass(frozen=True)
class Replay:
    """The key was used for this very request: its first answer, nothing written again."""

    answer: dict[str, Any]


@dataclass(frozen=True)
class Queue:
    """A turn is busy (or earlier messages wait): the message waits in the inbox."""

    message: dict[str, Any]


@dataclass(frozen=True)
class Append:
    """The message starts a turn now; `close_turn`: the turn before it is closed first."""

    message: dict[str, Any]
    close_turn: bool


MessageVerdict = Refusal | Replay | Queue | Append


def message_request(
    content: str | list[Any], on_busy: str, *, idempotency_key: str | None = None,
    created_at: datetime | None = None,
) -> MessageRequest | Refusal:
    """The request, or why its shape is refused before the conversation is even read."""
    if isinstance(content, str) and not content.strip():
        return Refusal.invalid("content must not be empty")
    if not _is_on_busy(on_busy):
        return Refusal.invalid(f"on_busy must be one of {', '.join(ON_BUSY)}")
    return MessageRequest(content, on_busy, request_hash(content, on_busy, created_at), idempotency_key)


def request_hash(content: str | list[Any], on_busy: str, created_at: datetime | None) -> str:
    """What a message's request said, as one hash: a key replayed with another is refused."""
    asked = {"content": content, "on_busy": on_busy,
             "created_at": None if created_at is None else format_ts(to_utc(created_at))}
    return hashlib.sha256(canonical_json(asked).encode("utf-8", "surrogatepass")).hexdigest()


def classify_message(request: MessageRequest, conv: LockedConversation) -> MessageVerdict:
    """What to do with the message, as a flat ladder of rules."""
    try:
        message = read_content(request.content, max_image_bytes=conv.max_image_bytes)
    except BadContent as exc:
        return Refusal.invalid(str(exc), code="invalid_content")
    if conv.replayed is not None:
        return _replay(request, conv.replayed)
    if conv.status == "ended":
        return _refused("the conversation has ended", conv)
    action = message_action(conv.fsm.state, request.on_busy)
    if action == "append" and conv.fsm.state == "idle" and conv.inbox_waiting:
        action = "enqueue"  # earlier messages are still waiting: keep arrival order
    if action == "reject":
        return _refused(f"a turn is {conv.fsm.state}; message rejected (on_busy=reject)", conv)
    if action == "enqueue":
        return Queue(message)
    # inv. 2: the running (or failed) turn is closed before the new one starts
    return Append(message, close_turn=action == "interrupt" or bool(conv.fsm.pending or conv.fsm.running))


def _replay(request: MessageRequest, replayed: Mapping[str, Any]) -> Replay | Refusal:
    """The first answer to the key, if the key is replayed with the same request."""
    if replayed.get("request_hash") not in (None, request.request_hash):
        return Refusal.invalid(
            "this Idempotency-Key was used with a different request: send the same "
            "request to replay it, or use a new key", code="idempotency_key_reused",
        )
    return Replay({name: value for name, value in replayed.items() if name != "request_hash"})


def _refused(message: str, conv: LockedConversation) -> Refusal:
    """A message the conversation's state refuses; the details say that state, as read under
    the lock (`ended`, or its machine's state)."""
    state = "ended" if conv.status == "ended" else conv.fsm.state
    return Refusal.conflict(message, details={"state": state})


def _is_on_busy(value: str) -> TypeGuard[OnBusy]:
    return value in ON_BUSY
