"""The one error family of agentq. Arguments stay simple: they cross Celery and pickle."""
from __future__ import annotations


class AgentqError(Exception):
    """Root of every error agentq raises on purpose."""

    code = "agentq_error"


class NotFound(AgentqError):
    code = "not_found"


class Conflict(AgentqError):
    """A state transition that the current state does not allow."""

    code = "conflict"


class InvalidInput(AgentqError):
    code = "invalid_input"


class Stale(AgentqError):
    """The conversation moved on under a step; its commit was rolled back, nothing written."""

    code = "stale"
