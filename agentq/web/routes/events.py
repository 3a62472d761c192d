"""/v1/conversations/{id}/events and /stream: the log, paged by seq, or followed live (SSE)."""
from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import cast

from flask import Blueprint, Response, current_app, g, request
from werkzeug.wsgi import ClosingIterator

from agentq.api.events import EventPage, ListEvents, StreamHeaders, StreamQuery
from agentq.web import present
from agentq.web.errors import ApiError
from agentq.web.operation import SSE, operation
from agentq.web.services import services
from agentq.web.streaming import sse
from agentq.web.streaming.children import ChildDeltas
from agentq.web.streaming.streams import TooManyStreams

log = logging.getLogger(__name__)
RETRY_AFTER_S = 5
bp = Blueprint("events", __name__, url_prefix="/v1/conversations")


@bp.get("/<id:conversation_id>/events")
@operation("Read the log, a page of events after a seq", query=ListEvents,
           answers={200: EventPage})
def listing(conversation_id: str, query: ListEvents):
    svc = services()
    svc.conversation(conversation_id, g.scope)
    events = svc.store.log.list_events(conversation_id, after_seq=query.after_seq, limit=query.limit)
    full = len(events) == query.limit
    return present.dump(EventPage(
        events=[present.event(e) for e in events],
        next_after_seq=events[-1].seq if full else None,
    ))


@bp.get("/<id:conversation_id>/stream")
@operation("Follow the conversation live (Server-Sent Events)", query=StreamQuery,
           headers=StreamHeaders, answers={200: SSE}, errors=(429, 503))
def stream(conversation_id: str, query: StreamQuery, headers: StreamHeaders):
    """Replays events after `Last-Event-ID` (which wins: a reconnecting browser sends it) or `after_seq`.

    With `turn_id`, replays that turn's events from its start (or from `Last-Event-ID`)."""
    svc, streams = services(), services().open_streams
    after = int(headers.last_event_id) if headers.last_event_id is not None else query.after_seq
    with streams.opening():
        info = svc.conversation(conversation_id, g.scope)
        plan = sse.StreamPlan(
            conversation_id=conversation_id,
            after_seq=after,
            keepalive_s=float(current_app.config["AGENTQ_SSE_KEEPALIVE_S"]),
            until_idle=query.until_idle in ("1", "true"),
        )
        if query.turn_id is not None:
            plan = _turn_plan(svc, plan, query.turn_id, info.next_seq - 1, headers.last_event_id)
        opened = _open(svc, streams, plan, g.scope.tenant)
        children = None
        if query.include_children in ("1", "true"):
            try:
                children = _children(svc, opened.feed, plan, g.scope.tenant)
            except BaseException:
                streams.release(opened)  # its slot and subscription are given back
                raise
    ends = sse.EndReads(svc.store.conversations, svc.store.inbox)
    body = streams.follow(opened, sse.frames(svc.shared_reads, ends, opened.feed, plan,
                                             svc.pubsub.partial_of_turn, children))
    return Response(
        _replayed_first(body),
        mimetype=SSE,
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def _replayed_first(body: Iterable[str]) -> Iterable[str]:
    """The stream with its first write (the replay of the log) already read, so that a
    database that cannot be reached is a 503 now (errors.py) and not a broken stream.

    Careful: the server sends the status with the first write; a read that fails after it
    would end the request as a 500 the client cannot retry.
    """
    frames: Iterator[str] = iter(body)
    try:
        first = next(frames)
    except StopIteration:
        first = ""
    except BaseException:
        _close(body)  # the stream's slot and subscription are given back
        raise
    rest = cast(Iterable[bytes], itertools.chain((first,), frames))  # Flask takes text frames too
    return cast(Iterable[str], ClosingIterator(rest, [lambda: _close(body)]))


def _close(body: Iterable[str]) -> None:
    close = getattr(body, "close", None)
    if close is not None:
        close()


def _turn_plan(svc, plan: sse.StreamPlan, turn_id: str, last_seq: int,
               last_event_id: int | None) -> sse.StreamPlan:
    """Start at the turn's user_msg (or at the log's end while it waits), unless resuming.

    `last_seq` was read before the turn was looked up: a turn not started then starts after it.
    """
    start = svc.store.inbox.find_turn(plan.conversation_id, turn_id)
    if start is None:
        raise ApiError(404, "not_found", f"conversation {plan.conversation_id} has no turn {turn_id}")
    first = last_seq if start.seq is None else start.seq - 1
    after = last_event_id if last_event_id is not None else max(plan.after_seq, first)
    return replace(plan, after_seq=after, turn_id=turn_id,
                   turn_started=start.seq is not None and after >= start.seq)


def _children(svc, feed, plan: sse.StreamPlan, tenant: str) -> ChildDeltas:
    """The sub-agents the stream follows: those running now (of its turn, on a turn stream),
    then those its log starts; at most the operator's max_children_per_turn at once."""
    fanout = svc.pubsub.fanout

    def owned(child_id: str) -> bool:
        info = svc.store.conversations.load(child_id)
        return info is None or info.tenant == tenant  # not started yet: its parent starts it

    children = ChildDeltas(
        plan.conversation_id, limit=svc.policy.ceilings_for(tenant).max_children_per_turn,
        join=lambda name: fanout.join(feed, name), leave=lambda name: fanout.leave(feed, name),
        owned=owned)
    pending = svc.store.calls.list_of(plan.conversation_id, status="pending")
    children.running([c for c in pending if plan.turn_id in (None, c.turn_id)])
    return children


def _open(svc, streams, plan: sse.StreamPlan, tenant: str):
    """Admit and subscribe the stream: 429 past the tenant's cap, 503 if pub/sub is down."""
    try:
        return streams.open(tenant, svc.subscription(plan.conversation_id,
                                                     keepalive_s=plan.keepalive_s),
                            request.environ)
    except TooManyStreams:
        raise ApiError(429, "too_many_streams",
                       f"this tenant holds {streams.limits.per_tenant} open streams, the most it "
                       "may; close one or retry later", headers={"Retry-After": str(RETRY_AFTER_S)},
                       details={"limit": streams.limits.per_tenant}) from None
    except Exception:  # pub/sub down: say so now, not as a broken stream
        log.exception("could not subscribe to live updates of %s", plan.conversation_id)
        raise ApiError(503, "unavailable", "live updates are unavailable; retry shortly",
                       headers={"Retry-After": str(RETRY_AFTER_S)}) from None
