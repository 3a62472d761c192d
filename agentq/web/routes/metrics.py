"""GET /metrics: Prometheus exposition of the steps, pending calls and inboxes in the store.

Workers run on other machines and the API under several gunicorn processes, so nothing
is counted in memory: each scrape reads a few aggregates from the store and turns them
into gauges. The one exception is the live streams, which only the process holding them
knows: their figures (`agentq_streams_*`) are those of the process that answered. Only
aggregates leave: no ids, no tenants, no content. With
AGENTQ_METRICS_TOKEN set, a scrape must send it as `Authorization: Bearer <token>`.
"""
from __future__ import annotations

import hmac
import logging
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime

from flask import Blueprint, Response, request
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeHistogramMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from agentq.core.breaker import STATE_NUMBERS, Breaker
from agentq.core.keys import MODEL_STEP
from agentq.core.usage import Tokens
from agentq.store.metrics import StoreMetrics
from agentq.web.errors import ApiError
from agentq.web.services import services
from agentq.web.streaming.streams import DROP_REASONS, OpenStreams

log = logging.getLogger(__name__)
bp = Blueprint("metrics", __name__)

# Zero rows still make a series, so a rate or an alert never sees one vanish.
STEP_KINDS = (MODEL_STEP, "tool", "compact")  # label values: the stored kinds
STEP_STATUSES = ("scheduled", "waiting", "running", "succeeded", "failed_recoverable",
                 "failed_permanent", "timeout", "cancelled")
EXECUTORS = ("human", "client", "approval", "question")  # what a pending call waits on


class StoreCollector(Collector):
    """The metric families of one `StoreMetrics`, read once per scrape, at `now`."""

    def __init__(self, metrics: StoreMetrics, now: datetime) -> None:
        self.metrics, self.now = metrics, now

    def collect(self) -> Iterator[Metric]:
        m = self.metrics
        kinds = _known(STEP_KINDS, [k for k, _ in m.steps], m.latency)
        steps = GaugeMetricFamily(
            "agentq_steps", "Steps in the ledger by kind and status (finished rows stay until "
            "agentq.gc drops them)", labels=["kind", "status"])
        for kind in kinds:
            for status in _known(STEP_STATUSES, [s for k, s in m.steps if k == kind]):
                steps.add_metric([kind, status], m.steps.get((kind, status), 0))
        yield steps
        retries = GaugeMetricFamily(
            "agentq_step_retries", "Model-call retries recorded on the steps in the ledger",
            labels=["kind"])
        for kind in kinds:
            retries.add_metric([kind], m.retries.get(kind, 0))
        yield retries
        yield self._latency(kinds)
        pending = GaugeMetricFamily(
            "agentq_pending_calls",
            "Tool calls waiting for a person, the client app, an approval, or an answer to a "
            "tool server's question",
            labels=["executor"])
        for executor in _known(EXECUTORS, m.pending):
            pending.add_metric([executor], m.pending.get(executor, 0))
        yield pending
        age_s = (self.now - m.oldest_pending_at).total_seconds() if m.oldest_pending_at else 0.0
        yield GaugeMetricFamily(
            "agentq_oldest_pending_call_age_seconds",
            "Age of the oldest pending tool call (0 when none waits)", value=max(age_s, 0.0))
        yield GaugeMetricFamily(
            "agentq_inbox_messages", "User messages waiting in inboxes for their turn",
            value=m.inbox)

    def _latency(self, kinds: Iterable[str]) -> Metric:
        family = GaugeHistogramMetricFamily(
            "agentq_step_latency_seconds", "Claim to finish of the finished steps still in the "
            "ledger (the last attempt of each)", labels=["kind"])
        for kind in kinds:
            latency = self.metrics.latency.get(kind)
            if latency is None:
                family.add_metric([kind], [("+Inf", 0)], 0.0)
                continue
            buckets = [(_le(b), n) for b, n in zip(latency.bounds_s, latency.at_most, strict=True)]
            family.add_metric([kind], [*buckets, ("+Inf", latency.count)], latency.sum_s)
        return family


class BreakerCollector(Collector):
    """Each provider endpoint's circuit breaker, as the workers share it."""

    def __init__(self, breakers: list[Breaker]) -> None:
        self.breakers = breakers

    def collect(self) -> Iterator[Metric]:
        state = GaugeMetricFamily(
            "agentq_provider_breaker_state", "Circuit breaker of a provider endpoint: 0 closed, "
            "1 half-open (one probe call), 2 open (model steps wait)", labels=["endpoint"])
        failures = GaugeMetricFamily(
            "agentq_provider_breaker_failures", "Transient failures in a row of calls to a "
            "provider endpoint", labels=["endpoint"])
        for breaker in self.breakers:
            state.add_metric([breaker.endpoint], STATE_NUMBERS[breaker.state])
            failures.add_metric([breaker.endpoint], breaker.failures)
        yield state
        yield failures


