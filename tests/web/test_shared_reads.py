"""agentq/web/streaming/shared_reads.py: streams share a read of the log only if it is fresh enough for them."""
from __future__ import annotations

import threading
import time

from agentq.web.streaming.shared_reads import SharedReads


class SlowLog:
    """A store whose list_events takes a while, counting its calls."""

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
