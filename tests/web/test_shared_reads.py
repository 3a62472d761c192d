"""agentq/web/streaming/shared_reads.py: streams share a read of the log only if it is fresh enough for them."""
from __future__ import annotations

import threading
import time

from agentq.core.weight import total_weight
from agentq.web.streaming import shared_reads
from agentq.web.streaming.shared_reads import SharedReads


class SlowLog:
    """An event log whose list_events takes a while, counting its calls."""

    def __init__(self) -> None:
        self.calls = 0
        self.events = ["e1"]
        self.gate = threading.Event()

    def list_events(self, cid, *, after_seq, limit):
        self.calls += 1
        self.gate.wait(5)
        return list(self.events)


def test_streams_woken_before_a_read_started_share_it():
    log = SlowLog()
    reads = SharedReads(log)
    woke_at = time.monotonic()
    answers: list = []
    threads = [threading.Thread(target=lambda: answers.append(
        reads.list_events("c1", after_seq=0, limit=500, fresh_since=woke_at))) for _ in range(20)]
    for thread in threads:
        thread.start()
    time.sleep(0.2)
    log.gate.set()
    for thread in threads:
        thread.join(5)
    assert log.calls == 1 and answers == [["e1"]] * 20


def test_a_stream_woken_after_a_read_started_reads_again():
    log = SlowLog()
    log.gate.set()
    reads = SharedReads(log)
    assert reads.list_events("c1", after_seq=0, limit=500, fresh_since=time.monotonic()) == ["e1"]
    log.events.append("e2")  # committed, then announced: the notice arrives after that read
    assert reads.list_events("c1", after_seq=0, limit=500, fresh_since=time.monotonic()) == ["e1", "e2"]
    assert log.calls == 2
    # a keep-alive's re-read takes the read of its period; another page is another read
    assert reads.list_events("c1", after_seq=0, limit=500, fresh_since=time.monotonic() - 15) == ["e1", "e2"]
    assert reads.list_events("c1", after_seq=1, limit=500, fresh_since=time.monotonic() - 15) == ["e1", "e2"]
    assert log.calls == 3


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


def test_done_reads_are_forgotten_once_older_than_a_minute_however_few(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(shared_reads, "time", clock)
    log = SlowLog()
    log.gate.set()
    reads = SharedReads(log)
    for page in range(5):
        reads.list_events("c1", after_seq=page, limit=500, fresh_since=clock.now)
    assert reads.kept()[0] == 5
    clock.now += shared_reads.KEEP_S + 1
    reads.list_events("c2", after_seq=0, limit=500, fresh_since=clock.now)
    assert reads.kept()[0] == 1


def test_done_reads_are_kept_to_about_keep_bytes_of_events_the_oldest_going_first(monkeypatch):
    log = SlowLog()
    log.gate.set()
    log.events = [{"text": "x" * 1000}] * 10
    monkeypatch.setattr(shared_reads, "KEEP_BYTES", 5 * total_weight(log.events))
    reads = SharedReads(log)
    for page in range(20):
        reads.list_events("c1", after_seq=page, limit=500, fresh_since=time.monotonic())
    count, weight = reads.kept()
    assert count == 5 and weight == 5 * total_weight(log.events) <= shared_reads.KEEP_BYTES
    log.calls = 0
    reads.list_events("c1", after_seq=19, limit=500, fresh_since=time.monotonic() - 15)
    reads.list_events("c1", after_seq=0, limit=500, fresh_since=time.monotonic() - 15)
    assert log.calls == 1  # the newest page is kept, the oldest is read again
