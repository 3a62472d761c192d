"""A model attempt's deltas, published a window at a time instead of one round trip each.

A real model streams an answer as hundreds of deltas, a few milliseconds apart. Publishing
each cost the worker and Redis a round trip (about half a millisecond of CPU a delta),
more than the rest of the step together, for pieces no one reads one by one. Here the
pieces that come within `window_s` of the last publish are joined and published as one
delta, numbered 0, 1, 2, ... within the attempt (0 starts the round's kept text afresh).

A piece is published within a window and a half of the last publish returning, however
the model pauses: the first piece after a quiet spell goes out at once, and a piece held
back is published by a timer of the process's `Timers` (one thread or greenlet per process,
not one per step) at the next point of the process's grid of windows, not by the next piece,
which may come seconds later, or never. Every attempt of a process publishes on the same
grid, so their publishes share one round trip (`agentq.live.delta_batches`). Nothing here
decides what an interrupt keeps: each publish is one atomic step in Redis
(`PubSub.publish`), so the kept text is exactly what was published, whichever side of a
window the interrupt falls on. Text held back when the attempt ends without an answer is
never published (`close`).
"""
from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from agentq.runtime.seams import RoundAnnouncer
from agentq.runtime.timers import Timer, Timers

# A burst this long is published at once, without waiting for its window to end.
MAX_CHARS = 8192


class CoalescedDeltas:
    """One attempt's deltas: `add` each piece, `flush` before the answer is committed, and
    `close` when the attempt ends, however it ends.

    Each publish is `announcer.delta(attempt, index, text)`, the round's announcer with this
    attempt. Publishes never overlap and come in index order, so the round's text in Redis
    grows in the order it is published.

    Careful: the window starts when a send has returned, not when it began. On a worker
    so busy that a send takes longer than the window, timing it from the start would
    publish every next piece at once, one round trip each, and make the worker busier
    still; from the end, a slower round trip holds more text instead.
    """

    def __init__(
        self,
        announcer: RoundAnnouncer,
        attempt: int,
        timers: Timers,
        *,
        window_s: float,
        max_chars: int = MAX_CHARS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._announcer = announcer
        self._attempt = attempt
        self._timers = timers
        self._window_s = window_s
        self._max_chars = max_chars
        self._clock = clock
        self._lock = threading.Lock()  # the held pieces, the timer, the count
        self._sending = threading.Lock()  # one send at a time, in order
        self._held: list[str] = []
        self._held_chars = 0
        self._index = 0
        self._last_sent = float("-inf")
        self._timer: Timer | None = None
        self._closed = False

    def add(self, text: str) -> None:
        """Publish `text` now if its window is over (or the held text is long), else hold it
        and make sure a timer publishes it when the window ends."""
        with self._lock:
            if self._closed:
                return
            self._held.append(text)
            self._held_chars += len(text)
            now = self._clock()
            if now < self._last_sent + self._window_s and self._held_chars < self._max_chars:
                if self._timer is None:
                    self._timer = self._timers.call_later(self._on_the_grid(now), self.flush)
                return
        self.flush()

    def _on_the_grid(self, now: float) -> float:
        """How long held text waits: until the first multiple of the window (on the process's
        monotonic clock) at least half a window after the last send returned. Every attempt
        of the process publishes on the same grid, so their publishes come together and
        share a round trip (`agentq.live.delta_batches`); a send that returned late in its
        window skips a grid point rather than send again at once."""
        due = max(self._last_sent + self._window_s / 2, now)
        return math.ceil(due / self._window_s) * self._window_s - now

    def flush(self) -> None:
        """Publish what is held now, as one delta (also the held text's timer).

        Held text always has its timer armed, and a flush cancels it: a timer that fires
        late, after a flush it lost the race to, finds nothing held or the next window's
        text, which it publishes a little early.
        """
        with self._sending:
            with self._lock:
                if self._closed or not self._held:
                    return
                text = "".join(self._held)
                self._held.clear()
                self._held_chars = 0
                index, self._index = self._index, self._index + 1
                timer, self._timer = self._timer, None
            if timer is not None:
                timer.cancel()
            try:
                self._announcer.delta(self._attempt, index, text)
            finally:
                with self._lock:
                    self._last_sent = self._clock()

    def close(self) -> None:
        """No more sends: what is held is dropped. Returns once a send under way is done,
        so nothing of this attempt is published after a retry notice or a commit."""
        with self._sending, self._lock:
            self._closed = True
            self._held.clear()
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
