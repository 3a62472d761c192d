"""Delivery to many streams of one conversation: one read of the log per notice, each event
and delta encoded once per process, every frame once and in order, a wake-up in one write."""
from __future__ import annotations

from datetime import datetime, timezone

from agentq.core.events import Event
from agentq.live.fanout import Feed, Notice
from agentq.web.streaming import sse
from agentq.web.streaming.shared_reads import SharedReads

AT = datetime(2026, 11, 23, tzinfo=timezone.utc)
# these streams follow the log with no end: nothing reads the conversation or its inbox
NEVER_ENDS = sse.EndReads(conversations=None, inbox=None)  # type: ignore[arg-type]


def event(seq: int, text: str = "hi") -> Event:
    return Event(id=f"e{seq}", conversation_id="c1", seq=seq, type="user_msg", turn_id="t1",
                 round_id=None, step_key=None, content={"text": text}, created_at=AT)


class CountingLog:
    """An event log counting the reads of it."""

    def __init__(self, *events: Event) -> None:
        self.events = list(events)
        self.reads = 0

    def list_events(self, cid, *, after_seq, limit):
        self.reads += 1
        return [e for e in self.events if e.seq > after_seq][:limit]


def delta(index: int) -> Notice:
    return Notice("delta", {"round_id": "r1", "turn_id": "t1", "index": index, "attempt": 1,
                            "text": f"part {index}"})


def seqs(text: str) -> list[int]:
    return [int(line[4:]) for line in text.splitlines() if line.startswith("id: ")]


def open_streams(log: CountingLog, count: int) -> tuple[list[Feed], list]:
    """`count` streams of c1, each past its replay (what the log held when it opened)."""
    reads = SharedReads(log)
    plan = sse.StreamPlan(conversation_id="c1", after_seq=0, keepalive_s=60.0)
    feeds = [Feed("c1", capacity=100, timeout_s=60.0) for _ in range(count)]
    streams = [sse.frames(reads, NEVER_ENDS, feed, plan) for feed in feeds]
    for stream in streams:
        replay = next(stream)  # the replay: one write
        assert replay.startswith("retry: ") and seqs(replay) == [e.seq for e in log.events]
    return feeds, streams


def test_a_feed_hands_over_every_waiting_notice_at_once_in_arrival_order():
    feed = Feed("c1", capacity=10, timeout_s=0.01)
    events = Notice("events", {"last_seq": 3})
    newer = Notice("events", {"last_seq": 4})
    for notice in (delta(0), delta(1), events, newer):
        assert feed.put(notice)
    taken = feed.take(0.01)
    assert [n for n, _ in taken] == [delta(0), delta(1), newer]  # two reads of the log are one
    assert [at for _, at in taken] == sorted(at for _, at in taken)
    assert feed.take(0.01) == []  # nothing came: a keep-alive tick


def test_a_hundred_streams_of_a_conversation_read_the_log_once_per_notice(monkeypatch):
    log = CountingLog(event(1))
    feeds, streams = open_streams(log, 100)
    encoded = []
    monkeypatch.setattr(sse, "event_frame", lambda e: encoded.append(e.seq) or f"id: {e.seq}\n\n")
    log.events += [event(2), event(3)]
    log.reads = 0
    notice = Notice("events", {"last_seq": 3})
    for feed in feeds:
        feed.put(notice)
    written = [next(stream) for stream in streams]
    assert log.reads == 1 and encoded == [2, 3]
    assert all(seqs(text) == [2, 3] for text in written)  # each once, in order, in one write


def test_a_delta_is_encoded_once_for_every_stream_and_comes_in_order(monkeypatch):
    log = CountingLog(event(1))
    feeds, streams = open_streams(log, 50)
    calls = []
    real = sse.frame
    monkeypatch.setattr(sse, "frame", lambda *a, **k: calls.append(a[0]) or real(*a, **k))
    log.events.append(event(2))
    log.reads = 0
    notices = [delta(0), delta(1), Notice("events", {"last_seq": 2}), delta(2)]
    for notice in notices:
        for feed in feeds:
            feed.put(notice)
    written = [next(stream) for stream in streams]
    assert calls == ["delta", "delta", "event", "delta"] and log.reads == 1  # each once
    expected = (sse.live_frame(notices[0]) + sse.live_frame(notices[1])
                + sse.event_frame(event(2)) + sse.live_frame(notices[3]))
    assert written == [expected] * 50
