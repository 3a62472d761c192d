"""The EventCache: a worker reads only the events it has not seen, and never more than the
row it just read allows (pure: a list stands for the log)."""
from __future__ import annotations

from datetime import datetime, timezone

from agentq.core.events import Event
from agentq.core.weight import total_weight
from agentq.store.event_cache import EventCache

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def log(cid: str, count: int) -> list[Event]:
    return [Event(id=f"{cid}-{seq}", conversation_id=cid, seq=seq, type="user_msg", turn_id=None,
                  round_id=None, step_key=None, content={"text": str(seq)}, created_at=T0)
            for seq in range(1, count + 1)]


class Log:
    """The database side: what a read asks for is recorded."""

    def __init__(self, events: list[Event]) -> None:
        self.events = events
        self.reads: list[tuple[int, int]] = []

    def load(self, after: int, before: int) -> list[Event]:
        self.reads.append((after, before))
        return [e for e in self.events if after < e.seq < before]


def seqs(events: list[Event]) -> list[int]:
    return [e.seq for e in events]


def test_a_cached_conversation_reads_only_the_events_past_what_it_holds():
    db, cache = Log(log("c1", 10)), EventCache(8)
    assert seqs(cache.events("c1", after_seq=0, before_seq=6, load=db.load)) == [1, 2, 3, 4, 5]
    assert seqs(cache.events("c1", after_seq=0, before_seq=11, load=db.load)) == list(range(1, 11))
    assert seqs(cache.events("c1", after_seq=7, before_seq=11, load=db.load)) == [8, 9, 10]
    assert db.reads == [(0, 6), (5, 11)]  # the third read asked the database nothing


def test_events_appended_since_the_cache_last_read_are_read_once_even_before_the_read_range():
    db, cache = Log(log("c1", 12)), EventCache(8)
    cache.events("c1", after_seq=0, before_seq=6, load=db.load)
    # a new turn starts at seq 9: the events 6..8 came in while another process stepped
    assert seqs(cache.events("c1", after_seq=8, before_seq=13, load=db.load)) == [9, 10, 11, 12]
    assert seqs(cache.events("c1", after_seq=0, before_seq=9, load=db.load)) == list(range(1, 9))
    assert db.reads == [(0, 6), (5, 13)]


def test_a_cache_ahead_of_the_row_read_never_shows_events_past_the_rows_next_seq():
    db, cache = Log(log("c1", 10)), EventCache(8)
    cache.events("c1", after_seq=0, before_seq=11, load=db.load)
    # a reader that saw an older row (next_seq 4) gets what that row allows, no more
    assert seqs(cache.events("c1", after_seq=0, before_seq=4, load=db.load)) == [1, 2, 3]
    assert seqs(cache.events("c1", after_seq=5, before_seq=5, load=db.load)) == []


def test_a_foreign_or_broken_run_in_the_cache_is_read_again_from_the_log():
    db, cache = Log(log("c1", 6)), EventCache(8)
    cache._put("c1", log("other", 6), 1)  # another conversation's events under this id
    assert {e.conversation_id for e in
            cache.events("c1", after_seq=0, before_seq=7, load=db.load)} == {"c1"}
    cache._put("c1", [log("c1", 6)[0], log("c1", 6)[3]], 1)  # a gap: seq 1 then 4
    assert seqs(cache.events("c1", after_seq=0, before_seq=7, load=db.load)) == [1, 2, 3, 4, 5, 6]


def test_earlier_events_join_a_cached_turn_and_a_summary_only_moves_where_reads_start():
    db, cache = Log(log("c1", 12)), EventCache(8)
    assert seqs(cache.events("c1", after_seq=8, before_seq=13, load=db.load)) == [9, 10, 11, 12]
    assert seqs(cache.events("c1", after_seq=4, before_seq=9, load=db.load)) == [5, 6, 7, 8]
    db.reads.clear()
    assert seqs(cache.events("c1", after_seq=4, before_seq=13, load=db.load)) == list(range(5, 13))
    assert db.reads == []


def test_the_least_recently_read_conversation_leaves_first_and_size_zero_keeps_nothing():
    db = Log(log("a", 3) + log("b", 3) + log("c", 3))
    cache = EventCache(2)
    for cid in ("a", "b", "c"):
        cache.events(cid, after_seq=0, before_seq=4,
                     load=lambda after, before, cid=cid: [e for e in db.load(after, before)
                                                          if e.conversation_id == cid])
    assert cache._get("a") is None and cache._get("c") is not None
    off = EventCache(0)
    off.events("a", after_seq=0, before_seq=4, load=db.load)
    assert off._get("a") is None


def per_conversation(db: Log):
    return lambda cid: (lambda after, before: [e for e in db.load(after, before) if e.conversation_id == cid])


def test_a_cache_full_by_weight_lets_the_least_recently_read_go_however_few_it_holds():
    db = Log(log("a", 50) + log("b", 50) + log("c", 50))
    one = total_weight(log("a", 50))
    cache, load = EventCache(1000, max_bytes=2 * one + one // 2), per_conversation(db)
    for cid in ("a", "b", "c"):
        cache.events(cid, after_seq=0, before_seq=51, load=load(cid))
    assert len(cache) == 2 and cache._get("a") is None and cache._get("c") is not None
    assert cache.bytes == 2 * one <= cache.max_bytes


def test_a_conversation_heavier_than_the_whole_cache_is_not_kept_and_is_read_from_the_log():
    db, cache = Log(log("c1", 40)), EventCache(8, max_bytes=total_weight(log("c1", 10)))
    assert seqs(cache.events("c1", after_seq=0, before_seq=41, load=db.load)) == list(range(1, 41))
    assert cache._get("c1") is None and cache.bytes == 0
    cache.events("c1", after_seq=0, before_seq=41, load=db.load)
    assert db.reads == [(0, 41), (0, 41)]


def test_the_weight_held_is_that_of_the_events_held_as_runs_grow_and_leave():
    db = Log(log("a", 30) + log("b", 30))
    cache, load = EventCache(1, max_bytes=2**20), per_conversation(db)
    cache.events("a", after_seq=10, before_seq=21, load=load("a"))
    cache.events("a", after_seq=0, before_seq=31, load=load("a"))  # grows at both ends
    assert cache.bytes == total_weight(log("a", 30))
    cache.events("b", after_seq=0, before_seq=6, load=load("b"))  # "a" leaves: one is kept
    assert cache.bytes == total_weight(log("b", 5))
    cache.forget("b")
    assert cache.bytes == 0 and len(cache) == 0
