"""The shapes of /healthz and /readyz: whether the API is up, and whether it can serve."""
from __future__ import annotations

from typing import Literal

from agentq.api.common import AnswerModel


class Health(AnswerModel):
    status: Literal["ok"]


class Readiness(AnswerModel):
    status: Literal["ready", "not_ready"]
    checks: dict[str, str]
