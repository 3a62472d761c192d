"""A request a rule of the core refuses, as a value: the commands translate it to an error.

The core cannot raise agentq's errors (they belong to a layer above it), so a classifier
returns a `Refusal` saying which kind of error it is; `agentq.commands` raises it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

RefusalKind = Literal["invalid_input", "conflict", "not_found", "forbidden"]


@dataclass(frozen=True)
class Refusal:
    """Why a request is refused: `kind` names the error, `code` and `details` refine it."""

    kind: RefusalKind
    message: str
    code: str | None = None
    details: dict[str, Any] | None = None

    @classmethod
    def invalid(cls, message: str, *, code: str | None = None) -> Refusal:
        return cls("invalid_input", message, code=code)

    @classmethod
    def conflict(cls, message: str, *, details: dict[str, Any] | None = None) -> Refusal:
        return cls("conflict", message, details=details)

    @classmethod
    def not_found(cls, message: str) -> Refusal:
        return cls("not_found", message)

    @classmethod
    def forbidden(cls, message: str, *, details: dict[str, Any] | None = None) -> Refusal:
        return cls("forbidden", message, details=details)
