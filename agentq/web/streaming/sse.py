"""Server-Sent Events for one conversation: replay the log after a seq, then follow it live.

Frames: each persisted event is `id: <seq>` + `event: event` + its JSON (one event name
for all types, so a client needs one listener); live deltas are `event: delta`, retries
`event: retry`; `: keep-alive` comments keep proxies from closing a quiet stream.

Careful: the feed is subscribed BEFORE the replay reads the log, so an event
committed while replaying is announced to us and read after the last seq we sent:
nothing falls between replay and live, and no event is sent twice. Each wake-up writes
every frame it brought at once, and a frame shared by many streams (an event of one
read, a delta) is encoded once. A feed that ends
(its client went away or fell behind, the server stops) ends the stream; a client that
reconnects with Last-Event-ID replays what it missed.

With `include_children`, the deltas of the conversation's sub-agents come too, as
`event: child_delta` frames that name the child (web/streaming/children.py): a stream that
did not ask sends exactly what it did before.

A turn stream (`turn_id`) sends only that turn's events and deltas, its rounds' text
from the first character (web/turn_text.py), and ends with `end` once the turn is over
(idle or failed after it, a later turn started, or the conversation ended): a client
posts a message and follows the turn its answer names, whenever it connects.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from agentq.api.events import StreamEnd
from agentq.core.events import Event
from agentq.live.pubsub import Feed, FeedEnded, Notice, Partial, channel
from agentq.store.conversations import Conversations
from agentq.store.inbox import Inbox
from agentq.web import present
from agentq.web.streaming.children import ChildDeltas, child_delta
from agentq.web.streaming.shared_reads import SharedReads
from agentq.web.streaming.turn_text import TurnText

RETRY_MS = 2000
PAGE = 500
KEEP_ALIVE = ": keep-alive\n\n"


@dataclass(frozen=True)
class StreamPlan:
    conversation_id: str
    after_seq: int
    keepalive_s: float
    until_idle: bool = False
    turn_id: str | None = None  # follow this turn only, until it is over
    turn_started: bool = False  # the turn's user_msg is in the log already


@dataclass(frozen=True)
class EndReads:
    """What a stream reads to know it may end: the conversation's row and its inbox."""

    conversations: Conversations
    inbox: Inbox


@dataclass
class Cursor:
    """The seq of the last event this stream sent, and the rounds it saw interrupted.

    On a turn stream, also the turn's text as sent (`turn`) and whether its user_msg was
    seen (`started`)."""

    last_seq: int
    interrupted_rounds: set[str | None] = field(default_factory=set)
    turn: TurnText | None = None
    started: bool = False
    children: ChildDeltas | None = None  # with include_children: the sub-agents followed

    def passed(self, event: Event) -> None:
        self.last_seq = event.seq
        if event.type == "assistant_msg" and event.content.get("interrupted"):
            self.interrupted_rounds.add(event.round_id)
        if self.turn is not None and event.turn_id == self.turn.turn_id:
            self.started = True

    def wants(self, event: Event) -> bool:
        return self.turn is None or event.turn_id == self.turn.turn_id

    def stale(self, notice: Notice) -> bool:
        """A delta of a round this stream already sent as interrupted: the log has its text."""
        return notice.kind == "delta" and notice.data.get("round_id") in self.interrupted_rounds


def frame(kind: str, data: Any, seq: int | None = None) -> str:
    head = "" if seq is None else f"id: {seq}\n"
    return f"{head}event: {kind}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


def event_frame(event: Event) -> str:
    return frame("event", present.dump(present.event(event)), event.seq)


def live_frame(notice: Notice) -> str:
    """A delta's or retry's frame, encoded once for all the streams that share the notice."""
    text = notice.memo.get("sse")
    if text is None:
        text = notice.memo["sse"] = frame(notice.kind, notice.data)
    return text


def child_frame(notice: Notice, child_id: str) -> str:
    """A sub-agent's delta on its parent's stream, encoded once for the parent's streams."""
    text = notice.memo.get("sse_child")
    if text is None:
        text = notice.memo["sse_child"] = frame("child_delta", child_delta(child_id, notice.data))
    return text


def frames(reads: SharedReads, ends: EndReads, feed: Feed, plan: StreamPlan,
           read_partial: Callable[[str], Partial | None] = lambda turn_id: None,
           children: ChildDeltas | None = None) -> Iterator[str]:
    """Replay, then live, until the feed ends; the caller closes the feed.

    `reads` is the log as the streams share it, `ends` what says the stream is over;
    `read_partial(turn_id)` is the text a turn's round streamed so far (turn streams only);
    `children`, the sub-agents whose deltas the stream forwards (`include_children`).
    """
    try:
        yield from _frames(reads, ends, feed, plan, read_partial, children)
    except FeedEnded:
        return


