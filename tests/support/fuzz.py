"""Schemathesis' coverage and fuzzing phases on the API, one operation at a time, as its CLI
runs them (`schemathesis run --phases coverage,fuzzing`), with a fixed seed and budget.

`fuzz(schema, operation, real)` runs its engine on one operation and returns what it sent
and what failed, each failure with the request that caused it (as curl). Every other case
with valid path parameters names the real resources (`real`), so that its body reaches past
the 404; the rest keep the generated ids. A request the schema allows may be refused only
with a documented code of its own, for a rule no JSON schema states (`REFUSALS`): any other
refusal of it fails the run, as do a 5xx and an answer the spec does not declare.
`AGENTQ_FUZZ_SEED` and `AGENTQ_FUZZ_EXAMPLES` run it with another seed, or longer.
"""
from __future__ import annotations

import itertools
import json
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from schemathesis.config import SchemathesisConfig
from schemathesis.core.parameters import ParameterLocation
from schemathesis.engine import events, from_schema

SEED = int(os.environ.get("AGENTQ_FUZZ_SEED", "20261129"))
EXAMPLES = int(os.environ.get("AGENTQ_FUZZ_EXAMPLES", "10"))  # the fuzzing phase's, per operation
CHECKS = ("not_a_server_error", "status_code_conformance", "content_type_conformance",
          "response_schema_conformance", "positive_data_acceptance", "negative_data_rejection")

# Every operation /openapi.json declares, as (method, path).
OPERATIONS = {
    ("get", "/healthz"), ("get", "/readyz"), ("get", "/openapi.json"),
    ("post", "/v1/conversations"), ("get", "/v1/conversations"),
    ("get", "/v1/conversations/{conversation_id}"), ("delete", "/v1/conversations/{conversation_id}"),
    ("post", "/v1/conversations/{conversation_id}/messages"),
    ("get", "/v1/conversations/{conversation_id}/events"),
    ("get", "/v1/conversations/{conversation_id}/stream"),
    ("get", "/v1/conversations/{conversation_id}/tool-calls"),
    ("post", "/v1/conversations/{conversation_id}/tool-calls/{call_id}/resolution"),
    ("get", "/v1/conversations/{conversation_id}/tool-calls/{call_id}/context"),
    ("get", "/v1/conversations/{conversation_id}/context"),
    ("post", "/v1/conversations/{conversation_id}/cancel"),
    ("post", "/v1/conversations/{conversation_id}/retry"),
    ("post", "/v1/conversations/{conversation_id}/fork"),
    ("get", "/v1/tool-calls"), ("get", "/v1/usage"),
    ("get", "/v1/profiles"), ("put", "/v1/profiles/{profile}/key"),
    ("delete", "/v1/profiles/{profile}/key"),
    ("post", "/v1/agents"), ("get", "/v1/agents"), ("get", "/v1/agents/{name}"),
    ("post", "/v1/agents/{name}/versions"), ("get", "/v1/agents/{name}/versions"),
    ("get", "/v1/agents/{name}/versions/{version}"),
    ("post", "/v1/webhooks"), ("get", "/v1/webhooks"), ("get", "/v1/webhooks/{webhook_id}"),
    ("patch", "/v1/webhooks/{webhook_id}"), ("delete", "/v1/webhooks/{webhook_id}"),
    ("post", "/v1/webhooks/{webhook_id}/rotate"), ("get", "/v1/webhooks/{webhook_id}/deliveries"),
    ("post", "/v1/conversations/{conversation_id}/handoff"),
    ("get", "/v1/usage/overview"),
    ("get", "/v1/conversations/{conversation_id}/turns/{turn_id}/timeline"),
    ("get", "/v1/conversations/{conversation_id}/tree"),
    ("post", "/v1/schedules"), ("get", "/v1/schedules"), ("get", "/v1/schedules/{schedule_id}"),
    ("post", "/v1/schedules/{schedule_id}/pause"), ("post", "/v1/schedules/{schedule_id}/resume"),
    ("delete", "/v1/schedules/{schedule_id}"), ("get", "/v1/schedules/{schedule_id}/runs"),
}

_SETTINGS_RULES = {"unknown_profile", "model_required", "model_not_offered", "extra_body_refused",
                   "above_ceiling", "conflicting_settings", "unknown_tool", "unknown_agent",
                   "unknown_guardrail", "unknown_instructions", "forbidden_setting"}
