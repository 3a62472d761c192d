"""A guardrail's run is a span of its model step, in the turn's trace; a trip marks it failed."""
from __future__ import annotations

from opentelemetry.trace import StatusCode

from agentq.commands import Commands
from agentq.config import Config
from agentq.runtime import Runtime
from agentq.tools import Registry
from tests.support.clock import Clock
from tests.support.drive import Recorder, drain
from tests.telemetry.test_step_spans import SCOPE, exported, post_in_request  # noqa: F401

MODULES = ["agentq.tools.demo", "tests.support.guardrails_for_tests"]


def test_each_guardrail_run_is_a_span_under_its_step_and_a_trip_is_an_error(
        exported, sqlite_store):  # noqa: F811
    traced, exporter = exported
    registry = Registry.from_modules(MODULES)
    runtime = Runtime(store=sqlite_store, registry=registry, pubsub=Recorder(),
                      config=Config(lease_s=30.0), clock=Clock(), sleep=lambda s: None)
    commands = Commands(sqlite_store, registry, clock=runtime.clock)
    conv = commands.create_conversation(SCOPE, {"script": [{"text": "hi"}],
                                                "input_guardrails": ["no_secrets"]})
    request, follow = post_in_request(traced, commands, conv.id, "the secret")
    drain(runtime, follow)
    spans = exporter.get_finished_spans()
    (guard,) = [s for s in spans if "guardrail:no_secrets" in s.name]
    (step,) = [s for s in spans if s.name.startswith("step ")]
    assert guard.parent is not None and guard.parent.span_id == step.context.span_id
    assert guard.context.trace_id == request.context.trace_id
    assert guard.status.status_code == StatusCode.ERROR
