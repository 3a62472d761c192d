"""A model's deltas are published a window at a time, and every guarantee of one-by-one
publishing still holds: the text an interrupt keeps is exactly the text published, no delta
of a closed round reaches a stream, and each delta carries its round and attempt."""
from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator

import pytest

from agentq.core.request import Message, Request
from agentq.core.settings import Settings
from agentq.live.announcer import LiveAnnouncer, LiveRound
from agentq.live.pubsub import Notice, PubSub
from agentq.providers.base import CallContext, Delta, ModelResponse
from agentq.providers.errors import ProviderError
from agentq.runtime.deltas import CoalescedDeltas
from agentq.runtime.model_call import Cancelled, ModelCall, RoundInfo
from agentq.runtime.timers import Timers

WINDOW_S = 0.04
REQUEST = Request(system="", messages=(Message(role="user", text="hi"),))


class ManualTimers:
    """Timers that fire only when the test says so."""

    def __init__(self) -> None:
        self.armed: list[ManualTimer] = []

    def call_later(self, delay_s: float, fn: Callable[[], object]) -> ManualTimer:
        timer = ManualTimer(delay_s, fn)
        self.armed.append(timer)
        return timer

    def fire_all(self) -> None:
        for timer in list(self.armed):
            timer.fn()  # even a cancelled one: a timer may fire while it is being cancelled


class ManualTimer:
    def __init__(self, delay_s: float, fn: Callable[[], object]) -> None:
        self.delay_s, self.fn, self.cancelled = delay_s, fn, False

    def cancel(self) -> None:
        self.cancelled = True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class SendingRound:
    """A round's announcer that hands each delta of the attempt to `send(index, text)`."""

    def __init__(self, send: Callable[[int, str], object]) -> None:
        self.send = send

    def delta(self, attempt: int, index: int, text: str) -> object:
        assert attempt == ATTEMPT
        return self.send(index, text)

    def retry(self, *args, **kwargs) -> object:
        raise AssertionError("deltas announce no retry")


ATTEMPT = 1


def coalesced(window_s: float = WINDOW_S, **kw):
    sent: list[tuple[int, str]] = []
    timers, clock = ManualTimers(), Clock()
    deltas = CoalescedDeltas(SendingRound(lambda index, text: sent.append((index, text))), ATTEMPT,
                             timers, window_s=window_s, clock=clock, **kw)
    return deltas, sent, timers, clock


# -- the window ------------------------------------------------------------------------------

def test_the_first_piece_after_a_quiet_spell_is_published_at_once():
    deltas, sent, timers, clock = coalesced()
    deltas.add("Hel")
    assert sent == [(0, "Hel")] and timers.armed == []
    clock.now += 1.0
    deltas.add("lo")
    assert sent == [(0, "Hel"), (1, "lo")]


def test_pieces_within_a_window_are_published_together_numbered_from_zero():
    deltas, sent, timers, clock = coalesced()
    deltas.add("a")
    for piece in ("b", "c", "d"):
        clock.now += 0.01
        deltas.add(piece)
    assert sent == [(0, "a")]
    clock.now += 0.011  # the window since "a" is over: "e" goes out with what was held
    deltas.add("e")
    assert sent == [(0, "a"), (1, "bcde")]


def test_a_held_piece_is_published_by_its_timer_when_the_model_pauses():
    deltas, sent, timers, clock = coalesced()
    deltas.add("Thinking")
    clock.now += 0.01
    deltas.add("...")  # the model now pauses for seconds: no next piece publishes this
    [timer] = timers.armed
    assert timer.delay_s == pytest.approx(WINDOW_S - 0.01) and sent == [(0, "Thinking")]
    timer.fn()
    assert sent == [(0, "Thinking"), (1, "...")]


