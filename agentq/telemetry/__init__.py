"""OpenTelemetry traces and GenAI metrics of every turn; nothing at all while they are off.

The only package that imports opentelemetry, and only once the operator's OTEL_*
environment asks for traces (`tracing`): one trace per turn, a span per attempt of each
step, `chat {model}`, `execute_tool {name}` and `invoke_agent {name}` spans in the GenAI
conventions (`attributes`); a sub-agent's child runs in its parent turn's trace.
See docs/tracing.md.
"""
from agentq.telemetry.spans import NO_SPAN, NoSpan, Tracing
from agentq.telemetry.tracing import tracing

__all__ = ["NO_SPAN", "NoSpan", "Tracing", "tracing"]
