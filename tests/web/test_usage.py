"""GET /v1/usage: a tenant's own usage from the rollups, grouped; the operator's across tenants."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from decimal import Decimal

import pytest

from agentq.core.prices import Prices, format_money
from agentq.core.timefmt import format_ts
from agentq.core.usage import Tokens
from agentq.tenancy.policy import Policy
from agentq.tenancy.prices import ModelPrice
from tests.support.api import WEATHER, Api

OPERATOR = {"Authorization": "Bearer operator-secret-key"}


@pytest.fixture
def operator(api):
    api.services.operator_key = "operator-secret-key"
    return OPERATOR


def talk(api, headers, script=WEATHER, text="hi"):
    cid = api.create(headers, script=script)
    assert api.say(cid, text, headers).status_code == 202
    api.run()
    return cid


def usage(api, headers, **params):
    now = api.clock()
    params.setdefault("from", format_ts(now - timedelta(days=1)))
    params.setdefault("to", format_ts(now + timedelta(hours=1)))
    return api.get("/v1/usage", headers, query_string=params)


def totals(rows):
    return sum((Tokens(**{k: r[k] for k in Tokens().to_json()}) for r in rows), Tokens())


def from_messages(api, cid):
    return sum((Tokens.of_call(e.content.get("usage")) for e in api.store.log.list_events(cid)
                if e.type == "assistant_msg"), Tokens())


def test_a_tenant_reads_its_tokens_and_calls_per_conversation(api, alice):
    first, second = talk(api, alice), talk(api, alice, script=WEATHER[1:])
    answer = usage(api, alice, by="conversation", group_by="hour")
    assert answer.status_code == 200, answer.json
    body = answer.json
    assert body["tenant"] == "acme" and body["by"] == ["conversation"] and not body["truncated"]
    per = {row["group"]["conversation"]: row for row in body["rows"]}
    assert set(per) == {first, second}
    assert totals([per[first]]) == from_messages(api, first)
    assert per[first]["calls"] == 2 and per[second]["calls"] == 1
    assert body["rows"][0]["start"] == format_ts(api.clock().replace(minute=0, second=0,
                                                                     microsecond=0))


def test_grouping_by_profile_and_model_sums_the_conversations_together(api, alice):
    first, second = talk(api, alice), talk(api, alice)
    rows = usage(api, alice, by="profile,model").json["rows"]
    assert [r["group"] for r in rows] == [{"profile": "scripted", "model": "scripted"}]
    assert totals(rows) == from_messages(api, first) + from_messages(api, second)


def test_another_tenants_usage_is_never_visible(api, alice, mallory):
    talk(api, alice)
    assert usage(api, mallory).json["rows"] == []
    refused = usage(api, mallory, tenant="acme")
    assert refused.status_code == 403
    assert usage(api, mallory, by="tenant").status_code == 403


@pytest.mark.parametrize("params", [
    {"group_by": "week"},
    {"by": "agent,colour"},
    {"by": "agent,,model"},
    {"from": "yesterday"},
    {"limit": "0"},
    {"colour": "blue"},
])
def test_bad_parameters_are_a_clear_422(api, alice, params):
    answer = usage(api, alice, **params)
    assert answer.status_code == 422, answer.json
    assert answer.json["error"]["code"] == "validation_error"


@pytest.mark.parametrize("params, said", [
    ({"from": "2026-01-01T00:00:00Z", "to": "2026-03-01T00:00:00Z", "group_by": "hour"},
     "a range grouped by hour covers at most 31 days"),
    ({"from": "2026-03-01T00:00:00Z", "to": "2026-01-01T00:00:00Z"}, "`to` must come after `from`"),
    ({"from": "2026-03-01T00:00:00Z", "to": "2026-03-01T00:00:00Z"}, "`to` must come after `from`"),
], ids=["too-long", "inverted", "empty"])
def test_a_range_the_parameters_schemas_allow_but_no_read_takes_is_422_invalid_range(
        api, alice, params, said):
    answer = usage(api, alice, **params)
    assert answer.status_code == 422, answer.json
    assert answer.json["error"] == {"code": "invalid_range", "message": said, "details": [
        {"loc": [], "msg": said, "type": "invalid_range"}]}


def test_a_dimension_named_twice_groups_once(api, alice):
    assert usage(api, alice, by="agent,model,agent").json["by"] == ["agent", "model"]


def test_a_missing_range_is_a_422(api, alice):
    assert api.get("/v1/usage", alice).status_code == 422


def test_without_a_key_usage_is_401(api, operator):
    assert usage(api, {}).status_code == 401
    assert usage(api, {"Authorization": "Bearer operator-secret-kez"}).status_code == 401


def test_the_operator_reads_every_tenant_or_one(api, alice, mallory, operator):
    mine, theirs = talk(api, alice), talk(api, mallory)
    every = usage(api, operator, by="tenant").json
    assert every["tenant"] is None
    per = {r["group"]["tenant"]: totals([r]) for r in every["rows"]}
    assert per == {"acme": from_messages(api, mine), "evil": from_messages(api, theirs)}
    one = usage(api, operator, tenant="evil").json
    assert one["tenant"] == "evil" and totals(one["rows"]) == from_messages(api, theirs)


def test_a_row_limit_says_the_answer_is_truncated(api, alice):
    talk(api, alice), talk(api, alice)
    body = usage(api, alice, by="conversation", limit="1").json
    assert len(body["rows"]) == 1 and body["truncated"] is True


def test_a_range_that_ends_before_any_call_is_empty(api, alice):
    talk(api, alice)
    long_ago = datetime(2026, 1, 1, tzinfo=timezone.utc)
    body = usage(api, alice, **{"from": format_ts(long_ago),
                                "to": format_ts(long_ago + timedelta(days=2))}).json
    assert body["rows"] == []


def test_grouping_by_agent_and_day_keeps_an_agents_conversations_apart(api, alice):
    made = api.client.post("/v1/agents", headers=alice,
                           json={"name": "support", "settings": {"script": WEATHER[1:]}})
    assert made.status_code == 201, made.json
    created = api.client.post("/v1/conversations", headers=alice, json={"agent": "support"})
    assert created.status_code == 201, created.json
    theirs = created.json["id"]
    assert api.say(theirs, "hi", alice).status_code == 202
    api.run()
    plain = talk(api, alice)
    body = usage(api, alice, by="agent", group_by="day").json
    per = {r["group"]["agent"]: r for r in body["rows"]}
    assert set(per) == {"support", None}
    assert totals([per["support"]]) == from_messages(api, theirs)
    assert totals([per[None]]) == from_messages(api, plain)
    day = api.clock().replace(hour=0, minute=0, second=0, microsecond=0)
    assert {r["start"] for r in body["rows"]} == {format_ts(day)}


def test_usage_reports_what_the_calls_cost_at_the_policys_prices_beside_their_tokens(store):
    price = ModelPrice(input=Decimal("1.5"), output=Decimal(6))
    api = Api(store, policy=Policy(profiles=Policy.default().profiles,
                                   prices={"scripted": price}))
    alice = api.key("acme", "alice")
    cid = talk(api, alice)
    rows = usage(api, alice, by="conversation").json["rows"]
    (row,) = rows
    expected = Prices(input=1_500, output=6_000, cached_input=1_500, reasoning=6_000).cost_of(
        from_messages(api, cid))
    assert expected > 0 and row["cost"] == format_money(expected)
    assert Decimal(row["cost"]) * 10**9 == expected


def overview(api, headers, **params):
    now = api.clock()
    params.setdefault("from", format_ts(now - timedelta(days=1)))
    params.setdefault("to", format_ts(now + timedelta(hours=1)))
    return api.get("/v1/usage/overview", headers, query_string=params)


def test_the_operators_overview_has_cost_per_tenant_and_agent_by_day_and_ranks_turns(store):
    price = ModelPrice(input=Decimal("1.5"), output=Decimal(6))
    api = Api(store, policy=Policy(profiles=Policy.default().profiles,
                                   prices={"scripted": price}))
    api.services.operator_key = "operator-secret-key"
    alice, bob = api.key("acme", "alice"), api.key("globex", "bob")
    short = talk(api, alice, script=WEATHER[1:])
    long = talk(api, bob)  # two calls, a longer answer: it costs more
    answer = overview(api, OPERATOR, turns=5)
    assert answer.status_code == 200, answer.json
    body = answer.json
    per_tenant = {row["group"]["tenant"]: row for row in body["days"]}
    assert set(per_tenant) == {"acme", "globex"} and per_tenant["acme"]["group"]["agent"] is None
    prices = price.prices()
    for tenant, cid in (("acme", short), ("globex", long)):
        assert per_tenant[tenant]["cost"] == format_money(prices.cost_of(from_messages(api, cid)))
    costliest = body["costliest_turns"]
    assert [t["conversation_id"] for t in costliest] == [long, short]
    assert costliest[0]["cost"] == per_tenant["globex"]["cost"] and costliest[0]["calls"] == 2
    turn_ids = {e.turn_id for e in api.store.log.list_events(long) if e.type == "user_msg"}
    assert {costliest[0]["turn_id"]} == turn_ids and costliest[0]["tenant"] == "globex"
    assert {t["conversation_id"] for t in body["slowest_turns"]} == {short, long}


def test_a_tenants_key_cannot_read_the_overview(api, alice, operator):
    talk(api, alice)
    refused = overview(api, alice)
    assert refused.status_code == 403 and refused.json["error"]["code"] == "forbidden"
    assert overview(api, {}).status_code == 401


def test_an_overview_of_an_empty_or_overlong_range_is_refused(api, operator):
    now = api.clock()
    backwards = overview(api, OPERATOR, **{"from": format_ts(now), "to": format_ts(now)})
    too_long = overview(api, OPERATOR, **{"from": format_ts(now - timedelta(days=400))})
    assert backwards.status_code == too_long.status_code == 422
    assert overview(api, OPERATOR, turns=0).status_code == 422