def test_one_timer_is_armed_per_window_and_a_publish_cancels_it():
    deltas, sent, timers, clock = coalesced()
    deltas.add("a")
    clock.now += 0.01
    deltas.add("b")
    deltas.add("c")
    [timer] = timers.armed
    deltas.flush()
    assert timer.cancelled and sent == [(0, "a"), (1, "bc")]


def test_a_timer_that_fires_after_losing_the_race_to_a_publish_publishes_nothing_twice():
    deltas, sent, timers, clock = coalesced()
    deltas.add("a")
    clock.now += 0.01
    deltas.add("b")
    deltas.flush()
    timers.fire_all()
    assert sent == [(0, "a"), (1, "b")]


def test_the_window_starts_when_a_send_returns_so_a_slow_send_holds_more_text():
    """On a worker too busy to send within the window, pieces are not published one by one."""
    clock, timers, sent = Clock(), ManualTimers(), []

    def slow_send(index: int, text: str) -> None:
        clock.now += 3 * WINDOW_S  # the round trip took three windows
        sent.append((index, text))

    deltas = CoalescedDeltas(SendingRound(slow_send), ATTEMPT, timers, window_s=WINDOW_S, clock=clock)
    deltas.add("a")
    clock.now += 0.001
    deltas.add("b")
    deltas.add("c")
    assert sent == [(0, "a")] and len(timers.armed) == 1


def test_every_attempts_held_text_waits_for_the_same_point_of_the_grid():
    """Attempts whose sends returned at different moments publish at the same instant, so
    their publishes share a round trip; a send that returned late in its window skips a
    point rather than publish again at once."""
    clock, timers = Clock(), ManualTimers()
    a, b, c = (CoalescedDeltas(SendingRound(lambda index, text: None), ATTEMPT, timers,
                               window_s=WINDOW_S, clock=clock) for _ in range(3))
    for at, deltas in ((100.001, a), (100.013, b), (100.031, c)):
        clock.now = at
        deltas.add("first")  # published at once: each window starts at its own moment
    assert timers.armed == []
    clock.now = 100.035
    for deltas in (a, b, c):
        deltas.add("held")
    due = [clock.now + timer.delay_s for timer in timers.armed]
    assert due == [pytest.approx(100.04), pytest.approx(100.04), pytest.approx(100.08)]


def test_a_long_burst_is_published_without_waiting_for_its_window():
    deltas, sent, timers, clock = coalesced(max_chars=10)
    deltas.add("x")
    deltas.add("12345")
    assert sent == [(0, "x")]
    deltas.add("67890")
    assert sent == [(0, "x"), (1, "1234567890")]


def test_with_no_window_every_piece_is_published_at_once():
    deltas, sent, timers, clock = coalesced(window_s=0.0)
    for piece in "abc":
        deltas.add(piece)
    assert sent == [(0, "a"), (1, "b"), (2, "c")] and timers.armed == []


def test_closing_drops_the_held_text_and_a_late_timer_publishes_nothing():
    deltas, sent, timers, clock = coalesced()
    deltas.add("kept")
    deltas.add(" dropped")
    deltas.close()
    timers.fire_all()
    deltas.add("after")
    deltas.flush()
    assert sent == [(0, "kept")]


def test_close_returns_only_once_a_publish_under_way_is_done():
    sending, release = threading.Event(), threading.Event()
    order: list[str] = []

    def send(index: int, text: str) -> None:
        sending.set()
        release.wait(10)
        order.append(f"sent {text}")

    deltas = CoalescedDeltas(SendingRound(send), ATTEMPT, ManualTimers(), window_s=WINDOW_S)
    publisher = threading.Thread(target=deltas.add, args=("a",))
    publisher.start()
    assert sending.wait(10)
    closer = threading.Thread(target=lambda: (deltas.close(), order.append("closed")))
    closer.start()
    release.set()
    publisher.join(10)
    closer.join(10)
    assert order == ["sent a", "closed"]


# -- on real Redis ---------------------------------------------------------------------------


