"""The deltas a worker process publishes at once, sent to Redis in one round trip.

Each delta is one call of the delta script (`agentq.live.pubsub`), and each call was its own
round trip: on a green worker streaming fifty answers, each publish cost it about 0.1 ms of
CPU and Redis about 0.03 (bench/deltas.py), nearly all of it the work around a round trip
(the pool, the socket, a switch to the hub and back). A model's deltas are held and
published a window at a time, each attempt's window ending on the same grid
(`agentq.runtime.deltas`), so many attempts publish at the same moment; here those
publishes share a pipeline.

Group commit, as a database does it: a caller that finds no send under way sends what is
queued, its own delta with it; one that finds a send under way queues its delta and waits.
When a send returns, the first delta queued meanwhile is handed the next send, so no caller
sends more than one pipeline of other callers' deltas, and none waits for more than the send
under way and its own. Each caller gets its own delta's answer, as if it had sent alone; the
deltas of one attempt are never queued together (an attempt sends one at a time), so their
order is the order they were sent.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import redis
from redis.commands.core import Script
from redis.exceptions import NoScriptError


@dataclass(eq=False)  # queued deltas are told apart by identity
class _Queued:
    """One caller's delta: the script's keys and arguments, and, once sent, its answer."""

    keys: list[str]
    args: list[Any]
    sent: threading.Event | None = None  # a caller that waits: set once answered or leading
    answer: object = None  # the script's return, or the Redis error that stopped the send
    leads: bool = False  # handed the next send instead of an answer


class DeltaBatches:
    """The process's delta-script calls, sent together when they come together."""

    def __init__(self, client: redis.Redis, script: Script) -> None:
        self._client = client
        self._script = script
        self._lock = threading.Lock()  # the queue and whether a send is under way
        self._queue: list[_Queued] = []
        self._sending = False

    def call(self, keys: list[str], args: list[Any]) -> object:
        """The delta script's answer for these keys and arguments; raises a Redis error."""
        mine = _Queued(keys, args)
        with self._lock:
            self._queue.append(mine)
            if self._sending:  # only a caller that waits needs something to wait on
                mine.sent = threading.Event()
            self._sending = True
        if mine.sent is not None:
            try:
                mine.sent.wait()
            except BaseException:  # stopped while it waited (a time limit): none waits on it
                self._withdraw(mine)
                raise
            if not mine.leads:
                return _answer(mine)
        try:
            with self._lock:
                batch, self._queue = self._queue, []
            self._send(batch)
        finally:
            with self._lock:
                self._hand_on()
        return _answer(mine)

    def _hand_on(self) -> None:
        """The next send to the first delta queued (under the lock), or none under way."""
        if self._queue:  # every delta queued behind a send waits on its event
            following = self._queue[0]
            following.leads = True
            assert following.sent is not None
            following.sent.set()
        else:
            self._sending = False

    def _withdraw(self, mine: _Queued) -> None:
        """A caller stopped before its delta was sent: the delta leaves the queue unsent, and
        a send handed to it goes on to the next."""
        with self._lock:
            if mine in self._queue:
                self._queue.remove(mine)
                if mine.leads:
                    self._hand_on()

    def _send(self, batch: list[_Queued]) -> None:
        """Every delta of `batch` sent, each answered (the sender's too) and woken, whatever
        stops the send."""
        answers: list[object] | None = None
        try:
            answers = self._run(batch)
        except redis.RedisError as exc:
            answers = [exc] * len(batch)
        finally:
            if answers is None:  # stopped by something else: each caller is told, and wakes
                answers = [redis.RedisError("the delta's send was stopped")] * len(batch)
            self._answer(batch, answers)

    @staticmethod
    def _answer(batch: list[_Queued], answers: list[object]) -> None:
        for queued, answer in zip(batch, answers, strict=True):
            queued.answer = answer
            if queued.sent is not None:
                queued.sent.set()

    def _run(self, batch: list[_Queued]) -> list[object]:
        """The script's answers for `batch`, loading it first if the server lost it."""
        if len(batch) == 1:  # alone: a call, not a pipeline (and the script's own reload)
            [queued] = batch
            return [self._script(keys=queued.keys, args=queued.args)]
        answers = self._pipelined(batch)
        lost = [i for i, answer in enumerate(answers) if isinstance(answer, NoScriptError)]
        if lost:  # the server was restarted or flushed its scripts: those did not run
            self._client.script_load(self._script.script)
            for i, answer in zip(lost, self._pipelined([batch[i] for i in lost]), strict=True):
                answers[i] = answer
        return answers

    def _pipelined(self, batch: list[_Queued]) -> list[object]:
        pipe = self._client.pipeline(transaction=False)
        for queued in batch:
            pipe.evalsha(self._script.sha, len(queued.keys), *queued.keys, *queued.args)
        return pipe.execute(raise_on_error=False)


def _answer(queued: _Queued) -> object:
    if isinstance(queued.answer, BaseException):
        raise queued.answer
    return queued.answer
