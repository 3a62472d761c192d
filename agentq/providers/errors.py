"""The errors of the provider boundary: every SDK failure is translated into one of these.

`transient` says whether trying again can help; the retry policy and the step ledger read
only that flag, never SDK types. Arguments are plain values so the errors pickle (they
cross Celery).
"""
from __future__ import annotations

from typing import Any

from agentq.errors import AgentqError


class ProviderError(AgentqError):
    """A model call failed; `code` names the cause, `status` is the HTTP status if any."""

    def __init__(
        self,
        message: str,
        *,
        transient: bool = False,
        status: int | None = None,
        code: str = "provider_error",
        retry_after_s: float | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.transient = transient
        self.status = status
        self.code = code
        self.retry_after_s = retry_after_s
        self.details = details  # plain values the turn's `error` event carries, if it fails


class ContextTooLong(ProviderError):
    """The provider refused the request as too long: compact and retry, never just retry."""

    def __init__(self, message: str, *, status: int | None = None, code: str = "context_too_long") -> None:
        super().__init__(message, transient=False, status=status, code=code)


class ProviderTimeout(ProviderError):
    """The call timed out before the provider answered."""

    def __init__(self, message: str = "provider call timed out", *, code: str = "timeout") -> None:
        super().__init__(message, transient=True, code=code)


class ProviderUnavailable(ProviderError):
    """The configured provider has no adapter in this build."""

    def __init__(self, message: str, *, code: str = "provider_unavailable") -> None:
        super().__init__(message, transient=False, code=code)


class CallWaits(ProviderError):
    """No model call may go out before `until` (a datetime): the step is held until then,
    occupying no worker (agentq.runtime.held), and a `retry` notice says why."""

    def __init__(self, message: str, *, until=None, code: str = "call_waits",
                 details: dict[str, Any] | None = None) -> None:
        super().__init__(message, transient=False, code=code, details=details)
        self.until = until


class CircuitOpen(CallWaits):
    """The endpoint's circuit breaker is open: no call goes to it before `until`."""

    def __init__(
        self, message: str, *, until=None, endpoint: str = "", code: str = "circuit_open"
    ) -> None:
        super().__init__(message, until=until, code=code)
        self.endpoint = endpoint


class BudgetExceeded(ProviderError):
    """A token budget is spent: the call does not go out, and the turn fails (POST …/retry
    after the period resets runs it again). `details` say which budget (Overspent.details)."""

    def __init__(self, message: str, *, details: dict[str, Any] | None = None,
                 code: str = "budget_exceeded") -> None:
        super().__init__(message, transient=False, code=code, details=details)


class BudgetWaits(CallWaits):
    """A token budget is spent and the operator chose to wait: the step is held until the
    period resets (`until`), then the call is checked again."""

    def __init__(self, message: str, *, until=None, details: dict[str, Any] | None = None,
                 code: str = "budget_exceeded") -> None:
        super().__init__(message, until=until, code=code, details=details)


class BudgetAsks(CallWaits):
    """A budget's soft threshold is reached in a turn no person has decided on: the step
    opens a pending call of kind `budget` (agentq.core.budget_asks) and the turn waits for
    a person. `details` say which budget (Overspent.details)."""

    def __init__(self, message: str, *, details: dict[str, Any] | None = None,
                 code: str = "budget_asks") -> None:
        super().__init__(message, code=code, details=details)
