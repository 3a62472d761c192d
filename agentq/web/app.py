"""The Flask app factory: `create_app(config=None, services=None)`, no app at import time.

`config` holds Flask settings (MAX_CONTENT_LENGTH, AGENTQ_SSE_KEEPALIVE_S, …); `services`
is what the app runs on, built from the AGENTQ_* environment when not given. Under
gunicorn: `gunicorn 'agentq.web.app:create_app()'`.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flask import Flask
from werkzeug.routing import BaseConverter

from agentq.telemetry import tracing
from agentq.web.errors import register_error_handlers
from agentq.web.routes import (
    agents,
    context,
    conversations,
    events,
    health,
    messages,
    metrics,
    profiles,
    schedules,
    tenant_tool_calls,
    timeline,
    tool_calls,
    ui,
    usage,
    webhooks,
)
from agentq.web.services import Services, build_services

DEFAULTS: dict[str, Any] = {
    "MAX_CONTENT_LENGTH": 1024 * 1024,  # 1 MiB: a larger body is 413
    "AGENTQ_SSE_KEEPALIVE_S": 15.0,
}


class IdConverter(BaseConverter):
    """Conversation and tool-call ids: up to 255 of [A-Za-z0-9_.:-]; anything else is no route."""

    regex = r"[A-Za-z0-9_.:\-]{1,255}"


def create_app(config: Mapping[str, Any] | None = None, services: Services | None = None) -> Flask:
    app = Flask(__name__)
    app.config.update(DEFAULTS)
    app.config.update(config or {})
    app.json.sort_keys = False  # type: ignore[attr-defined]
    app.url_map.converters["id"] = IdConverter
    app.url_map.strict_slashes = False
    if services is None:
        from agentq.config import Config

        services = build_services(Config.from_env())
    app.extensions["agentq"] = services
    for module in (health, conversations, messages, events, tool_calls, context, tenant_tool_calls, ui,
                   metrics, profiles, agents, webhooks, usage, timeline, schedules):
        app.register_blueprint(module.bp)
    register_error_handlers(app)
    tracing().instrument_flask(app)  # request spans, when OTEL_* turns tracing on
    return app
