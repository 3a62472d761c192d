"""`@operation`: one declaration per endpoint that both checks the request and documents it.

The wrapper authenticates, then parses the query, the headers and the JSON body with
the declared models, and hands them to the view; /openapi.json reads the same
declaration, so what is validated and what is documented are one thing.
"""
from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flask import g, request
from pydantic import BaseModel

from agentq.web.auth import authenticate
from agentq.web.errors import ApiError
from agentq.web.services import services

SSE = "text/event-stream"
MAX_DEPTH = 100
_UNSTORABLE = re.compile(r"[\x00\ud800-\udfff]")


@dataclass(frozen=True)
class Operation:
    """What an endpoint takes and answers; `answers` maps a status to a model (or SSE)."""

    summary: str
    answers: dict[int, type[BaseModel] | str]
    body: type[BaseModel] | None = None
    query: type[BaseModel] | None = None
    headers: type[BaseModel] | None = None
    errors: tuple[int, ...] = ()
    public: bool = False
    # Who may call, if not a tenant's key alone: sets g.scope (and what else it knows) or raises.
    auth: Callable[[], None] | None = None


def operation(summary: str, **declared: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare an endpoint; the view gets `query=`, `headers=`, `body=` as declared."""
    op = Operation(summary, **declared)

    def wrap(view: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(view)
        def run(**path: str) -> Any:
            if op.auth is not None:
                op.auth()
            elif not op.public:
                g.scope = authenticate(services().keys)
            parsed: dict[str, Any] = {}
            if op.query is not None:
                parsed["query"] = op.query.model_validate(request.args.to_dict())
            if op.headers is not None:
                parsed["headers"] = op.headers.model_validate(_declared_headers(op.headers))
            if op.body is not None:
                parsed["body"] = op.body.model_validate(json_body())
            return view(**path, **parsed)

        run.operation = op  # type: ignore[attr-defined]
        return run

    return wrap


def _declared_headers(model: type[BaseModel]) -> dict[str, str]:
    names = [info.alias or name for name, info in model.model_fields.items()]
    return {name: request.headers[name] for name in names if name in request.headers}


def json_body() -> Any:
    """The request body as JSON that every backend can store, or 415 / 413 / 400 / 422."""
    if not request.is_json:
        raise ApiError(415, "unsupported_media_type", "send the body as application/json")
    raw = request.get_data(cache=True)  # past MAX_CONTENT_LENGTH this raises 413
    try:
        data = json.loads(raw, parse_constant=_no_constants)
    except (ValueError, RecursionError) as exc:
        raise ApiError(400, "malformed_json", f"the body is not valid JSON: {exc}") from None
    problem = unstorable(data)
    if problem:
        raise ApiError(422, "validation_error", "the body holds a value no log can keep",
                       [{"loc": ["body"], "msg": problem, "type": "unstorable"}])
    return data


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def unstorable(value: Any, depth: int = 0) -> str | None:
    """Why `value` cannot go into the log as it is (NUL, lone surrogates, inf, depth), or None.

    Careful: Python's json accepts all of these, PostgreSQL's jsonb refuses them, so
    without this check the same request would work on SQLite and fail on PostgreSQL.
    """
    if depth > MAX_DEPTH:
        return f"nested deeper than {MAX_DEPTH} levels"
    if isinstance(value, str):
        return "strings must not hold NUL or unpaired surrogates" if _UNSTORABLE.search(value) else None
    if isinstance(value, float):
        return None if math.isfinite(value) else "numbers must be finite"
    if isinstance(value, dict):
        items = [*value.keys(), *value.values()]
    elif isinstance(value, list):
        items = value
    else:
        return None
    return next((p for p in (unstorable(item, depth + 1) for item in items) if p), None)
