"""A server's `input_required` as a question for a person, and their answer as the
`inputResponses` and `requestState` of the call made again (MCP 2026-07-28).

Why agentq drives these rounds itself instead of the SDK's callbacks: a person answers
in minutes or days, long after the step that made the call ended, maybe on another
worker; so the question is recorded and the step ends, and the answer comes back as a new
step (agentq.core.elicitation). One question for a person per round: a form (a message
and the JSON Schema of the answer) or an address to visit (URL mode). A roots request
beside it is answered at once with no roots (agentq exposes no file system); sampling
and more than one question at once are not answered, and the call ends with an error
result that says so.
"""
from __future__ import annotations

from typing import Any

from mcp_types import (
    CreateMessageRequest,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    InputResponses,
    ListRootsRequest,
    ListRootsResult,
)

from agentq.tools.remote import Asked


def asked(result: InputRequiredResult) -> Asked | str:
    """The question of a result, or why agentq cannot put it to a person."""
    questions: list[tuple[str, dict[str, Any]]] = []
    ready: dict[str, Any] = {}
    for key, request in (result.input_requests or {}).items():
        if isinstance(request, ListRootsRequest):
            ready[key] = ListRootsResult(roots=[]).model_dump(mode="json", by_alias=True,
                                                              exclude_none=True)
        elif isinstance(request, ElicitRequest):
            questions.append((key, _question(request)))
        elif isinstance(request, CreateMessageRequest):
            return "the tool server asked for a model completion (sampling), which agentq does not give"
        else:
            return f"the tool server asked for input agentq does not give ({request.method})"
    if len(questions) > 1:
        return "the tool server asked several questions at once; agentq puts one at a time"
    resume: dict[str, Any] = {"request_state": result.request_state, "ready": ready}
    if not questions:
        return Asked({}, resume)  # nothing for a person: the call is made again at once
    key, question = questions[0]
    return Asked(question, {**resume, "key": key})


def _question(request: ElicitRequest) -> dict[str, Any]:
    params = request.params
    if isinstance(params, ElicitRequestFormParams):
        return {"mode": "form", "message": params.message,
                "requested_schema": params.requested_schema}
    return {"mode": "url", "message": params.message, "url": params.url}


def responses(elicitation: dict[str, Any] | None) -> tuple[InputResponses | None, str | None]:
    """The `inputResponses` and `requestState` to make the call again with, from the call's
    record of the question and the person's answer (None, None on a first attempt)."""
    if not elicitation or "resume" not in elicitation:
        return None, None
    resume = elicitation["resume"]
    out: dict[str, Any] = {key: ListRootsResult.model_validate(value)
                           for key, value in resume.get("ready", {}).items()}
    answer = elicitation.get("answer")
    if resume.get("key") is not None and answer is not None:
        out[resume["key"]] = ElicitResult(action=answer["action"], content=answer.get("content"))
    return (out or None), resume.get("request_state")
