"""/v1/schedules through the API: create, list, pause, resume, delete; hostile input refused
with nothing written; another tenant's schedules invisible; the operator's limits; and the
runs a tick fires, once per slot, each linked to its conversation."""
from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from sqlalchemy.exc import OperationalError

from agentq.commands.firing import Firing
from agentq.core.schedules import slot_conversation_id
from agentq.core.scope import Scope
from agentq.tenancy.policy import Policy, ScheduleLimits
from tests.support.api import APPROVAL, WEATHER, Api

LIMITS = ScheduleLimits(max_per_tenant=3, min_interval_s=2.0, max_catch_up_slots=10,
                        max_catch_up_age_s=3600.0, run_attempts=3, retry_after_s=10.0)


@pytest.fixture
def api(store) -> Api:
    return Api(store, policy=dataclasses.replace(Policy.default(), schedules=LIMITS))


def agent(api, headers, name="nightly", script=WEATHER):
    body = {"name": name, "settings": {"profile": "scripted", "script": script}}
    assert api.client.post("/v1/agents", json=body, headers=headers).status_code == 201
    return name


def create(api, headers, **body):
    return api.client.post("/v1/schedules", headers=headers,
                           json={"name": "n", "message": "hello", **body})


def firing(api) -> Firing:
    return Firing(api.services.commands, grace_s=5.0, clock=api.clock)


def two_hourly_posts(api, headers) -> tuple[str, str, str, str]:
    """Two conversations, each with a schedule posting into it every hour: (conversation,
    schedule) of the first, then of the second."""
    first, second = api.create(headers, script=WEATHER), api.create(headers, script=WEATHER)
    return (first, create(api, headers, conversation_id=first, every_s=3600).json["id"],
            second, create(api, headers, conversation_id=second, every_s=3600).json["id"])


def runs(api, headers, schedule_id) -> list[dict]:
    return api.get(f"/v1/schedules/{schedule_id}/runs", headers).json["runs"]


def posted(api, conversation_id) -> list[str]:
    """The texts of the messages in the conversation's log."""
    return [e.content["text"] for e in api.store.log.list_events(conversation_id)
            if e.type == "user_msg"]


def test_a_schedule_is_created_listed_paused_resumed_and_deleted(api, alice):
    made = create(api, alice, agent=agent(api, alice), every_s=60)
    assert made.status_code == 201, made.json
    sid = made.json["id"]
    assert made.json["action"] == "start" and len(made.json["next_runs"]) == 10
    assert [s["id"] for s in api.get("/v1/schedules", alice).json["schedules"]] == [sid]
    paused = api.client.post(f"/v1/schedules/{sid}/pause", headers=alice).json
    assert paused["paused"] is True and paused["next_runs"] == []
    resumed = api.client.post(f"/v1/schedules/{sid}/resume", headers=alice).json
    assert resumed["paused"] is False and resumed["next_runs"]
    assert api.client.delete(f"/v1/schedules/{sid}", headers=alice).status_code == 204
    assert api.get(f"/v1/schedules/{sid}", alice).status_code == 404


def test_a_cron_schedule_lists_its_next_runs_on_the_clocks_of_its_zone(api, alice):
    made = create(api, alice, agent=agent(api, alice), cron="30 9 * * 1-5",
                  timezone="Europe/Paris")
    assert made.status_code == 201, made.json
    runs = made.json["next_runs"]
    assert len(runs) == 10 and all(r[11:16] in ("08:30", "07:30") for r in runs)


def test_another_tenants_schedule_is_404_to_every_verb(api, alice, mallory):
    sid = create(api, alice, agent=agent(api, alice), every_s=60).json["id"]
    assert api.get(f"/v1/schedules/{sid}", mallory).status_code == 404
    assert api.get(f"/v1/schedules/{sid}/runs", mallory).status_code == 404
    for verb in ("pause", "resume"):
        assert api.client.post(f"/v1/schedules/{sid}/{verb}", headers=mallory).status_code == 404
    assert api.client.delete(f"/v1/schedules/{sid}", headers=mallory).status_code == 404
    assert api.get("/v1/schedules", mallory).json["schedules"] == []
    assert api.store.schedules.load(sid).paused is False


@pytest.mark.parametrize("body, code", [
    ({"cron": "61 * * * *"}, "invalid_cron"),
    ({"cron": "0 9 32 * *"}, "invalid_cron"),
    ({"cron": "* * * *"}, "validation_error"),
    ({"cron": "0 9 * * *", "timezone": "Mars/Olympus"}, "invalid_timezone"),
    ({"cron": "0 9 * * *", "timezone": "../../etc/passwd"}, "validation_error"),
    ({"cron": "0 9 * * *", "every_s": 60}, "invalid_schedule"),
    ({}, "invalid_schedule"),
    ({"every_s": 1}, "interval_too_short"),
    ({"every_s": 60, "catch_up": {"mode": "all", "max_slots": 11}}, "above_ceiling"),
    ({"every_s": 60, "catch_up": {"mode": "all", "max_slots": 5, "max_age_s": 7200}},
     "above_ceiling"),
    ({"every_s": 60, "catch_up": {"mode": "all", "max_slots": 10**9}}, "validation_error"),
    ({"every_s": 60, "approvals": {"mode": "expire"}}, "invalid_schedule"),
    ({"every_s": 60, "message": "   "}, "validation_error"),
    ({"every_s": 60, "agent": "nobody"}, "unknown_agent"),
    ({"every_s": 60, "agent": None, "conversation_id": "not-yours"}, "unknown_conversation"),
])
def test_hostile_schedules_are_refused_with_a_clear_422_and_nothing_is_written(api, alice, body, code):
    name = agent(api, alice)
    answer = create(api, alice, **{"agent": name, **body})
    assert answer.status_code == 422, answer.json
    assert answer.json["error"]["code"] == code
    assert api.store.schedules.list_for("acme") == []