class StreamCollector(Collector):
    """The live streams of this process: open, refused over the cap, dropped and why."""

    def __init__(self, streams: OpenStreams) -> None:
        self.streams = streams

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily("agentq_streams_open", "Live streams this API process holds",
                                value=self.streams.open_count())
        yield CounterMetricFamily(
            "agentq_streams_refused", "Streams refused with 429: the tenant held its cap in this "
            "process", value=self.streams.refused)
        dropped = CounterMetricFamily(
            "agentq_streams_dropped", "Streams this process ended: overflow (the client fell "
            "behind), stalled (it read nothing for too long), gone (it closed), shutdown",
            labels=["reason"])
        for reason in DROP_REASONS:
            dropped.add_metric([reason], self.streams.dropped.get(reason, 0))
        yield dropped


class TokenCollector(Collector):
    """Tokens and model calls since the rollups began, per profile and model (no tenant):
    counters, since rollup rows only ever grow."""

    KINDS: dict[str, Callable[[Tokens], int]] = {
        "input": lambda t: t.input_tokens, "output": lambda t: t.output_tokens,
        "cached": lambda t: t.cached_tokens, "reasoning": lambda t: t.reasoning_tokens,
    }

    def __init__(self, totals: dict[tuple[str, str], Tokens]) -> None:
        self.totals = totals

    def collect(self) -> Iterator[Metric]:
        tokens = CounterMetricFamily(
            "agentq_model_tokens", "Tokens of committed model calls by profile, model and kind "
            "(cached is part of input, reasoning part of output)",
            labels=["profile", "model", "kind"])
        calls = CounterMetricFamily(
            "agentq_model_calls", "Committed model calls by profile and model",
            labels=["profile", "model"])
        for (profile, model), counted in sorted(self.totals.items()):
            for kind, count in self.KINDS.items():
                tokens.add_metric([profile, model, kind], count(counted))
            calls.add_metric([profile, model], counted.calls)
        yield tokens
        yield calls


def _token_totals(found) -> dict[tuple[str, str], Tokens]:
    try:
        return found.store.usage.token_totals()
    except Exception as exc:  # the other metrics still answer
        log.warning("metrics scrape could not read the usage rollups: %s", exc)
        return {}


DELIVERY_STATUSES = ("pending", "delivering", "delivered", "failed")


class DeliveryCollector(Collector):
    """Webhook deliveries in the outbox by outcome: delivered, failed for good, still going."""

    def __init__(self, counts: dict[str, int]) -> None:
        self.counts = counts

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "agentq_webhook_deliveries", "Webhook deliveries by status: pending (due or "
            "waiting to retry), delivering, delivered, failed (retries used up)",
            labels=["status"])
        for status in _known(DELIVERY_STATUSES, self.counts):
            family.add_metric([status], self.counts.get(status, 0))
        yield family


def _deliveries(found) -> dict[str, int]:
    try:
        return found.store.webhooks.count_deliveries()
    except Exception as exc:  # the other metrics still answer
        log.warning("metrics scrape could not count webhook deliveries: %s", exc)
        return {}


def _known(known: Iterable[str], *seen: Iterable[str]) -> list[str]:
    """The known label values, then any other value the store holds, in a stable order."""
    values = dict.fromkeys(known)
    for group in seen:
        values.update(dict.fromkeys(sorted(group)))
    return list(values)


def _le(bound: float) -> str:
    return repr(float(bound))


def _check_token(expected: str | None) -> None:
    if expected is None:
        return
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(
        given.strip().encode("utf-8", "replace"), expected.encode("utf-8", "replace")
    ):
        raise ApiError(401, "unauthorized", "send Authorization: Bearer <AGENTQ_METRICS_TOKEN>",
                       headers={"WWW-Authenticate": 'Bearer realm="agentq-metrics"'})


def _breakers(found) -> list[Breaker]:
    try:
        return (found.breakers or found.store.breakers).list_breakers()
    except Exception as exc:  # the other metrics still answer
        log.warning("metrics scrape could not read the circuit breakers: %s", exc)
        return []


@bp.get("/metrics")
def metrics() -> Response:
    found = services()
    _check_token(found.metrics_token)
    try:
        snapshot = found.store.metrics.load()
    except Exception as exc:
        log.warning("metrics scrape could not read the store: %s", exc)
        raise ApiError(503, "unavailable", "the store did not answer") from None
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StoreCollector(snapshot, found.commands.clock()))
    registry.register(BreakerCollector(_breakers(found)))
    registry.register(StreamCollector(found.open_streams))
    registry.register(DeliveryCollector(_deliveries(found)))
    registry.register(TokenCollector(_token_totals(found)))
    encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
    return Response(encoder(registry), content_type=content_type)
