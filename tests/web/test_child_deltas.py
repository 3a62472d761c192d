"""A parent's stream with `include_children`: which sub-agents it follows, and how their
deltas are framed; a stream that did not ask sends nothing of them. The fanout part runs on
the in-process pub/sub, the same code as on Redis."""
from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from agentq.config import EMBEDDED_PUBSUB
from agentq.core.events import Event
from agentq.core.subagents import child_conversation_id
from agentq.live.fanout import Feed, Notice
from agentq.live.pubsub import PubSub, channel
from agentq.web.streaming import sse
from agentq.web.streaming.children import ChildDeltas
from agentq.web.streaming.shared_reads import SharedReads

AT = datetime(2026, 11, 27, tzinfo=UTC)
PARENT = "p1"
# these streams follow the log with no end: nothing reads the conversation or its inbox
NEVER_ENDS = sse.EndReads(conversations=None, inbox=None)  # type: ignore[arg-type]


def event(seq: int, type_: str, **content) -> Event:
    return Event(id=f"e{seq}", conversation_id=PARENT, seq=seq, type=type_, turn_id="t1",
                 round_id=None, step_key=None, content=content, created_at=AT)


def agent_call(seq: int, call_id: str) -> Event:
    return event(seq, "tool_call", tool_call_id=call_id, name="researcher", args={"input": "?"},
                 executor="agent")


class Log:
    def __init__(self, *events: Event) -> None:
        self.events = list(events)

    def list_events(self, cid, *, after_seq, limit):
        return [e for e in self.events if e.seq > after_seq][:limit]


class Joins:
    """The channels a stream joined and left, in order; `others` are another tenant's children."""

    def __init__(self, others: frozenset[str] = frozenset()) -> None:
        self.log: list[tuple[str, str]] = []
        self.others = others

    def children(self, limit: int = 8) -> ChildDeltas:
        return ChildDeltas(PARENT, limit, join=lambda n: self.log.append(("join", n)),
                           leave=lambda n: self.log.append(("leave", n)),
                           owned=lambda child: child not in self.others)


def child_notice(child: str, index: int, kind: str = "delta") -> Notice:
    return Notice(kind, {"round_id": "r9", "turn_id": "t9", "index": index, "attempt": 1,
                         "text": f"piece {index}"}, channel=channel(child))


def frames_of(text: str) -> list[tuple[str, dict]]:
    out = []
    for block in text.split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line
                     and not line.startswith(":"))
        if "event" in lines:
            out.append((lines["event"], json.loads(lines["data"])))
    return out


def stream(log: Log, children: ChildDeltas | None):
    feed = Feed(channel(PARENT), capacity=100, timeout_s=60.0)
    plan = sse.StreamPlan(conversation_id=PARENT, after_seq=0, keepalive_s=60.0)
    frames = sse.frames(SharedReads(log), NEVER_ENDS, feed, plan, children=children)
    next(frames)  # the replay
    return feed, frames


def test_a_child_started_in_the_log_is_followed_and_its_deltas_name_it():
    child = child_conversation_id(PARENT, "call-1")
    joins = Joins()
    feed, frames = stream(Log(event(1, "user_msg", text="go"), agent_call(2, "call-1")),
                          joins.children())
    assert joins.log == [("join", channel(child))]
    feed.put(child_notice(child, 0))
    feed.put(child_notice(child, 1))
    sent = frames_of(next(frames))
    assert [kind for kind, _ in sent] == ["child_delta", "child_delta"]
    assert [(d["conversation_id"], d["index"], d["text"]) for _, d in sent] == [
        (child, 0, "piece 0"), (child, 1, "piece 1")]


def test_a_stream_that_did_not_ask_sends_nothing_of_a_childs_channel():
    child = child_conversation_id(PARENT, "call-1")
    feed, frames = stream(Log(agent_call(1, "call-1")), None)
    feed.put(child_notice(child, 0))
    feed.put(Notice("delta", {"round_id": "r1", "turn_id": "t1", "index": 0, "attempt": 1,
                              "text": "own"}))
    assert frames_of(next(frames)) == [("delta", {"round_id": "r1", "turn_id": "t1", "index": 0,
                                                  "attempt": 1, "text": "own"})]


def test_a_child_answered_is_left_and_one_answered_within_a_read_is_never_joined():
    log = Log(agent_call(1, "call-1"), agent_call(2, "call-2"),
              event(3, "tool_result", tool_call_id="call-1", output="done"))
    joins = Joins()
    feed, frames = stream(log, joins.children())
    second = channel(child_conversation_id(PARENT, "call-2"))
    assert joins.log == [("join", second)]
    log.events.append(event(4, "tool_result", tool_call_id="call-2", output="done"))
    feed.put(Notice("events", {"last_seq": 4}))
    next(frames)
    assert joins.log == [("join", second), ("leave", second)]
    feed.put(child_notice(child_conversation_id(PARENT, "call-2"), 5))  # came after it left
    log.events.append(event(5, "user_msg", text="next"))
    feed.put(Notice("events", {"last_seq": 5}))
    assert [kind for kind, _ in frames_of(next(frames))] == ["event"]


def test_children_past_the_limit_or_of_another_tenant_are_not_followed():
    calls = [agent_call(seq, f"call-{seq}") for seq in range(1, 5)]
    foreign = child_conversation_id(PARENT, "call-1")
    joins = Joins(others=frozenset({foreign}))
    stream(Log(*calls), joins.children(limit=2))
    assert joins.log == [("join", channel(child_conversation_id(PARENT, f"call-{n}")))
                         for n in (2, 3)]


def test_children_running_when_the_stream_opens_are_followed():
    from agentq.core.events import ToolCallRecord

    joins = Joins()
    children = joins.children()
    children.running([
        ToolCallRecord(conversation_id=PARENT, id=call_id, name="researcher", executor=executor,
                       status="pending", args={}, round_id="r1", turn_id="t1", created_at=AT)
        for call_id, executor in (("call-7", "agent"), ("call-8", "human"))])
    stream(Log(), children)
    assert joins.log == [("join", channel(child_conversation_id(PARENT, "call-7")))]


@pytest.fixture
def pubsub():
    return PubSub(f"{EMBEDDED_PUBSUB}child-deltas-test")


def test_a_joined_channel_brings_its_deltas_only_until_it_is_left(pubsub):
    feed = pubsub.subscribe(PARENT, timeout_s=0.05)
    try:
        pubsub.fanout.join(feed, channel("c2"))
        pubsub.publish("c2", "events", {"last_seq": 3})
        pubsub.publish("c2", "delta", {"round_id": "r2", "turn_id": "t2", "index": 0,
                                       "attempt": 1, "text": "hi"})
        pubsub.publish(PARENT, "events", {"last_seq": 1})
        got: list[Notice] = []
        while len(got) < 2:
            got.extend(n for n, _ in feed.take(5.0))
        assert [(n.kind, n.channel) for n in got] == [("delta", channel("c2")),
                                                        ("events", channel(PARENT))]
        pubsub.fanout.leave(feed, channel("c2"))
        assert feed.joined == set() and pubsub.fanout.channels() == 1
    finally:
        feed.close()
    assert pubsub.fanout.channels() == 0
