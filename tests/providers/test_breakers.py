"""Per-endpoint circuit breakers: shared boards, one probe, and model steps held without a thread.

The runtime tests run real adapters against the OpenAI emulator, with a clock the test
moves: an endpoint that keeps failing opens its breaker, later steps are held in the
ledger (not sleeping in a worker, not calling the endpoint), and one probe closes it.
"""
from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from prometheus_client.parser import text_string_to_metric_families

from agentq.providers.breakers import CircuitBreakers, FallbackBoard, RedisBoard
from agentq.commands import Commands
from agentq.config import Config
from agentq.core.breaker import Breaker, BreakerPolicy
from agentq.followups import Advance
from agentq.providers.errors import ProviderError
from agentq.runtime import Runtime
from agentq.tools import Registry
from agentq.core.scope import Scope
from tests.support.clock import Clock
from tests.support.drive import Recorder, drain
from tests.support.emulators import Fail, Reply
from tests.support.emulators.kit import Kit, kit_fixtures
from tests.support.rules import Rules

SCOPE = Scope(tenant="t1", user="u1")
T0 = datetime(2026, 11, 21, 12, 0, tzinfo=timezone.utc)
E = "https://api.example.test/v1"


# ---- boards: one breaker for every process -----------------------------------------------


@pytest.fixture(params=["redis", "store"])
def board(request: pytest.FixtureRequest, store):
    if request.param == "store":
        return store.breakers
    client = redis.Redis.from_url(request.getfixturevalue("redis_url"))
    for key in client.scan_iter("agentq:breaker*"):
        client.delete(key)
    return RedisBoard(client)


def test_a_board_swaps_by_compare_and_set_so_of_two_writers_one_wins(board):
    assert board.load_breaker(E) is None
    first = board.swap_breaker(Breaker(E), Breaker(E, failures=1), now=T0)
    assert first == Breaker(E, failures=1, version=1) == board.load_breaker(E)
    assert board.swap_breaker(Breaker(E), Breaker(E, failures=9), now=T0) is None  # stale: lost
    opened = Breaker(E, state="open", failures=5, trips=1, until=T0, last_error="HTTP 503")
    assert board.swap_breaker(first, opened, now=T0).version == 2
    assert board.swap_breaker(first, Breaker(E), now=T0) is None
    assert board.list_breakers() == [Breaker(E, "open", 5, 1, T0, "HTTP 503", 2)]


