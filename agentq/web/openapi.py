"""/openapi.json: an OpenAPI 3.1 document generated from the routes' `@operation` declarations.

pydantic writes the JSON schemas of the models (`models_json_schema`), apispec holds
the document together; every status a route can answer is listed, errors included.
"""
from __future__ import annotations

import re
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from apispec import APISpec
from flask import Flask
from pydantic import BaseModel, TypeAdapter
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from agentq.api.common import ID_PATTERN, ErrorAnswer, Token
from agentq.api.events import STREAM_DATA
from agentq.web.auth import USER_HEADER
from agentq.web.operation import SSE, Operation

REF = "#/components/schemas/{model}"
_PATH_ARG = re.compile(r"<(?:[^:<>]+:)?([^<>]+)>")
_DESCRIPTIONS = {
    200: "OK", 201: "Created", 202: "Accepted", 204: "No Content", 400: "Malformed JSON",
    401: "Missing, unknown or revoked API key", 403: "Your key may not read this",
    404: "No such conversation, call or agent (for this tenant)",
    409: "The current state does not allow it", 413: "Body larger than the limit",
    415: "Body is not application/json", 422: "Request does not match the declared model",
    429: "Too many open streams for this tenant: retry after Retry-After seconds",
    503: "Not ready, or the database cannot be reached now: retry after Retry-After seconds",
}


def _version() -> str:
    try:
        return version("agentq")
    except PackageNotFoundError:
        return "0"


def build_spec(app: Flask) -> dict[str, Any]:
    """The document for every route of `app` that declares an operation."""
    routes = _routes(app)
    spec = APISpec(title="agentq", version=_version(), openapi_version="3.1.0",
                   info={"description": "Durable LLM-agent conversations."})
    spec.components.security_scheme("bearer", {"type": "http", "scheme": "bearer"})
    refs = _register_models(spec, [op for _, _, op, _ in routes])
    paths: dict[str, dict[str, Any]] = {}
    for path, method, op, endpoint in routes:
        paths.setdefault(path, {})[method] = _operation(op, path, endpoint, refs)
    for path, operations in paths.items():
        spec.path(path=path, operations=operations)
    return spec.to_dict()


def _routes(app: Flask) -> list[tuple[str, str, Operation, str]]:
    """(path, method, operation, endpoint) of each route that declares an operation."""
    found = []
    for rule in sorted(app.url_map.iter_rules(), key=lambda r: r.rule):
        op = getattr(app.view_functions.get(rule.endpoint), "operation", None)
        if op is None:
            continue
        for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
            found.append((_PATH_ARG.sub(r"{\1}", rule.rule), method.lower(), op, rule.endpoint))
    return found


def _register_models(spec: APISpec, ops: list[Operation]) -> dict[type, dict[str, str]]:
    """Add every body and answer model (and what they use) to components; their $refs by model."""
    wanted: dict[tuple[type[BaseModel], JsonSchemaMode], None] = {(ErrorAnswer, "serialization"): None}
    if any(SSE in op.answers.values() for op in ops):
        wanted.update({(model, "serialization"): None for model in STREAM_DATA.values()})
    for op in ops:
        if op.body is not None:
            wanted[(op.body, "validation")] = None
        for answer in op.answers.values():
            if isinstance(answer, type):
                wanted[(answer, "serialization")] = None
    keys, schema = models_json_schema(list(wanted), ref_template=REF)
    for name, definition in schema.get("$defs", {}).items():
        spec.components.schema(name, definition)
    return {model: ref for (model, _), ref in keys.items()}


