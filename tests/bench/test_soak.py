"""bench/soak.py's verdict: a series grows when it keeps rising after the warm-up, not when
it filled during the warm-up, wobbles or spikes once."""
from __future__ import annotations

from bench.soak import growth, judge, slope

MINUTES = [float(m) for m in range(61)]


def verdict(values, slack=0.0):
    return growth("x.rss_mb", MINUTES, values, warmup_min=15, tolerance=0.10, slack=slack)


def test_a_slope_is_the_least_squares_rate():
    assert slope([0, 1, 2, 3], [1, 3, 5, 7]) == 2.0 and slope([1], [5]) == 0.0


def test_memory_that_keeps_rising_a_megabyte_a_minute_grows():
    found = verdict([120 + m for m in MINUTES])
    assert found is not None and found.series == "x.rss_mb" and 0.9 < found.slope_per_min < 1.1
    assert "x.rss_mb grows" in str(found)


def test_memory_that_fills_its_caches_during_warm_up_then_stays_flat_does_not():
    assert verdict([120 + 3 * min(m, 14) + (m % 3) * 0.5 for m in MINUTES]) is None


def test_one_spike_at_the_end_or_a_rise_that_stopped_halfway_does_not():
    assert verdict([150.0] * 60 + [400.0]) is None
    assert verdict([150 + min(max(m - 15, 0), 20) for m in MINUTES]) is None  # rose, then flat


def test_a_queue_at_zero_may_hold_a_few_but_not_a_growing_backlog():
    assert verdict([0.0] * 58 + [3.0, 2.0, 4.0], slack=50) is None
    assert verdict([max(0.0, 10 * (m - 15)) for m in MINUTES], slack=50) is not None


def test_the_judge_skips_series_that_grow_by_design_and_the_shared_redis_unless_asked():
    samples = [{"minute": m, "time": "", "pg.database_mb": m, "redis.used_mb": 10 + m,
                "model.rss_mb": 100.0} for m in MINUTES]
    assert judge(samples, warmup_min=15, tolerance=0.1, judge_shared=False) == []
    grown = judge(samples, warmup_min=15, tolerance=0.1, judge_shared=True)
    assert [g.series for g in grown] == ["redis.used_mb"]


def test_postgres_memory_is_judged_per_backend_not_summed_over_the_pools_connections():
    """A pool opening two more connections within its bound adds their memory to the sum; a
    backend whose own memory keeps rising is what leaks."""
    more_connections = [{"minute": m, "pg.connections": 16 if m < 45 else 18,
                         "pg.anon_mb": 5.2 * (16 if m < 45 else 18), "pg.backend_anon_mb": 5.2}
                        for m in MINUTES]
    assert judge(more_connections, warmup_min=20, tolerance=0.10, judge_shared=False) == []
    leaking = [{**row, "pg.backend_anon_mb": 5.2 + 0.1 * row["minute"]} for row in more_connections]
    assert [g.series for g in judge(leaking, warmup_min=20, tolerance=0.10, judge_shared=False)] == [
        "pg.backend_anon_mb"]
