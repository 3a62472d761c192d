"""The one error family of agentq. Arguments stay simple: they cross Celery and pickle."""
from __future__ import annotations


class AgentqError(Exception):
    """Root of every error agentq raises on purpose.

    `code` names the cause for clients; `details` (plain JSON) says more, e.g. which
    settings passed which ceiling. Both may be set per instance.
    """

    code = "agentq_error"
    details = None

    def __init__(self, message: str = "", *, code: str | None = None, details=None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        if details is not None:
            self.details = details


class NotFound(AgentqError):
    code = "not_found"


class Conflict(AgentqError):
    """A state transition that the current state does not allow."""

    code = "conflict"


class InvalidInput(AgentqError):
    code = "invalid_input"


class Unavailable(AgentqError):
    """A service agentq depends on (the database) cannot be reached now; try again shortly."""

    code = "unavailable"


class Stale(AgentqError):
    """The conversation moved on under a step; its commit was rolled back, nothing written."""

    code = "stale"


class LogMoved(Stale):
    """The log no longer ends where a writer read it; nothing was written, and a writer
    that can decide again under the lock may try once more."""


class Forbidden(AgentqError):
    """The caller is known but may not do this (a decision only some keys or users may make)."""

    code = "forbidden"
