"""Who a turn acts for: the tenant and user of the call that started it, or the system.

Commands check it against the conversation's tenant, tools get it in their ToolContext, and
the log records it with every resolution.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Scope:
    """Who a call acts for: the tenant and user of the entry call, or the system."""

    tenant: str
    user: str | None = None

    @property
    def is_system(self) -> bool:
        return self == SYSTEM_SCOPE

    def to_json(self) -> dict[str, Any]:
        return {"tenant": self.tenant, "user": self.user}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Scope:
        return cls(tenant=data["tenant"], user=data.get("user"))


SYSTEM_SCOPE = Scope(tenant="system", user=None)