def test_racing_callers_of_a_half_open_breaker_get_exactly_one_probe(board):
    board.swap_breaker(Breaker(E), Breaker(E, state="open", failures=5, trips=1, until=T0), now=T0)
    breakers = CircuitBreakers(board, BreakerPolicy(), clock=lambda: T0 + timedelta(seconds=1))
    barrier, waits = threading.Barrier(8), []

    def call() -> None:
        barrier.wait()
        waits.append(breakers.before_call(E))

    threads = [threading.Thread(target=call) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(wait is None for wait in waits) == 1  # the probe
    assert board.load_breaker(E).state == "half_open"


def test_the_database_stands_in_when_redis_fails(store):
    dead = redis.Redis(host="127.0.0.1", port=9, socket_connect_timeout=0.2,
                       retry=Retry(NoBackoff(), 0))
    board = FallbackBoard(RedisBoard(dead), store.breakers)
    breakers = CircuitBreakers(board, BreakerPolicy(failures_to_open=1), clock=lambda: T0)
    breakers.record(E, ProviderError("HTTP 503", transient=True, status=503))
    assert store.breakers.load_breaker(E).state == "open" and breakers.before_call(E) is not None


def test_rate_limits_do_not_count_against_the_endpoint(store):
    breakers = CircuitBreakers(store.breakers, BreakerPolicy(failures_to_open=1), clock=lambda: T0)
    breakers.record(E, ProviderError("slow down", transient=True, status=429, code="rate_limit_error"))
    breakers.record(E, ProviderError("bad request", status=400))
    assert store.breakers.load_breaker(E) is None and breakers.before_call(E) is None


def test_a_board_that_fails_altogether_lets_calls_through(store):
    class Broken:
        def load_breaker(self, endpoint):
            raise RuntimeError("down")

    breakers = CircuitBreakers(Broken(), BreakerPolicy(), clock=lambda: T0)
    assert breakers.before_call(E) is None
    breakers.record(E, ProviderError("HTTP 503", transient=True, status=503))  # no raise


# ---- the runtime: held steps, one probe -------------------------------------------------------


served, kit = kit_fixtures("openai")


def make_runtime(kit: Kit, store) -> Runtime:
    access = kit.access()
    return Runtime(store=store, registry=Registry.from_modules(["agentq.tools.demo"]),
                   pubsub=Recorder(), clock=Clock(), sleep=lambda s: None,
                   config=Config(max_attempts=3, breaker_failures=3, breaker_open_s=30.0),
                   rules=Rules(providers=access.provider_for, endpoints=access.endpoint_url))


def start_turn(runtime: Runtime, kit: Kit, text: str = "Weather?"):
    commands = Commands(runtime.store, runtime.registry, clock=runtime.clock, policy=kit.policy())
    conversation = commands.create_conversation(SCOPE, kit.settings())
    _, follow = commands.post_message(conversation.id, text, SCOPE)
    return conversation.id, follow


def test_an_endpoint_that_keeps_failing_opens_and_later_steps_wait_without_calling_it(kit, sqlite_store):
    runtime = make_runtime(kit, sqlite_store)
    kit.emulator.default = Fail(503, "upstream is down")
    first, follow = start_turn(runtime, kit)
    drain(runtime, follow)  # three attempts fail: the third opens the breaker
    assert len(kit.emulator.received) == 3
    assert runtime.breakers.list()[0].state == "open"

    others = [start_turn(runtime, kit, f"q{n}") for n in range(5)]
    held = [drain(runtime, follow) for _, follow in others]
    assert len(kit.emulator.received) == 3  # nobody called the endpoint
    for (cid, _), later in zip(others, held):  # each is held, due again after the open time
        (advance,) = later
        assert isinstance(advance, Advance) and advance.conversation_id == cid
        assert advance.eta >= runtime.clock() + timedelta(seconds=30)
        (step,) = [s for s in sqlite_store.steps.list_of(cid) if s.kind == "llm"]
        assert step.status == "scheduled" and step.attempts == 0 and "circuit" in step.last_error
    notices = [data for kind, data in runtime.pubsub.notices if kind == "retry" and data.get("circuit")]
    assert len(notices) == 5 and all("upstream is down" in n["error"] for n in notices)
    assert all(e.type != "error" for cid, _ in others for e in sqlite_store.log.list_events(cid))

    # the sweeper holds the first step too (its retries ran out), and leaves held ones be
    runtime.clock.tick(16)
    (swept,) = drain(runtime, runtime.sweep())
    assert swept.conversation_id == first and len(kit.emulator.received) == 3
    assert drain(runtime, [Advance(cid) for cid, _ in others]) == []  # held already: no more

    kit.emulator.default = Reply(text="back up")  # the outage ends; the open time passes
    runtime.clock.tick(40)
    drain(runtime, [swept] + [a for later in held for a in later])
    assert runtime.breakers.list()[0].state == "closed"
    for cid in [first] + [cid for cid, _ in others]:
        assert sqlite_store.log.list_events(cid)[-1].content["text"] == "back up"
    assert len(kit.emulator.received) == 3 + 6  # one call each once closed


def test_a_failed_probe_opens_the_breaker_again_and_its_step_keeps_its_attempts(kit, sqlite_store):
    runtime = make_runtime(kit, sqlite_store)
    kit.emulator.default = Fail(500, "still down")
    first, follow = start_turn(runtime, kit)
    drain(runtime, follow)
    cid, follow = start_turn(runtime, kit, "again")
    (advance,) = drain(runtime, follow)
    runtime.clock.tick(40)
    assert drain(runtime, [advance]) != []  # the probe failed: held again, for longer
    (breaker,) = runtime.breakers.list()
    assert breaker.state == "open" and breaker.trips == 2
    assert breaker.until >= runtime.clock() + timedelta(seconds=59)
    (step,) = [s for s in sqlite_store.steps.list_of(cid) if s.kind == "llm"]
    assert step.status == "scheduled" and step.attempts == 0  # waiting cost no attempt
    assert len(kit.emulator.received) == 3 + 1  # only the probe went


# ---- /metrics ---------------------------------------------------------------------------------


def test_metrics_show_each_breaker_state(store):
    from tests.web.test_metrics import _client

    store.breakers.swap_breaker(Breaker(E), Breaker(E, state="open", failures=5, trips=1, until=T0), now=T0)
    other = "http://127.0.0.1:8081/v1"
    store.breakers.swap_breaker(Breaker(other), Breaker(other, failures=2), now=T0)
    text = _client(store).get("/metrics").get_data(as_text=True)
    samples = {(s.name, s.labels.get("endpoint")): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}
    assert samples[("agentq_provider_breaker_state", E)] == 2
    assert samples[("agentq_provider_breaker_state", other)] == 0
    assert samples[("agentq_provider_breaker_failures", other)] == 2


def test_the_advance_of_a_held_step_is_sent_with_its_eta(monkeypatch):
    from agentq.config import Config
    from agentq.worker.factory import create_celery
    from agentq.worker.queues import MODEL
    from agentq.worker.tasks import enqueue

    app = create_celery(Config(database_url="sqlite://", redis_url="embedded://breakers"),
                        runtime=lambda: None)
    sent = []
    send_task = app.send_task

    def recorded(name, **options):
        sent.append((name, options.get("eta")))
        return send_task(name, **options)

    monkeypatch.setattr(app, "send_task", recorded)
    try:
        enqueue(app, [Advance("c1", eta=T0), Advance("c2")])
    finally:
        with app.connection_for_write() as conn:  # no other test's worker takes them
            conn.default_channel.queue_purge(MODEL)
        app.close()
    assert sent == [("agentq.advance", T0), ("agentq.advance", None)]