@pytest.fixture
def pubsub(redis_url: str) -> Iterator[PubSub]:
    yield PubSub(redis_url)


def until_marker(pubsub: PubSub, cid: str, action: Callable[[], None]) -> list[Notice]:
    """Every notice of the conversation until the marker `action` ends with, in order."""
    feed = pubsub.subscribe(cid, timeout_s=10, capacity=100_000)
    try:
        action()
        pubsub.publish(cid, "events", {"last_seq": -1})  # the marker
        notices: list[Notice] = []
        for notice in feed:
            assert notice is not None, "the marker never came"
            if notice.kind == "events" and notice.data["last_seq"] == -1:
                return notices
            notices.append(notice)
    finally:
        feed.close()
    raise AssertionError("unreachable")


def send_to(pubsub: PubSub, cid: str, round_id: str, attempt: int = 1):
    def send(index: int, text: str) -> None:
        pubsub.publish(cid, "delta", {"round_id": round_id, "turn_id": "t1", "index": index,
                                      "attempt": attempt, "text": text})
    return send


@pytest.mark.redis
@pytest.mark.parametrize("close_after", range(0, 9))
def test_an_interrupt_keeps_exactly_the_published_text_wherever_it_falls_between_windows(
        pubsub, close_after):
    """Pieces a..i, published in windows of three; the round is closed after `close_after`
    pieces, with text still held or not; the model streams on until it notices."""
    cid, round_id = uuid.uuid4().hex, uuid.uuid4().hex
    timers, clock = ManualTimers(), Clock()
    deltas = CoalescedDeltas(LiveRound(pubsub, cid, "t1", round_id), 1, timers, window_s=WINDOW_S,
                             clock=clock)
    kept: list[str] = []

    def stream() -> None:
        for n, piece in enumerate("abcdefghi"):
            if n == close_after:
                kept.append(pubsub.close_round(round_id))  # the API's interrupt
            deltas.add(piece)
            clock.now += WINDOW_S / 3 + 0.001
        timers.fire_all()
        deltas.flush()
        deltas.close()

    notices = until_marker(pubsub, cid, stream)
    streamed = "".join(n.data["text"] for n in notices)
    assert kept == [streamed]
    assert [n.data["index"] for n in notices] == list(range(len(notices)))
    assert {(n.data["round_id"], n.data["attempt"]) for n in notices} <= {(round_id, 1)}


@pytest.mark.redis
def test_a_delta_after_the_round_closed_is_neither_kept_nor_published_one_round_trip(pubsub):
    cid, round_id = uuid.uuid4().hex, uuid.uuid4().hex
    send = send_to(pubsub, cid, round_id)
    kept: list[str] = []

    def stream() -> None:
        send(0, "Hello")
        send(1, ", wor")
        kept.append(pubsub.close_round(round_id))
        send(2, "ld")

    notices = until_marker(pubsub, cid, stream)
    assert kept == ["Hello, wor"] == ["".join(n.data["text"] for n in notices)]
    assert pubsub.close_round(round_id) == "Hello, wor"  # the refused delta was not appended


@pytest.mark.redis
def test_a_new_attempts_first_delta_starts_the_kept_text_afresh_on_redis(pubsub):
    cid, round_id = uuid.uuid4().hex, uuid.uuid4().hex
    send_to(pubsub, cid, round_id)(0, "first try, cut")
    second = send_to(pubsub, cid, round_id, attempt=2)
    second(0, "second ")
    second(1, "try")
    assert pubsub.close_round(round_id) == "second try"