# Codes that may refuse a request the schema allows, by operation: each names a rule beyond
# what a JSON schema states (the operator's policy, the tools and agents there are, how
# settings relate, what an image's bytes are, where a URL's host is, how a range's ends
# relate), and docs/api.md documents each.
REFUSALS: dict[str, set[str]] = {
    "POST /v1/conversations": _SETTINGS_RULES | {"not_overridable", "invalid_overrides"},
    "POST /v1/agents": _SETTINGS_RULES | {"invalid_agent"},
    "POST /v1/agents/{name}/versions": _SETTINGS_RULES | {"invalid_agent"},
    "POST /v1/conversations/{conversation_id}/messages": {"invalid_content", "idempotency_key_reused"},
    "POST /v1/webhooks": {"url_refused"},
    "PATCH /v1/webhooks/{webhook_id}": {"url_refused"},
    "GET /v1/usage": {"invalid_range"},
    # the target must be an agent of the tenant, its settings admitted as a conversation's
    "POST /v1/conversations/{conversation_id}/handoff": _SETTINGS_RULES,
    "GET /v1/usage/overview": {"invalid_range"},
    # edited arguments: only with an approval, of an editable tool's call, fitting its schema
    "POST /v1/conversations/{conversation_id}/tool-calls/{call_id}/resolution": {
        "edits_need_approval", "not_editable", "invalid_tool_args"},
    "POST /v1/schedules": {"invalid_cron", "invalid_timezone", "invalid_schedule",
                           "interval_too_short", "above_ceiling", "unknown_agent",
                           "unknown_conversation", "invalid_content"},
}


@dataclass
class Outcome:
    """What one run sent (cases by phase) and what failed, said so a reader can replay it."""

    cases: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)


def configured(*, headers: dict[str, str], fixed: dict[str, str] | None = None) -> SchemathesisConfig:
    """The run's configuration: two phases, the checks, the seed, `headers` on every request
    and `fixed` parameters (`query.until_idle`: a stream that ends)."""
    return SchemathesisConfig.from_dict({
        "seed": SEED,
        "headers": headers,
        "parameters": fixed or {},
        # NUL is valid JSON that no PostgreSQL text holds: 422 (test_api_errors), which a
        # JSON schema cannot declare. No example database: a run is its seed alone.
        "generation": {"allow-x00": False, "max-examples": EXAMPLES, "database": "none"},
        "phases": {"examples": {"enabled": False}, "stateful": {"enabled": False},
                   "coverage": {"enabled": True}, "fuzzing": {"enabled": True}},
        "checks": {"enabled": False, **{name: {"enabled": True} for name in CHECKS}},
    })


def fuzz(schema: Any, operation: tuple[str, str], real: dict[str, str]) -> Outcome:
    """Run both phases on one operation of `schema` (a loaded schemathesis schema)."""
    method, path = operation
    schema.hook("map_case")(_aimed_at(real))
    schema.hook("filter_failure")(_undocumented)
    outcome = Outcome()
    for event in from_schema(schema.include(method=method.upper(), path=path)).execute():
        if isinstance(event, events.ScenarioFinished):
            outcome.cases[event.phase.value] += len(event.recorder.cases)
            outcome.failures += _failures(event.recorder)
        elif isinstance(event, events.NonFatalError):
            outcome.failures.append(f"{event.label}: {event.info.title}: {event.info.message}")
        elif isinstance(event, events.FatalError):
            outcome.failures.append(f"the run stopped: {event.exception!r}")
    return outcome


def _aimed_at(real: dict[str, str]) -> Any:
    every_other = itertools.cycle((True, False))

    def map_case(context: Any, case: Any) -> Any:
        """Every other case whose path parameters are valid names the real resources."""
        del context
        path = case.meta.components.get(ParameterLocation.PATH) if case.meta else None
        if path is not None and path.mode.is_positive and next(every_other):
            case.path_parameters = {name: real[name] for name in case.path_parameters}
        return case

    return map_case


def _undocumented(context: Any, failure: Any, case: Any, response: Any) -> bool:
    """filter_failure: keep every failure but a refusal with a code REFUSALS allows here."""
    del context
    if "positive_data_acceptance" not in type(failure).checks or response.status_code != 422:
        return True
    return _code(response.content) not in REFUSALS.get(case.operation.label, set())


def _code(content: bytes | None) -> str | None:
    try:
        return json.loads(content or b"")["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return None


def _failures(recorder: Any) -> list[str]:
    said = []
    for case_id, checks in recorder.checks.items():
        for check in checks:
            if check.failure_info is None:
                continue
            case = recorder.cases[case_id].value
            interaction = recorder.interactions.get(case_id)
            answer = interaction.response if interaction is not None else None
            body = (answer.content or b"")[:500].decode(errors="replace") if answer else ""
            said.append(f"{recorder.label}: {check.name}: {check.failure_info.failure.title}\n"
                        f"  {case.as_curl_command()}\n  -> {answer.status_code if answer else '?'} {body}")
    return said
