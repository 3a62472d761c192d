"""The pure rules of schedules: the slots of an interval and of a cron expression in a zone,
which slots a tick fires by each catch-up rule, and the ids a slot's run writes under."""
from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from itertools import islice

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentq.core.fsm import fold
from agentq.core.schedules import (
    CatchUp,
    GiveUp,
    Interval,
    Retry,
    after_failure,
    due,
    shortest_gap_s,
    slot_conversation_id,
    slot_message_key,
    unattended_deadline,
    unattended_note,
    upcoming,
)
from agentq.process.cron import BadCalendar, cron
from tests.core.builders import assistant, log, user

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


EVERY_2 = Interval(2.0, T0)


def test_an_interval_fires_every_period_from_its_anchor():
    assert upcoming(EVERY_2, at(0), 3) == [at(2), at(4), at(6)]
    assert upcoming(EVERY_2, at(3.5), 2) == [at(4), at(6)]


@given(st.floats(min_value=0.001, max_value=86_400), st.integers(min_value=0, max_value=10**9))
def test_the_next_slot_of_an_interval_is_always_after_the_instant_and_on_its_grid(every_s, micros):
    calendar = Interval(every_s, T0)
    after = T0 + timedelta(microseconds=micros)
    (slot,) = upcoming(calendar, after, 1)
    assert slot > after
    assert slot - timedelta(seconds=every_s) <= after or slot == T0


def test_a_cron_schedule_follows_its_zones_clocks_across_daylight_saving():
    nightly = cron("30 2 * * *", "America/New_York")
    slots = upcoming(nightly, datetime(2026, 3, 7, tzinfo=UTC), 3)
    # 02:30 does not exist on 8 March (clocks jump to 03:00): cron fires at 03:00 instead
    assert [s.isoformat() for s in slots] == [
        "2026-03-07T07:30:00+00:00", "2026-03-08T07:00:00+00:00", "2026-03-09T06:30:00+00:00"]


def test_a_repeated_local_hour_fires_once():
    nightly = cron("30 1 * * *", "America/New_York")
    slots = upcoming(nightly, datetime(2026, 10, 31, 12, tzinfo=UTC), 3)
    assert len({s.date() for s in slots}) == 3  # 1 November's 01:30 happens twice, fires once


@pytest.mark.parametrize("expression, timezone, code", [
    ("61 * * * *", "UTC", "invalid_cron"), ("* * * *", "UTC", "invalid_cron"),
    ("@reboot", "UTC", "invalid_cron"), ("0 9 * * *", "Mars/Olympus", "invalid_timezone"),
    ("0 9 * * *", "../../etc/passwd", "invalid_timezone"), ("0 9 * * *", "", "invalid_timezone"),
])
def test_a_bad_cron_expression_or_zone_is_refused_saying_which(expression, timezone, code):
    with pytest.raises(BadCalendar) as refused:
        cron(expression, timezone)
    assert refused.value.code == code


def test_the_shortest_gap_of_a_cron_is_found_among_its_slots():
    assert shortest_gap_s(cron("*/5 * * * *", "UTC"), T0) == 300
    assert shortest_gap_s(cron("0,1 9 * * *", "UTC"), T0) == 60
    assert shortest_gap_s(EVERY_2, T0) == 2


def test_a_slot_not_yet_come_fires_nothing():
    assert due(EVERY_2, at(2), at(1.9), CatchUp(), grace_s=5) is None


def test_an_on_time_slot_fires_and_the_next_one_is_awaited():
    found = due(EVERY_2, at(2), at(2.3), CatchUp("skip"), grace_s=5)
    assert found is not None and found.fire == (at(2),) and found.next_at == at(4)


def test_skip_fires_only_the_on_time_slots_after_an_outage():
    found = due(EVERY_2, at(2), at(30), CatchUp("skip"), grace_s=3)
    assert found is not None and found.fire == (at(28), at(30)) and found.next_at == at(32)


def test_skip_fires_nothing_when_every_missed_slot_is_past_the_grace():
    found = due(EVERY_2, at(2), at(31), CatchUp("skip"), grace_s=0.5)
    assert found is not None and found.fire == () and found.next_at == at(32)


def test_latest_fires_only_the_newest_missed_slot():
    found = due(EVERY_2, at(2), at(31), CatchUp("latest"), grace_s=0.5)
    assert found is not None and found.fire == (at(30),)


def test_latest_fires_no_missed_slot_when_an_on_time_one_stands_for_them():
    found = due(EVERY_2, at(2), at(30.2), CatchUp("latest"), grace_s=0.5)
    assert found is not None and found.fire == (at(30),)


def test_all_fires_the_newest_missed_slots_up_to_its_bound():
    found = due(EVERY_2, at(2), at(31), CatchUp("all", max_slots=3), grace_s=0.5)
    assert found is not None and found.fire == (at(26), at(28), at(30))


def test_all_fires_no_missed_slot_older_than_its_age_bound():
    found = due(EVERY_2, at(2), at(31), CatchUp("all", max_slots=100, max_age_s=4.5), grace_s=0.5)
    assert found is not None and found.fire == (at(28), at(30))