def test_a_cron_firing_more_often_than_the_tenants_shortest_interval_is_refused(store):
    api = Api(store, policy=dataclasses.replace(Policy.default(), schedules=LIMITS.model_copy(
        update={"min_interval_s": 120.0})))
    name = agent(api, api.key("acme"))
    answer = create(api, api.key("acme"), agent=name, cron="*/1 * * * *")
    assert answer.status_code == 422 and answer.json["error"]["code"] == "interval_too_short"
    assert create(api, api.key("acme"), agent=name, cron="*/2 * * * *").status_code == 201


def test_another_tenants_conversation_cannot_be_a_schedules_target(api, alice, mallory):
    cid = api.create(alice, script=WEATHER)
    answer = create(api, mallory, conversation_id=cid, every_s=60)
    assert answer.status_code == 422 and answer.json["error"]["code"] == "unknown_conversation"
    assert api.store.schedules.list_for("evil") == [] and api.types(cid) == []


def test_a_tenant_at_its_limit_of_schedules_gets_409(api, alice):
    name = agent(api, alice)
    for _ in range(LIMITS.max_per_tenant):
        assert create(api, alice, agent=name, every_s=60).status_code == 201
    answer = create(api, alice, agent=name, every_s=60)
    assert answer.status_code == 409 and answer.json["error"]["code"] == "too_many_schedules"


def test_a_slot_ticked_twice_starts_one_conversation_under_its_derived_id(api, alice):
    sid = create(api, alice, agent=agent(api, alice), every_s=2).json["id"]
    slot = api.store.schedules.load(sid).next_at
    api.clock.tick(2)
    for _ in range(3):
        api.sender.send(firing(api).tick())
    api.run()
    runs = api.get(f"/v1/schedules/{sid}/runs", alice).json["runs"]
    assert [(r["status"], r["conversation_id"]) for r in runs] == [
        ("fired", slot_conversation_id(sid, slot))]
    cid = runs[0]["conversation_id"]
    assert api.get(f"/v1/conversations/{cid}", alice).status_code == 200
    assert api.types(cid).count("user_msg") == 1 and "assistant_msg" in api.types(cid)


def test_a_post_schedule_puts_one_message_per_slot_into_its_conversation(api, alice):
    cid = api.create(alice, script=WEATHER)
    sid = create(api, alice, conversation_id=cid, every_s=2, message="status?").json["id"]
    for _ in range(2):
        api.clock.tick(2)
        api.sender.send(firing(api).tick())
        api.sender.send(firing(api).tick())
        api.run()
    runs = api.get(f"/v1/schedules/{sid}/runs", alice).json["runs"]
    assert len(runs) == 2 and {r["conversation_id"] for r in runs} == {cid}
    texts = [e.content["text"] for e in api.store.log.list_events(cid) if e.type == "user_msg"]
    assert texts == ["status?", "status?"]


def test_a_run_whose_conversation_ended_is_recorded_as_failed_and_posts_nothing(api, alice):
    cid = api.create(alice, script=WEATHER)
    sid = create(api, alice, conversation_id=cid, every_s=2).json["id"]
    api.services.commands.end(cid, Scope("acme"))
    api.clock.tick(2)
    api.sender.send(firing(api).tick())
    (run,) = api.get(f"/v1/schedules/{sid}/runs", alice).json["runs"]
    assert run["status"] == "failed" and run["error"] and run["conversation_id"] == cid
    assert "user_msg" not in api.types(cid)


REFUND = [
    {"text": "Refunding.", "tool_calls": [
        {"name": "refund_order", "args": {"order": "A-17", "amount": 129.9}}]},
    {"text": "Done."},
]


def test_an_unattended_approval_expires_after_the_schedules_time_and_is_refused(api, alice):
    sid = create(api, alice, agent=agent(api, alice, script=REFUND), every_s=2,
                 approvals={"mode": "expire", "expire_after_s": 60}).json["id"]
    api.clock.tick(2)
    api.sender.send(firing(api).tick())
    api.run()
    cid = api.store.schedules.list_runs(sid, limit=1)[0].conversation_id
    (call,) = api.store.calls.list_of(cid)
    assert call.status == "pending" and call.needs_approval
    assert call.expires_at == call.created_at + timedelta(seconds=60)  # not the tool's hour
    api.clock.tick(61)
    api.run()
    api.sent.extend(api.runtime.expire(cid, call.id))
    api.run()
    assert api.store.calls.load(cid, call.id).status == "expired"
    results = [e.content for e in api.store.log.list_events(cid) if e.type == "tool_result"]
    assert "refused by the system" in str(results) and "did not run" in str(results)
    (started,) = [e for e in api.store.log.list_events(cid) if e.type == "user_msg"]
    assert started.content["unattended"] == {"expire_after_s": 60.0, "schedule_id": sid}