def _operation(
    op: Operation, path: str, endpoint: str, refs: dict[type[BaseModel], dict[str, str]]
) -> dict[str, Any]:
    """One operation object; its tag is the blueprint, its id the endpoint."""
    params = [_path_param(name) for name in re.findall(r"{([^}]+)}", path)]
    params += _model_params(op.query, "query") + _model_params(op.headers, "header")
    if not op.public:
        params.append({"name": USER_HEADER, "in": "header", "required": False,
                       "description": "the user this call acts for", "schema": _token_schema()})
    out: dict[str, Any] = {
        "tags": [endpoint.partition(".")[0]],
        "summary": op.summary,
        "operationId": endpoint,
        "parameters": params,
        "responses": _responses(op, path, refs),
        "security": [] if op.public else [{"bearer": []}],
    }
    if op.body is not None:
        out["requestBody"] = {"required": True, "content": {"application/json": {"schema": refs[op.body]}}}
    return out


def _path_param(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string", "pattern": ID_PATTERN}}


def _model_params(model: type[BaseModel] | None, where: str) -> list[dict[str, Any]]:
    if model is None:
        return []
    schema = model.model_json_schema(ref_template=REF)
    required = set(schema.get("required", []))
    params = []
    for name, prop in schema.get("properties", {}).items():
        prop = _not_null(prop)
        param = {"name": name, "in": where, "required": name in required, "schema": prop}
        description = model.model_fields[_field_name(model, name)].description
        if description:
            param["description"] = description
        params.append(param)
    return params


def _not_null(prop: dict[str, Any]) -> dict[str, Any]:
    """A parameter's schema without `null`: an absent parameter is the None of the model."""
    prop = {k: v for k, v in prop.items() if k not in ("title", "description")}
    branches = [b for b in prop.get("anyOf", []) if b != {"type": "null"}]
    if len(branches) == 1 and len(prop["anyOf"]) == 2:
        prop = {**{k: v for k, v in prop.items() if k != "anyOf"}, **branches[0]}
    if prop.get("default", 0) is None:
        del prop["default"]
    return prop


def _field_name(model: type[BaseModel], alias: str) -> str:
    return next(n for n, f in model.model_fields.items() if (f.alias or n) == alias)


def _token_schema() -> dict[str, Any]:
    return TypeAdapter(Token).json_schema()


def _responses(op: Operation, path: str, refs: dict[type[BaseModel], dict[str, str]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for status, answer in op.answers.items():
        if answer is None:
            out[str(status)] = {"description": _DESCRIPTIONS.get(status, "")}
        elif isinstance(answer, str):
            schema = _stream_frame(refs) if answer == SSE else {"type": "object"}
            out[str(status)] = {"description": _DESCRIPTIONS.get(status, ""),
                                "content": {answer: {"schema": schema}}}
        else:
            out[str(status)] = {"description": _DESCRIPTIONS.get(status, ""),
                                "content": {"application/json": {"schema": refs[answer]}}}
    for status in sorted(_error_statuses(op, path)):
        out[str(status)] = {"description": _DESCRIPTIONS[status],
                            "content": {"application/json": {"schema": refs[ErrorAnswer]}}}
    return out


def _stream_frame(refs: dict[type[BaseModel], dict[str, str]]) -> dict[str, Any]:
    """One Server-Sent Event (OpenAPI 3.1 has no itemSchema: `schema` describes each event)."""
    return {
        "type": "object",
        "required": ["event", "data"],
        "properties": {
            "event": {"enum": list(STREAM_DATA)},
            "id": {"type": "string", "pattern": "^[0-9]+$", "description": "the seq; only on `event`"},
            "data": {
                "type": "string",
                "contentMediaType": "application/json",
                "contentSchema": {"oneOf": [refs[model] for model in STREAM_DATA.values()]},
            },
            "retry": {"type": "integer"},
        },
    }


def _error_statuses(op: Operation, path: str) -> set[int]:
    statuses = set(op.errors)
    if not op.public:
        statuses |= {401, 422, 503}
    if "{" in path:
        statuses.add(404)
    if op.body is not None:
        statuses |= {400, 413, 415, 422}
    if op.query is not None or op.headers is not None:
        statuses.add(422)
    return statuses