class Streaming:
    """A model that streams `pieces` as fast as it can; attempt 1 fails after `fail_after`."""

    def __init__(self, pieces: list[str], *, fail_after: int | None = None,
                 on_piece: Callable[[int], None] = lambda n: None) -> None:
        self.pieces, self.fail_after, self.on_piece = pieces, fail_after, on_piece

    def stream(self, request: Request, ctx: CallContext,
               cancel: threading.Event) -> Iterator[Delta | ModelResponse]:
        for n, piece in enumerate(self.pieces):
            if cancel.is_set():
                return
            if ctx.attempt == 1 and n == self.fail_after:
                raise ProviderError("connection reset mid-stream", transient=True)
            self.on_piece(n)
            yield Delta(index=n, text=piece)
        if cancel.is_set():
            return
        yield ModelResponse(text="".join(self.pieces), tool_calls=(), usage={},
                            finish_reason="stop")


def call(pubsub: PubSub, cid: str, model: Streaming, window_s: float = 0.005) -> ModelCall:
    return ModelCall(model, LiveAnnouncer(pubsub), lambda step_key: None,
                     timers=Timers(), max_attempts=3, sleep=lambda s: None,
                     delta_window_s=window_s)


def context(cid: str, round_id: str) -> tuple[CallContext, RoundInfo]:
    ctx = CallContext(conversation_id=cid, step_key="s1", round_id=round_id, attempt=1,
                      rounds_committed=0, settings=Settings())
    return ctx, RoundInfo(cid, "t1", round_id, "s1")


@pytest.mark.redis
def test_a_model_call_interrupted_while_streaming_keeps_what_its_stream_showed(pubsub):
    """Thousands of tiny pieces under real timers; an interrupt from another thread lands
    wherever it lands, and the worker notices it only later, as its heartbeat would."""
    cid, round_id = uuid.uuid4().hex, uuid.uuid4().hex
    cancel, seen_some, interrupted = threading.Event(), threading.Event(), threading.Event()
    kept: list[str] = []
    last = 4999

    def interrupt() -> None:
        seen_some.wait(10)
        kept.append(pubsub.close_round(round_id))
        interrupted.set()

    def on_piece(n: int) -> None:
        if n == 200:
            seen_some.set()  # the interrupt now races with the pieces that follow
        if n == last:
            interrupted.wait(10)
        if interrupted.is_set() and (n % 500 == 0 or n == last):
            cancel.set()  # the heartbeat found the step cancelled

    model = Streaming([f"w{n} " for n in range(last + 1)], on_piece=on_piece)
    ctx, info = context(cid, round_id)
    interrupter = threading.Thread(target=interrupt)

    def run() -> None:
        interrupter.start()
        with pytest.raises(Cancelled):
            call(pubsub, cid, model).run(REQUEST, ctx, info, cancel, timeout_s=60)
        interrupter.join(10)

    notices = until_marker(pubsub, cid, run)
    streamed = "".join(n.data["text"] for n in notices)
    assert kept == [streamed] and streamed  # and the marker came after every delta
    assert [n.data["index"] for n in notices] == list(range(len(notices)))


@pytest.mark.redis
def test_a_retried_attempt_publishes_nothing_after_its_retry_notice_and_starts_afresh(pubsub):
    cid, round_id = uuid.uuid4().hex, uuid.uuid4().hex
    pieces = [f"p{n} " for n in range(300)]
    ctx, info = context(cid, round_id)
    answers: list[ModelResponse] = []
    notices = until_marker(pubsub, cid, lambda: answers.append(
        call(pubsub, cid, Streaming(pieces, fail_after=150)).run(
            REQUEST, ctx, info, threading.Event(), timeout_s=60)))

    kinds = [(n.kind, n.data["attempt"]) for n in notices]
    retry = kinds.index(("retry", 1))
    assert {k for k in kinds[:retry]} == {("delta", 1)}
    assert {k for k in kinds[retry + 1:]} == {("delta", 2)}
    second = [n.data for n in notices[retry + 1:]]
    assert [d["index"] for d in second] == list(range(len(second)))
    assert "".join(d["text"] for d in second) == answers[0].text == "".join(pieces)
    assert {n.data["round_id"] for n in notices} == {round_id}
    assert pubsub.close_round(round_id) == answers[0].text  # what an interrupt now would keep
