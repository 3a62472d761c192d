"""GET /metrics: exact gauges of a store holding known rows, on SQLite and PostgreSQL."""
from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from prometheus_client.parser import text_string_to_metric_families

from agentq.commands import Commands
from agentq.core.events import InboxItem, ToolCallRecord
from agentq.live.pubsub import PubSub
from agentq.store import NewStep, Store
from agentq.store.metrics import LATENCY_BOUNDS_S
from agentq.core.usage import Tokens
from agentq.store.usage import UsageKey, add_usage_txn
from agentq.tools import Registry
from agentq.core.scope import Scope
from tests.support.clock import T0
from tests.support.sent import RecordingSender
from tests.support.store import schedule_step
from agentq.web.app import create_app
from agentq.web.auth import KeyRing
from agentq.web.routes.metrics import DELIVERY_STATUSES, EXECUTORS, STEP_KINDS, STEP_STATUSES
from agentq.web.services import Services
from agentq.web.streaming.streams import DROP_REASONS

SCRAPED_AT = T0 + timedelta(hours=1)
SCOPE = Scope(tenant="acme", user="u1")
TOKEN = "scrape-secret"


def _client(store: Store, metrics_token: str | None = None):
    commands = Commands(store, Registry.from_modules(["agentq.tools.demo"]), clock=lambda: SCRAPED_AT)
    services = Services(
        store=store, commands=commands, pubsub=PubSub(f"embedded://metrics-{uuid.uuid4().hex}"),
        sender=RecordingSender(), keys=KeyRing(store, None, cache_s=0),
        metrics_token=metrics_token,
    )
    return create_app(services=services).test_client()


def _samples(text: str) -> dict[tuple[str, frozenset], float]:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _step(store: Store, cid: str, kind: str, *, claimed: bool = True, ref: int = 0) -> str:
    key = f"{kind}-{ref}-{uuid.uuid4().hex[:8]}"
    args = dict(step_key=key, conversation_id=cid, kind=kind, ref={"n": ref}, round_id=None,
                celery_task_id=key)
    if claimed:
        store.steps.schedule_and_claim(NewStep(**args, tenant=SCOPE.tenant), worker="w1",
                                       lease_s=30, now=T0, max_attempts=5)
    else:
        schedule_step(store, **args, now=T0)
    return key


def _finish(store: Store, cid: str, key: str, after_s: float) -> None:
    with store.writes.locked(cid) as tx:
        assert tx.finish_step(key, worker="w1", now=T0 + timedelta(seconds=after_s))


def _call(cid: str, call_id: str, executor: str, status: str, age_s: float) -> ToolCallRecord:
    return ToolCallRecord(
        conversation_id=cid, id=call_id, name="approve_payment", executor=executor, status=status,
        args={}, round_id=None, turn_id=None, created_at=SCRAPED_AT - timedelta(seconds=age_s),
    )


def _inbox(tx, cid: str, *, taken: bool) -> None:
    item = InboxItem(id=str(uuid.uuid4()), conversation_id=cid, content={"text": "hi"},
                     on_busy="enqueue", created_at=T0)
    tx.add_inbox(item, queued=not taken, turn_id=None, taken_at=T0 if taken else None)


@pytest.fixture
def known_rows(store: Store) -> str:
    """Five steps, four tool calls (three pending), three inbox messages (two waiting)."""
    commands = Commands(store, Registry.from_modules(["agentq.tools.demo"]), clock=lambda: T0)
    cid = commands.create_conversation(SCOPE, {"script": []}).id
    _finish(store, cid, _step(store, cid, "llm", ref=1), after_s=1.5)
    _finish(store, cid, _step(store, cid, "tool", ref=2), after_s=0.25)
    failed = _step(store, cid, "llm", ref=3)
    store.steps.add_retry(failed)
    store.steps.add_retry(failed)
    store.steps.release(failed, worker="w1", status="failed_permanent", now=T0 + timedelta(seconds=40))
    _step(store, cid, "llm", claimed=False, ref=4)
    _step(store, cid, "compact", ref=5)
    with store.writes.locked(cid) as tx:
        tx.put_tool_calls([
            _call(cid, "h1", "human", "pending", age_s=4200),
            _call(cid, "h2", "human", "pending", age_s=60),
            _call(cid, "c1", "client", "pending", age_s=300),
            _call(cid, "s1", "server", "done", age_s=9999),
        ])
        _inbox(tx, cid, taken=False)
        _inbox(tx, cid, taken=False)
        _inbox(tx, cid, taken=True)
    return cid