def test_a_schedule_that_waits_leaves_a_persons_call_to_its_tools_own_deadline(api, alice):
    sid = create(api, alice, agent=agent(api, alice, script=APPROVAL), every_s=2).json["id"]
    api.clock.tick(2)
    api.sender.send(firing(api).tick())
    api.run()
    cid = api.store.schedules.list_runs(sid, limit=1)[0].conversation_id
    (call,) = api.store.calls.list_of(cid)
    assert call.status == "pending"
    assert call.expires_at == call.created_at + timedelta(seconds=3600)  # approve_payment's own


def failing_posts(api, monkeypatch, conversation_id, times):
    """Posting into `conversation_id` fails `times` times (None: always) as a lost database
    connection would; every other post goes through. The count left, to change."""
    commands, post = api.services.commands, api.services.commands.post_message
    left = {"n": times}

    def flaky(cid, *args, **kwargs):
        if cid == conversation_id and (left["n"] is None or left["n"] > 0):
            if left["n"] is not None:
                left["n"] -= 1
            raise OperationalError("INSERT", {}, Exception("server closed the connection"))
        return post(cid, *args, **kwargs)

    monkeypatch.setattr(commands, "post_message", flaky)
    return left


def test_a_run_whose_attempt_hits_a_database_blip_is_tried_again_later_and_fires(
        api, alice, monkeypatch):
    cid = api.create(alice, script=WEATHER)
    sid = create(api, alice, conversation_id=cid, every_s=3600).json["id"]
    failing_posts(api, monkeypatch, cid, times=1)
    api.clock.tick(3600)
    api.sender.send(firing(api).tick())
    (run,) = api.get(f"/v1/schedules/{sid}/runs", alice).json["runs"]
    assert (run["status"], run["attempts"]) == ("due", 1)
    assert "OperationalError" in run["error"] and run["retry_at"] is not None
    api.sender.send(firing(api).tick())  # before its retry: left alone
    assert api.get(f"/v1/schedules/{sid}/runs", alice).json["runs"][0]["attempts"] == 1
    api.clock.tick(10)
    api.sender.send(firing(api).tick())
    api.run()
    (run,) = api.get(f"/v1/schedules/{sid}/runs", alice).json["runs"]
    assert (run["status"], run["attempts"], run["error"]) == ("fired", 2, None)
    assert posted(api, cid) == ["hello"]


def test_a_run_that_fails_every_time_is_given_up_after_its_attempts_and_others_still_fire(
        api, alice, monkeypatch):
    stuck, stuck_id, _, fine_id = two_hourly_posts(api, alice)
    left = failing_posts(api, monkeypatch, stuck, times=None)
    api.clock.tick(3600)
    api.sender.send(firing(api).tick())  # the first attempt, then after 10 s and 20 s more
    assert runs(api, alice, fine_id)[0]["status"] == "fired"
    for wait in (10, 20):
        api.clock.tick(wait)
        api.sender.send(firing(api).tick())
    (run,) = runs(api, alice, stuck_id)
    assert (run["status"], run["attempts"], run["retry_at"]) == ("given_up", 3, None)
    assert run["error"].startswith("given up after 3 attempts") and "OperationalError" in run["error"]
    assert api.store.schedules.list_unfired(now=api.clock() + timedelta(days=1), limit=10) == []
    assert "user_msg" not in api.types(stuck)
    api.clock.tick(3600 - 30)  # the next slot, on time: a run of its own, with attempts of its own
    left["n"] = 0  # the database is back
    api.sender.send(firing(api).tick())
    latest = runs(api, alice, stuck_id)[0]
    assert (latest["status"], latest["attempts"]) == ("fired", 1)


def test_a_schedule_whose_slots_cannot_be_recorded_keeps_no_other_from_firing(
        api, alice, monkeypatch):
    import agentq.commands.firing as firing_module

    broken, broken_id, _, fine_id = two_hourly_posts(api, alice)
    calendar_of = firing_module.calendar_of

    def unreadable(record):
        if record.id == broken_id:
            raise ValueError("a calendar this version cannot read")
        return calendar_of(record)

    monkeypatch.setattr(firing_module, "calendar_of", unreadable)
    api.clock.tick(3600)
    api.sender.send(firing(api).tick())
    api.run()
    assert runs(api, alice, fine_id)[0]["status"] == "fired"
    assert runs(api, alice, broken_id) == []
    monkeypatch.setattr(firing_module, "calendar_of", calendar_of)  # the calendar reads again
    api.sender.send(firing(api).tick())
    api.run()
    (run,) = runs(api, alice, broken_id)
    assert run["status"] == "fired"
    assert posted(api, broken) == ["hello"]
