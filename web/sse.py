"""Server-Sent Events for one conversation: replay the log after a seq, then follow it live.

Frames: each persisted event is `id: <seq>` + `event: event` + its JSON (one event name
for all types, so a client needs one listener); live deltas are `event: delta`, retries
`event: retry`; `: keep-alive` comments keep proxies from closing a quiet stream.

Careful: the feed is subscribed BEFORE the replay reads the log, so an event
committed while replaying is announced to us and read after the last seq we sent:
nothing falls between replay and live, and no event is sent twice. A feed that ends
(its client went away or fell behind, the server stops) ends the stream; a client that
reconnects with Last-Event-ID replays what it missed.
"""
from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from agentq.core.events import Event
from agentq.pubsub import Feed, FeedEnded, Notice
from agentq.store import Store
from web import present
from web.models import StreamEnd
from web.shared_reads import SharedReads

RETRY_MS = 2000
PAGE = 500
KEEP_ALIVE = ": keep-alive\n\n"


@dataclass(frozen=True)
class StreamPlan:
    conversation_id: str
    after_seq: int
    keepalive_s: float
    until_idle: bool = False


@dataclass
class Cursor:
    """The seq of the last event this stream sent, and the rounds it saw interrupted."""

    last_seq: int
    interrupted_rounds: set[str] = field(default_factory=set)

    def passed(self, event: Event) -> None:
        self.last_seq = event.seq
        if event.type == "assistant_msg" and event.content.get("interrupted"):
            self.interrupted_rounds.add(event.round_id)

    def stale(self, notice: Notice) -> bool:
        """A delta of a round this stream already sent as interrupted: the log has its text."""
        return notice.kind == "delta" and notice.data.get("round_id") in self.interrupted_rounds


def frame(kind: str, data: Any, seq: int | None = None) -> str:
    head = "" if seq is None else f"id: {seq}\n"
    return f"{head}event: {kind}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


def frames(reads: SharedReads, feed: Feed, plan: StreamPlan) -> Iterator[str]:
    """Replay, then live, until the feed ends; the caller closes the feed."""
    try:
        yield from _frames(reads, feed, plan)
    except FeedEnded:
        return


def _frames(reads: SharedReads, feed: Feed, plan: StreamPlan) -> Iterator[str]:
    cid, store = plan.conversation_id, reads.store
    yield f"retry: {RETRY_MS}\n\n"
    cursor = Cursor(plan.after_seq)
    yield from catch_up(reads, cid, cursor, time.monotonic())
    if plan.until_idle and (end := _end_frame(store, cid, cursor)):
        yield end
        return
    for notice in feed:
        if notice is not None and notice.kind in ("delta", "retry"):
            if not cursor.stale(notice):
                yield frame(notice.kind, notice.data)
            continue
        if notice is None:
            yield KEEP_ALIVE  # also re-reads the log: a lost notice costs latency only
            fresh_since = time.monotonic() - plan.keepalive_s  # any read of this period
        else:
            fresh_since = feed.received_at
        sent = cursor.last_seq
        yield from catch_up(reads, cid, cursor, fresh_since)
        if notice is None and cursor.last_seq != sent:
            continue  # ahead of the events' notice: deltas published before it may still come
        if plan.until_idle and (end := _end_frame(store, cid, cursor)):
            yield end
            return


def catch_up(reads: SharedReads, cid: str, cursor: Cursor, fresh_since: float) -> Iterator[str]:
    """Every stored event after `cursor.last_seq`, in seq order, each once.

    Read at or after `fresh_since`: the arrival of the notice that woke the stream.
    """
    while True:
        events = reads.list_events(cid, after_seq=cursor.last_seq, limit=PAGE,
                                   fresh_since=fresh_since)
        for event in events:
            cursor.passed(event)
            yield frame("event", present.dump(present.event(event)), event.seq)
        if len(events) < PAGE:
            return


def _end_frame(store: Store, cid: str, cursor: Cursor) -> str | None:
    """An `end` frame once no turn is running and everything in the log was sent."""
    info = store.load_conversation(cid)
    if info is None:
        return frame("end", present.dump(StreamEnd(state="gone", last_seq=cursor.last_seq)))
    last_seq = info.next_seq - 1
    if last_seq > cursor.last_seq:
        return None  # the log moved since the catch-up: its notice is on the way
    state = present.state_of(info)
    if state == "running" or (state == "idle" and store.list_inbox(cid)):
        return None
    return frame("end", present.dump(StreamEnd(state=state, last_seq=last_seq)))
