"""The shape of /v1/conversations/<id>/context: the request the next model call would send."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from agentq.api.common import AnswerModel
from agentq.api.conversations import SummarySpan


class SummaryInUse(SummarySpan):
    version: int
    text: str


class ContextValidation(AnswerModel):
    valid: bool
    problems: list[str]
    repairs: list[str]


class Eviction(AnswerModel):
    kind: Literal["tool_result", "summary", "assistant_msg", "user_msg"] = Field(
        default="tool_result", description="what was shortened")
    tool_call_id: str | None
    chars: int
    kept_chars: int


class Context(AnswerModel):
    profile: str
    kind: str | None = Field(description="the profile's provider kind (`function` for a "
                             "model function); null if it is gone")
    model: str
    request: dict[str, Any] = Field(description="the neutral request, as rendered and repaired")
    wire: dict[str, Any] = Field(description="the body in the provider's own shape")
    validation: ContextValidation
    summary: SummaryInUse | None = Field(description="the summary that stands for earlier events")
    evictions: list[Eviction] = Field(description="tool results shortened in this context only")
    context_tokens: int = Field(description="estimated tokens of the request")
