"""A refusal of the core's rules, raised as the agentq error it names.

The core returns refusals as values (agentq.core.refusal); the commands raise them, so
the HTTP API answers each with its status (404, 409, 422) and code.
"""
from __future__ import annotations

from agentq.core.refusal import Refusal
from agentq.errors import AgentqError, Conflict, Forbidden, InvalidInput, NotFound

ERRORS: dict[str, type[AgentqError]] = {
    "invalid_input": InvalidInput, "conflict": Conflict, "not_found": NotFound,
    "forbidden": Forbidden,
}


def refused(refusal: Refusal) -> AgentqError:
    """The error to raise for `refusal`."""
    return ERRORS[refusal.kind](refusal.message, code=refusal.code, details=refusal.details)
