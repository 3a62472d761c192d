"""Deltas a process publishes at the same moment share one round trip to Redis, and each
still gets its own answer: kept and published, or refused because its round was closed
(real Redis)."""
from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pytest
import redis

from agentq.live import delta_batches
from agentq.live.pubsub import PubSub
from tests.runtime.test_deltas import until_marker
from tests.support.processes import wait_for

pytestmark = pytest.mark.redis


class HeldSends:
    """The process's delta sends, the first of them held until `release`, each batch's size
    recorded: what queues behind a send under way is what the next send carries."""

    def __init__(self, pubsub: PubSub, before_batch=lambda: None) -> None:
        self.batches = pubsub._deltas
        self.before_batch = before_batch
        self.sizes: list[int] = []
        self.gate = threading.Event()
        self._send = self.batches._run
        self.batches._run = self._held  # type: ignore[method-assign]

    def _held(self, batch):
        self.sizes.append(len(batch))
        if len(self.sizes) == 1:
            assert self.gate.wait(10)
        if len(batch) > 1:
            self.before_batch()
        return self._send(batch)

    def queued(self) -> int:
        return len(self.batches._queue)


@pytest.fixture
def pubsub(redis_url: str) -> Iterator[PubSub]:
    yield PubSub(redis_url)


def delta(round_id: str, index: int, text: str) -> dict:
    return {"round_id": round_id, "turn_id": f"turn-{round_id}", "index": index, "attempt": 1,
            "text": text}


def publish_at_once(pubsub: PubSub, cid: str, deltas: list[dict], sends: HeldSends) -> list[bool]:
    """The first delta's send is held while the others queue behind it; then all go."""
    answers: list[bool | None] = [None] * len(deltas)

    def publish(i: int) -> None:
        answers[i] = pubsub.publish(cid, "delta", deltas[i])

    threads = [threading.Thread(target=publish, args=(0,))]
    threads[0].start()
    wait_for(lambda: sends.sizes == [1], timeout_s=10, what="the first send")
    threads += [threading.Thread(target=publish, args=(i,)) for i in range(1, len(deltas))]
    for thread in threads[1:]:
        thread.start()
    wait_for(lambda: sends.queued() == len(deltas) - 1, timeout_s=10, what="the deltas queued")
    sends.gate.set()
    for thread in threads:
        thread.join(10)
    return [bool(a) for a in answers]


def test_deltas_sent_at_once_share_a_round_trip_and_each_gets_its_own_answer(pubsub):
    cid = uuid.uuid4().hex
    rounds = [uuid.uuid4().hex for _ in range(9)]
    pubsub.publish(cid, "delta", delta(rounds[5], 0, "before "))
    pubsub.close_round(rounds[5])  # an interrupted round: its delta is refused, alone
    sends = HeldSends(pubsub)
    answers: list[bool] = []
    notices = until_marker(pubsub, cid, lambda: answers.extend(publish_at_once(
        pubsub, cid, [delta(r, 1 if i == 5 else 0, f"text of {i}") for i, r in enumerate(rounds)],
        sends)))
    assert sends.sizes == [1, 8]  # the first alone, the eight that came meanwhile in one
    assert answers == [i != 5 for i in range(9)]
    assert sorted(n.data["round_id"] for n in notices) == sorted(r for i, r in enumerate(rounds) if i != 5)
    for i, round_id in enumerate(rounds):
        assert pubsub.close_round(round_id) == ("before " if i == 5 else f"text of {i}")
        if i != 5:
            assert pubsub.partial_of_turn(f"turn-{round_id}").text == f"text of {i}"


def test_a_batch_after_redis_lost_its_scripts_runs_each_delta_once(pubsub, redis_url):
    cid = uuid.uuid4().hex
    rounds = [uuid.uuid4().hex for _ in range(4)]
    for round_id in rounds:
        pubsub.publish(cid, "delta", delta(round_id, 0, "a"))
    sends = HeldSends(pubsub, before_batch=redis.Redis.from_url(redis_url).script_flush)
    assert publish_at_once(pubsub, cid, [delta(r, 1, "b") for r in rounds], sends) == [True] * 4
    assert sends.sizes == [1, 3]
    assert [pubsub.close_round(r) for r in rounds] == ["ab"] * 4  # appended once each


def test_a_send_that_fails_wakes_every_delta_waiting_on_it_and_the_next_sends_alone(pubsub):
    cid = uuid.uuid4().hex
    rounds = [uuid.uuid4().hex for _ in range(4)]
    sends = HeldSends(pubsub)

    def lost(batch):
        raise redis.ConnectionError("Redis went away")

    pipelined, sends.batches._pipelined = sends.batches._pipelined, lost
    assert publish_at_once(pubsub, cid, [delta(r, 0, "x") for r in rounds], sends) == [
        True, False, False, False]  # the first sent alone; the batch behind it was lost
    sends.batches._pipelined = pipelined
    assert pubsub.publish(cid, "delta", delta(rounds[1], 0, "again"))
    assert sends.sizes == [1, 3, 1] and pubsub.close_round(rounds[1]) == "again"


class StoppedOnWaking(threading.Event):
    """A caller stopped (a time limit) just as it is woken to send the next batch."""

    def wait(self, timeout: float | None = None) -> bool:
        super().wait(timeout)
        raise TimeoutError("the step's time limit")


class StoppedDelta(delta_batches._Queued):
    """A queued delta whose caller waits on a `StoppedOnWaking`."""

    def __setattr__(self, name: str, value: object) -> None:
        if name == "sent" and value is not None:
            value = StoppedOnWaking()
        super().__setattr__(name, value)


def test_a_delta_stopped_when_handed_the_next_send_hands_it_on_unsent(pubsub, monkeypatch):
    cid = uuid.uuid4().hex
    first, stopped, third = (uuid.uuid4().hex for _ in range(3))
    sends = HeldSends(pubsub)
    outcome: dict[str, object] = {}

    def publish(name: str, round_id: str) -> None:
        try:
            outcome[name] = pubsub.publish(cid, "delta", delta(round_id, 0, name))
        except TimeoutError as exc:
            outcome[name] = exc

    threads = [threading.Thread(target=publish, args=("first", first))]
    threads[0].start()
    wait_for(lambda: sends.sizes == [1], timeout_s=10, what="the first send")
    queued = delta_batches._Queued
    monkeypatch.setattr(delta_batches, "_Queued", StoppedDelta)
    threads.append(threading.Thread(target=publish, args=("stopped", stopped)))
    threads[1].start()
    wait_for(lambda: sends.queued() == 1, timeout_s=10, what="the delta queued")
    monkeypatch.setattr(delta_batches, "_Queued", queued)
    threads.append(threading.Thread(target=publish, args=("third", third)))
    threads[2].start()
    wait_for(lambda: sends.queued() == 2, timeout_s=10, what="the deltas queued")
    sends.gate.set()
    for thread in threads:
        thread.join(10)
    assert outcome["first"] is True and outcome["third"] is True
    assert isinstance(outcome["stopped"], TimeoutError)
    assert sends.sizes == [1, 1]  # the stopped one's turn went to the third, alone
    assert [pubsub.close_round(r) for r in (first, stopped, third)] == ["first", "", "third"]
    assert pubsub.publish(cid, "delta", delta(uuid.uuid4().hex, 0, "later"))  # no send left hanging
