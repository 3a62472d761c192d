"""Liveness, readiness (database, broker, pub/sub reachable) and the OpenAPI document."""
from __future__ import annotations

import logging

from flask import Blueprint, current_app

from agentq.api.health import Health, Readiness
from agentq.web import present
from agentq.web.openapi import build_spec
from agentq.web.operation import operation
from agentq.web.services import services

log = logging.getLogger(__name__)
bp = Blueprint("health", __name__)


@bp.get("/healthz")
@operation("Liveness: the process answers", answers={200: Health}, public=True)
def healthz():
    return present.dump(Health(status="ok"))


@bp.get("/readyz")
@operation("Readiness: the database and the broker answer",
           answers={200: Readiness, 503: Readiness}, public=True)
def readyz():
    checks: dict[str, str] = {}
    for name, check in services().checks.items():
        try:
            check()
            checks[name] = "ok"
        except Exception as exc:
            log.warning("readiness check %s failed: %s", name, exc)
            checks[name] = f"failed: {type(exc).__name__}"
    ready = all(value == "ok" for value in checks.values())
    answer = Readiness(status="ready" if ready else "not_ready", checks=checks)
    return present.dump(answer), 200 if ready else 503


@bp.get("/openapi.json")
@operation("This API's OpenAPI 3.1 document", answers={200: "application/json"}, public=True)
def openapi():
    spec = current_app.extensions.get("agentq.openapi")
    if spec is None:
        spec = current_app.extensions["agentq.openapi"] = build_spec(current_app)
    return spec
