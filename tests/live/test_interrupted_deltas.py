"""No delta of an interrupted round reaches a stream after the round's interrupted assistant_msg.

Before, the worker kept streaming until its heartbeat noticed the interrupt (up to half a
second), and each of those deltas was published: a person saw text that the log and the
next request do not have.
"""
from __future__ import annotations

import threading
import time
import uuid

from agentq.live.pubsub import PubSub
from tests.support.api import SseReader

ROUND = "round-1"


def delta(index: int, text: str, attempt: int = 1) -> dict:
    return {"round_id": ROUND, "turn_id": "t1", "index": index, "attempt": attempt, "text": text}


def published(pubsub: PubSub, cid: str, action) -> list:
    subscription = pubsub.subscribe(cid, timeout_s=0.05)
    action()
    notices, quiet = [], 0
    for notice in subscription:  # until it has been quiet for a while
        quiet = quiet + 1 if notice is None else 0
        if quiet == 3:
            break
        if notice is not None:
            notices.append(notice)
    subscription.close()
    return notices


def test_closing_a_round_returns_what_was_published_and_drops_its_later_deltas():
    pubsub = PubSub(f"embedded://deltas-{uuid.uuid4().hex}")
    assert pubsub.publish("c1", "delta", delta(0, "Hello"))
    assert pubsub.publish("c1", "delta", delta(1, ", wor"))
    assert pubsub.close_round(ROUND) == "Hello, wor"

    def late() -> None:
        assert pubsub.publish("c1", "delta", delta(2, "ld")) is False
        assert pubsub.publish("c1", "retry", {"round_id": ROUND})  # only deltas are held back

    assert [n.kind for n in published(pubsub, "c1", late)] == ["retry"]


def test_a_new_attempt_starts_the_kept_text_afresh():
    pubsub = PubSub(f"embedded://deltas-{uuid.uuid4().hex}")
    pubsub.publish("c1", "delta", delta(0, "first try, cut"))
    pubsub.publish("c1", "delta", delta(0, "second ", attempt=2))
    pubsub.publish("c1", "delta", delta(1, "try", attempt=2))
    assert pubsub.close_round(ROUND) == "second try"


SLOW = [{"text": " ".join(f"word{i}" for i in range(120)), "chunks": 120, "delay_s": 3.0}]


def test_an_interrupted_round_streams_nothing_after_its_interrupted_assistant_msg(api, alice):
    cid = api.create(alice, script=SLOW)
    api.say(cid, "talk", alice)
    reader = SseReader(api.client.get(f"/v1/conversations/{cid}/stream", headers=alice,
                                      query_string={"until_idle": 1}, buffered=False))
    frames = [reader.next()]  # subscribed: every delta of the round reaches this stream
    following = threading.Thread(target=lambda: follow(reader, frames))
    worker = threading.Thread(target=api.run)
    worker.start()
    following.start()
    wait_for(lambda: sum(f.event == "delta" for f in frames) >= 3)
    assert api.say(cid, "stop", alice, on_busy="interrupt").status_code == 202
    worker.join(timeout=10)  # its heartbeat found the step cancelled and closed the stream
    api.run()  # the next turn
    following.join(timeout=10)

    events = [f.data for f in frames if f.event == "event"]
    kept = next(e for e in events if e["type"] == "assistant_msg" and e["content"]["interrupted"])
    at = frames.index(next(f for f in frames if f.event == "event" and f.data == kept))
    ours = [f.data for f in frames if f.event == "delta" and f.data["round_id"] == kept["round_id"]]
    assert ours and [f for f in frames[at:] if f.event == "delta"
                     and f.data["round_id"] == kept["round_id"]] == []
    # what the person saw of the round is what the log keeps (and the next request sends)
    assert "".join(d["text"] for d in ours) == kept["content"]["text"]
    assert frames[-1].event == "end" and events[-1]["type"] == "assistant_msg"


def follow(reader: SseReader, frames: list) -> None:
    """Read frames as they come, as a browser does, until the stream ends."""
    while (item := reader.next()) is not None:
        frames.append(item)


def wait_for(predicate, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not met"
        time.sleep(0.005)