def _series(*, steps: dict, retries: dict, durations: dict, pending: dict, oldest_age_s: float,
            inbox: int) -> dict[tuple[str, frozenset], float]:
    """Every sample /metrics should answer; zero for each known kind, status and executor."""
    expected: dict[tuple[str, frozenset], float] = {}
    for kind in STEP_KINDS:
        for status in STEP_STATUSES:
            labels = frozenset({"kind": kind, "status": status}.items())
            expected[("agentq_steps", labels)] = steps.get((kind, status), 0)
        expected[("agentq_step_retries", frozenset({"kind": kind}.items()))] = retries.get(kind, 0)
        took = durations.get(kind, [])
        for bound in [*(LATENCY_BOUNDS_S if took else ()), float("inf")]:
            le = "+Inf" if bound == float("inf") else repr(bound)
            expected[("agentq_step_latency_seconds_bucket", frozenset({"kind": kind, "le": le}.items()))] = (
                sum(1 for d in took if d <= bound)
            )
        expected[("agentq_step_latency_seconds_gcount", frozenset({"kind": kind}.items()))] = len(took)
        expected[("agentq_step_latency_seconds_gsum", frozenset({"kind": kind}.items()))] = sum(took)
    for executor in EXECUTORS:
        expected[("agentq_pending_calls", frozenset({"executor": executor}.items()))] = (
            pending.get(executor, 0)
        )
    expected[("agentq_oldest_pending_call_age_seconds", frozenset())] = oldest_age_s
    expected[("agentq_inbox_messages", frozenset())] = inbox
    expected[("agentq_streams_open", frozenset())] = 0  # the scrape's own process holds none
    expected[("agentq_streams_refused_total", frozenset())] = 0
    for reason in DROP_REASONS:
        expected[("agentq_streams_dropped_total", frozenset({"reason": reason}.items()))] = 0
    for status in DELIVERY_STATUSES:  # no webhook endpoint in these stores
        expected[("agentq_webhook_deliveries", frozenset({"status": status}.items()))] = 0
    return expected


def test_metrics_are_the_exact_aggregates_of_the_rows_in_the_store(store, known_rows):
    answer = _client(store).get("/metrics")
    assert answer.status_code == 200
    assert answer.content_type.startswith("text/plain; version=0.0.4")
    assert _samples(answer.get_data(as_text=True)) == _series(
        steps={("llm", "succeeded"): 1, ("tool", "succeeded"): 1, ("llm", "failed_permanent"): 1,
               ("llm", "scheduled"): 1, ("compact", "running"): 1},
        retries={"llm": 2},
        durations={"llm": [1.5, 40.0], "tool": [0.25]},  # claim to finish; never-finished left out
        pending={"human": 2, "client": 1},
        oldest_age_s=4200.0,  # h1, created 4200 s before the scrape's clock
        inbox=2,
    )


def test_metrics_show_no_ids_tenants_or_content(store, known_rows):
    text = _client(store).get("/metrics").get_data(as_text=True)
    for secret in (known_rows, SCOPE.tenant, "h1", "approve_payment", "hi"):
        assert f'"{secret}"' not in text and f" {secret} " not in text


def test_an_empty_store_answers_zero_for_every_known_series(store):
    samples = _samples(_client(store).get("/metrics").get_data(as_text=True))
    assert samples == _series(steps={}, retries={}, durations={}, pending={}, oldest_age_s=0.0,
                              inbox=0)


def test_without_a_metrics_token_a_scrape_needs_no_credentials(store):
    assert _client(store).get("/metrics").status_code == 200


def test_with_a_metrics_token_a_scrape_must_send_it_as_a_bearer(store):
    client = _client(store, metrics_token=TOKEN)
    missing = client.get("/metrics")
    assert missing.status_code == 401
    assert missing.headers["WWW-Authenticate"].startswith("Bearer")
    assert missing.get_json()["error"]["code"] == "unauthorized"
    assert client.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.get("/metrics", headers={"Authorization": f"Basic {TOKEN}"}).status_code == 401
    ok = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert ok.status_code == 200
    assert "agentq_inbox_messages 0.0" in ok.get_data(as_text=True)


def test_an_api_key_is_not_a_metrics_token(store):
    client = _client(store, metrics_token=TOKEN)
    _, secret = store.keys.create("acme", T0)
    assert client.get("/metrics", headers={"Authorization": f"Bearer {secret}"}).status_code == 401


def test_token_counters_sum_the_usage_rollups_per_profile_and_model_with_no_tenant(store):
    cid = Commands(store, Registry.from_modules(["agentq.tools.demo"])).create_conversation(
        SCOPE, {}).id
    one = Tokens(input_tokens=100, output_tokens=20, cached_tokens=60, reasoning_tokens=5, calls=1)
    with store.engine.begin() as conn:
        for tenant, hour in (("acme", 0), ("evil", 0), ("acme", 2)):
            add_usage_txn(conn, UsageKey(tenant, None, "openai", "gpt-x", cid), one,
                          at=T0 + timedelta(hours=hour))
        add_usage_txn(conn, UsageKey("acme", None, "scripted", None, cid), one, at=T0)
    text = _client(store).get("/metrics").get_data(as_text=True)
    samples = _samples(text)
    labels = frozenset({"profile": "openai", "model": "gpt-x", "kind": "input"}.items())
    assert samples[("agentq_model_tokens_total", labels)] == 300
    cached = frozenset({"profile": "openai", "model": "gpt-x", "kind": "cached"}.items())
    assert samples[("agentq_model_tokens_total", cached)] == 180
    calls = frozenset({"profile": "scripted", "model": ""}.items())
    assert samples[("agentq_model_calls_total", calls)] == 1
    assert "acme" not in text and "evil" not in text and cid not in text