def _frames(reads: SharedReads, ends: EndReads, feed: Feed, plan: StreamPlan,
            read_partial: Callable[[str], Partial | None],
            children: ChildDeltas | None) -> Iterator[str]:
    cid = plan.conversation_id
    cursor = Cursor(plan.after_seq, started=plan.turn_started, children=children)
    partial = None
    if plan.turn_id is not None:  # read before the replay: a round the replay ends is not joined
        cursor.turn = TurnText(plan.turn_id, read_partial)
        partial = read_partial(plan.turn_id)
    replay = [f"retry: {RETRY_MS}\n\n"]
    for text in catch_up(reads, cid, cursor, time.monotonic()):
        replay.append(text)
        if len(replay) >= PAGE:  # a write per page of the log, not per event
            yield "".join(replay)
            replay = []
    if cursor.turn is not None and partial is not None:
        replay.extend(frame("delta", d) for d in cursor.turn.catch_up(partial))
    if replay:
        yield "".join(replay)
    if (plan.until_idle or cursor.turn) and (end := _end_frame(ends, cid, cursor)):
        yield end
        return
    for batch in feed.batches():
        out: list[str] = []
        over = _follow(reads, ends, plan, cursor, batch, out)
        if out:
            yield "".join(out)  # one write for everything this wake-up brought
        if over:
            return


def _follow(reads: SharedReads, ends: EndReads, plan: StreamPlan, cursor: Cursor,
            batch: list[tuple[Notice, float]], out: list[str]) -> bool:
    """Add the frames of one wake-up's notices to `out`, in order; True once the stream ends.

    An empty batch is a keep-alive tick, which also re-reads the log: a lost notice costs
    latency only.
    """
    cid = plan.conversation_id
    if not batch:
        out.append(KEEP_ALIVE)
        sent = cursor.last_seq
        out.extend(catch_up(reads, cid, cursor, time.monotonic() - plan.keepalive_s))
        if cursor.last_seq != sent:
            return False  # ahead of the events' notice: deltas published before it may still come
        return _ended(ends, plan, cursor, out)
    own = channel(cid)
    for notice, arrived_at in batch:
        if notice.channel and notice.channel != own:  # a sub-agent's delta (include_children)
            child = cursor.children.child_of(notice) if cursor.children is not None else None
            if child is not None:
                out.append(child_frame(notice, child))
            continue
        if cursor.turn is not None and notice.kind in ("delta", "retry"):
            out.extend(_turn_live(cursor.turn, notice))
            continue
        if notice.kind in ("delta", "retry"):
            if not cursor.stale(notice):
                out.append(live_frame(notice))
            continue
        out.extend(catch_up(reads, cid, cursor, arrived_at))
        if _ended(ends, plan, cursor, out):
            return True
    return False


def _turn_live(turn: TurnText, notice: Notice) -> list[str]:
    """A live notice on a turn stream: this turn's retries, and its deltas as TurnText says."""
    if notice.kind == "retry":
        return [live_frame(notice)] if notice.data.get("turn_id") == turn.turn_id else []
    return [live_frame(notice) if d is notice.data else frame("delta", d)
            for d in turn.live(notice.data)]


def _ended(ends: EndReads, plan: StreamPlan, cursor: Cursor, out: list[str]) -> bool:
    """With `until_idle` or on a turn stream, add the `end` frame and say so once it is over."""
    end = _end_frame(ends, plan.conversation_id, cursor) if plan.until_idle or cursor.turn else None
    if end:
        out.append(end)
    return end is not None


def catch_up(reads: SharedReads, cid: str, cursor: Cursor, fresh_since: float) -> Iterator[str]:
    """Every stored event after `cursor.last_seq`, in seq order, each once.

    Read at or after `fresh_since`: the arrival of the notice that woke the stream. The
    frames come with the shared read, so each event is encoded once per read.
    """
    while True:
        page = reads.page(cid, after_seq=cursor.last_seq, limit=PAGE, fresh_since=fresh_since)
        events = page.events
        for event, text in zip(events, page.frames(event_frame), strict=True):
            cursor.passed(event)
            if cursor.turn is not None and cursor.wants(event):
                yield from (frame("delta", d) for d in cursor.turn.ended(event))
            if cursor.wants(event):
                if cursor.children is not None:
                    cursor.children.saw(event)
                yield text
        if len(events) < PAGE:
            if cursor.children is not None:
                cursor.children.sync()
            return


def _end_frame(ends: EndReads, cid: str, cursor: Cursor) -> str | None:
    """An `end` frame once no turn is running (on a turn stream: once its turn is over)
    and everything in the log was sent."""
    turn_id = cursor.turn.turn_id if cursor.turn is not None else None
    info = ends.conversations.load(cid)
    if info is None:
        return _end(StreamEnd(state="gone", last_seq=cursor.last_seq, turn_id=turn_id))
    last_seq = info.next_seq - 1
    if last_seq > cursor.last_seq:
        return None  # the log moved since the catch-up: its notice is on the way
    state = present.state_of(info)
    if turn_id is not None:
        if not _turn_over(cursor, info.fsm, state):
            return None
    elif state == "running" or (state == "idle" and ends.inbox.list_of(cid)):
        return None
    return _end(StreamEnd(state=state, last_seq=last_seq, turn_id=turn_id))


def _end(end: StreamEnd) -> str:
    return frame("end", end.model_dump(mode="json", exclude_none=True))  # turn_id: turn streams only


def _turn_over(cursor: Cursor, fsm, state: str) -> bool:
    """The followed turn is over: idle or failed after it, a later turn began, or the
    conversation ended (a message still waiting in its inbox then never starts one)."""
    if state == "ended":
        return True
    if not cursor.started or cursor.turn is None:
        return False  # still waiting in the inbox
    return fsm.turn_id != cursor.turn.turn_id or state in ("idle", "failed")
