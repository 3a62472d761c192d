"""One frozen Config read from AGENTQ_* variables, with embedded defaults, passed down.

Nothing below the CLI and the worker module reads the environment: they build a Config
once and hand it to what they create.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

EMBEDDED_BROKER = "memory://"
EMBEDDED_PUBSUB = "embedded://"
DEFAULT_TOOLS = ("agentq.tools.demo",)


def _float(env: Mapping[str, str], name: str, default: float, *, zero: bool = False) -> float:
    """A positive number (or zero, with `zero`); unset or empty, `default`."""
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number, got {raw!r}") from None
    if value < 0 or (value == 0 and not zero):
        raise ValueError(f"{name} must be {'zero or ' if zero else ''}positive, got {raw!r}")
    return value


def _choice(env: Mapping[str, str], name: str, choices: tuple[str, ...], default: str) -> str:
    raw = (env.get(name) or default).strip().lower()
    if raw not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}, got {env.get(name)!r}")
    return raw


def _flag(env: Mapping[str, str], name: str, default: bool = False) -> bool:
    raw = env.get(name, "").strip().lower()
    if not raw:
        return default
    if raw not in ("1", "true", "yes", "on", "0", "false", "no", "off"):
        raise ValueError(f"{name} must be on or off, got {env.get(name)!r}")
    return raw in ("1", "true", "yes", "on")


def _tools(env: Mapping[str, str], demo: bool) -> tuple[str, ...]:
    """AGENTQ_TOOLS; unset, the demo tools in demo mode and none otherwise ("none": none)."""
    raw = env.get("AGENTQ_TOOLS", "").strip()
    if raw.lower() == "none":
        return ()
    named = tuple(t.strip() for t in raw.split(",") if t.strip())
    return named or (DEFAULT_TOOLS if demo else ())


@dataclass(frozen=True)
class Config:
    """Everything a process of agentq needs to know about its deployment."""

    database_url: str = "sqlite:///agentq.db"
    broker_url: str = EMBEDDED_BROKER
    redis_url: str = EMBEDDED_PUBSUB
    tools: tuple[str, ...] = DEFAULT_TOOLS
    api_key: str | None = field(default=None, repr=False)
    lease_s: float = 6.0  # renewed every 2 s: a dead worker's step moves on within seconds
    sweep_s: float = 15.0
    eta_horizon_s: float = 120.0
    max_attempts: int = 5
    # AGENTQ_STEPS_IN_FLIGHT: steps one process runs at once at most; more tasks wait unclaimed
    # (and at most as many as its pooled connections between their claim and their work)
    steps_in_flight: int = 1000
    # AGENTQ_EVENT_CACHE: conversations whose decoded events a worker keeps (0: none)
    event_cache: int = 1000
    # AGENTQ_EVENT_CACHE_MB: about how much each of a worker's two caches (decoded events,
    # rendered turns) holds at most, whatever the count
    event_cache_mb: float = 64.0
    audit: bool = False
    audit_ttl_s: float = 7 * 24 * 3600.0
    log_format: str = "plain"
    metrics_token: str | None = field(default=None, repr=False)
    # AGENTQ_OPERATOR_KEY: a bearer key of the operator's own, for reads across tenants
    # (GET /v1/usage); unset, no request reads across tenants.
    operator_key: str | None = field(default=None, repr=False)
    # Demo mode: the scripted profile and the demo tools are offered unless named otherwise.
    # AGENTQ_DEMO; unset, on with the embedded broker and off with a named one.
    demo: bool = True
    policy_path: str | None = None  # AGENTQ_POLICY: the operator's profiles, ceilings, tenants
    # AGENTQ_ENCRYPTION_KEYS: Fernet keys sealing tenants' own keys, newest first
    encryption_keys: str | None = field(default=None, repr=False)
    # AGENTQ_DELTA_WINDOW_S: a model's deltas that come within this long of the last one
    # published are published together, one Redis round trip (0: each delta at once). Each
    # publish costs about a Redis round trip of CPU; at 0.1 s an answer's publishes cost
    # about a tenth of a step, and a reader sees a piece about 0.06 s late (docs/benchmarks.md)
    delta_window_s: float = 0.1
    breaker_failures: int = 5
    breaker_open_s: float = 30.0
    # Live streams of one API process: a tenant's cap, a stream's buffer of notices, the
    # longest a write to a client may make no progress before the stream is dropped.
    max_streams_per_tenant: int = 1000
    stream_buffer: int = 1000
    stream_stall_s: float = 30.0
    # AGENTQ_TOOL_RESULT_MAX_CHARS: a server tool's output beyond this many characters is cut
    # (saying so); 32,000 is about 8,000 tokens, room for several results in a 32k context.
    tool_result_max_chars: int = 32_000
    # Webhooks (agentq.webhooks): the operator may allow http and loopback receivers (a
    # test, a private deployment); tenants never can. Caps are per tenant.
    webhook_allow_http: bool = False
    webhook_allow_loopback: bool = False
    webhook_max_endpoints: int = 10
    webhook_in_flight: int = 4
    webhook_timeout_s: float = 10.0
    webhook_lease_s: float = 60.0
    webhook_poll_s: float = 2.0
    webhook_disable_after_s: float = 86_400.0
    # Schedules (agentq.commands.firing): how often beat sends a tick, and how late a slot
    # may be and still count as on time (older ones follow the schedule's catch-up rule).
    schedule_tick_s: float = 1.0
    schedule_grace_s: float = 30.0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Config:
        env = os.environ if env is None else env
        broker_url = env.get("AGENTQ_BROKER_URL") or cls.broker_url
        # One default for every process of a deployment, so `agentq policy` in a shell
        # says what its processes do: the demo is on in one process on the embedded broker
        # (`agentq dev`), off once a broker is named (the Procfile, compose, any fleet).
        demo = _flag(env, "AGENTQ_DEMO", default=broker_url.startswith(EMBEDDED_BROKER))
        return cls(
            database_url=env.get("AGENTQ_DATABASE_URL") or cls.database_url,
            broker_url=broker_url,
            redis_url=env.get("AGENTQ_REDIS_URL") or cls.redis_url,
            tools=_tools(env, demo),
            api_key=env.get("AGENTQ_API_KEY") or None,
            lease_s=_float(env, "AGENTQ_LEASE_S", cls.lease_s),
            sweep_s=_float(env, "AGENTQ_SWEEP_S", cls.sweep_s),
            eta_horizon_s=_float(env, "AGENTQ_ETA_HORIZON_S", cls.eta_horizon_s),
            max_attempts=int(_float(env, "AGENTQ_MAX_ATTEMPTS", cls.max_attempts)),
            steps_in_flight=max(1, int(_float(env, "AGENTQ_STEPS_IN_FLIGHT",
                                              cls.steps_in_flight))),
            event_cache=int(_float(env, "AGENTQ_EVENT_CACHE", cls.event_cache)),
            event_cache_mb=_float(env, "AGENTQ_EVENT_CACHE_MB", cls.event_cache_mb),
            audit=_flag(env, "AGENTQ_AUDIT"),
            audit_ttl_s=_float(env, "AGENTQ_AUDIT_TTL_S", cls.audit_ttl_s),
            log_format=_choice(env, "AGENTQ_LOG_FORMAT", ("plain", "json"), cls.log_format),
            metrics_token=env.get("AGENTQ_METRICS_TOKEN") or None,
            operator_key=env.get("AGENTQ_OPERATOR_KEY") or None,
            demo=demo,
            policy_path=env.get("AGENTQ_POLICY") or None,
            encryption_keys=env.get("AGENTQ_ENCRYPTION_KEYS") or None,
            delta_window_s=_float(env, "AGENTQ_DELTA_WINDOW_S", cls.delta_window_s, zero=True),
            breaker_failures=int(_float(env, "AGENTQ_BREAKER_FAILURES", cls.breaker_failures)),
            breaker_open_s=_float(env, "AGENTQ_BREAKER_OPEN_S", cls.breaker_open_s),
            max_streams_per_tenant=int(_float(env, "AGENTQ_MAX_STREAMS_PER_TENANT",
                                              cls.max_streams_per_tenant)),
            stream_buffer=int(_float(env, "AGENTQ_STREAM_BUFFER", cls.stream_buffer)),
            stream_stall_s=_float(env, "AGENTQ_STREAM_STALL_S", cls.stream_stall_s),
            tool_result_max_chars=int(_float(env, "AGENTQ_TOOL_RESULT_MAX_CHARS",
                                             cls.tool_result_max_chars)),
            webhook_allow_http=_flag(env, "AGENTQ_WEBHOOK_ALLOW_HTTP"),
            webhook_allow_loopback=_flag(env, "AGENTQ_WEBHOOK_ALLOW_LOOPBACK"),
            webhook_max_endpoints=int(_float(env, "AGENTQ_WEBHOOK_MAX_ENDPOINTS",
                                             cls.webhook_max_endpoints)),
            webhook_in_flight=int(_float(env, "AGENTQ_WEBHOOK_IN_FLIGHT", cls.webhook_in_flight)),
            webhook_timeout_s=_float(env, "AGENTQ_WEBHOOK_TIMEOUT_S", cls.webhook_timeout_s),
            webhook_lease_s=_float(env, "AGENTQ_WEBHOOK_LEASE_S", cls.webhook_lease_s),
            webhook_poll_s=_float(env, "AGENTQ_WEBHOOK_POLL_S", cls.webhook_poll_s),
            webhook_disable_after_s=_float(env, "AGENTQ_WEBHOOK_DISABLE_AFTER_S",
                                           cls.webhook_disable_after_s),
            schedule_tick_s=_float(env, "AGENTQ_SCHEDULE_TICK_S", cls.schedule_tick_s),
            schedule_grace_s=_float(env, "AGENTQ_SCHEDULE_GRACE_S", cls.schedule_grace_s),
        )

    @property
    def embedded_broker(self) -> bool:
        return self.broker_url.startswith("memory://")

    @property
    def event_cache_bytes(self) -> int:
        return int(self.event_cache_mb * 2**20)

    def with_(self, **changes: Any) -> Config:
        return replace(self, **changes)