def test_a_long_outage_costs_only_the_slots_the_rule_fires():
    walked = []

    class Counting(Interval):
        def slots_before(self, before):
            for slot in super().slots_before(before):
                walked.append(slot)
                yield slot

    calendar = Counting(1.0, T0)
    now = at(10**7)  # four months of a slot a second
    found = due(calendar, at(1), now, CatchUp("all", max_slots=3), grace_s=0.5)
    assert found is not None and found.fire == (now - timedelta(seconds=3), now - timedelta(seconds=2),
                                                now - timedelta(seconds=1), now)
    assert len(walked) <= 5 and found.next_at == now + timedelta(seconds=1)


def test_the_slots_before_an_instant_run_back_to_the_anchor_and_no_further():
    assert list(EVERY_2.slots_before(at(6))) == [at(4), at(2), at(0)]
    assert list(EVERY_2.slots_before(at(5))) == [at(4), at(2), at(0)]
    assert list(islice(cron("0 * * * *", "UTC").slots_before(datetime(2026, 1, 1, 3, tzinfo=UTC)), 2)) == [
        datetime(2026, 1, 1, 2, tzinfo=UTC), datetime(2026, 1, 1, 1, tzinfo=UTC)]


@given(st.integers(min_value=0, max_value=200), st.sampled_from(["skip", "latest", "all"]))
def test_a_tick_never_fires_a_slot_twice_nor_one_outside_its_window(steps, mode):
    next_at, now = at(2), at(2 + steps * 0.7)
    found = due(EVERY_2, next_at, now, CatchUp(mode, max_slots=5), grace_s=1.5)
    if found is None:
        assert next_at > now
        return
    assert len(set(found.fire)) == len(found.fire) and list(found.fire) == sorted(found.fire)
    assert all(next_at <= s <= now for s in found.fire) and found.next_at > now


def test_a_slots_ids_derive_from_the_schedule_and_the_slot_alone():
    assert slot_conversation_id("s1", at(2)) == slot_conversation_id("s1", at(2))
    assert slot_conversation_id("s1", at(2)) != slot_conversation_id("s1", at(4))
    assert slot_conversation_id("s1", at(2)) != slot_conversation_id("s2", at(2))
    assert slot_message_key("s1", at(2)) == slot_message_key("s1", at(2).astimezone())
    assert slot_message_key("s1", at(2)) != slot_message_key("s1", at(2) + timedelta(microseconds=1))


def test_a_rare_dates_shortest_gap_is_found_without_walking_centuries():
    assert shortest_gap_s(cron("0,1 0 29 2 *", "UTC"), T0) == 60
    assert shortest_gap_s(cron("0 0 1 1 *", "UTC"), T0) >= 365 * 86_400


EXPIRE_60 = {"expire_after_s": 60, "schedule_id": "s1"}


def test_an_unattended_rule_caps_every_wait_for_a_person_and_a_sooner_own_deadline_holds():
    assert unattended_deadline(EXPIRE_60, T0, None) == at(60)  # an approval, a budget ask
    assert unattended_deadline(EXPIRE_60, T0, at(3600)) == at(60)  # a server's question
    assert unattended_deadline(EXPIRE_60, T0, at(30)) == at(30)


def test_without_a_rule_or_under_wait_a_wait_keeps_its_own_deadline():
    assert unattended_deadline(None, T0, None) is None
    assert unattended_deadline(None, T0, at(3600)) == at(3600)
    assert unattended_deadline({"schedule_id": "s1"}, T0, at(5)) == at(5)
    assert unattended_note(None) == ""


def test_the_model_reads_that_nobody_attends_and_after_how_long():
    note = unattended_note(EXPIRE_60)
    assert "Nobody attends this run" in note and "after 60 s" in note


def test_a_turn_keeps_the_rule_of_the_message_that_started_it_and_the_next_turn_drops_it():
    plain = user("nightly report")
    scheduled = replace(plain, content={**plain.content, "unattended": EXPIRE_60})
    events = log(scheduled, assistant("on it"))
    assert fold(events).unattended == EXPIRE_60
    assert fold(events).to_json()["unattended"] == EXPIRE_60
    later = log(scheduled, assistant("on it"), user("a person asks"))
    assert fold(later).unattended is None and "unattended" not in fold(later).to_json()


def test_a_failed_run_is_tried_again_each_time_twice_as_late_then_given_up():
    tries = [after_failure(n, "OperationalError: gone", T0, max_attempts=4, retry_after_s=30)
             for n in (1, 2, 3, 4)]
    assert tries[:3] == [Retry(at(30)), Retry(at(60)), Retry(at(120))]
    assert tries[3] == GiveUp("given up after 4 attempts; the last failed with: "
                              "OperationalError: gone")
    assert after_failure(1, "x", T0, max_attempts=1, retry_after_s=30) == GiveUp(
        "given up after 1 attempts; the last failed with: x")
