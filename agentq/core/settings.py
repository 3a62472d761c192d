"""Conversation settings: the declared shape of what a conversation is configured with."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ScriptedFailure(_Strict):
    status: int | Literal["timeout"]
    times: int = Field(default=1, ge=0)


class ScriptedCall(_Strict):
    name: str
    args: dict[str, Any] = Field(default_factory=dict)


class ScriptedResponse(_Strict):
    """One scripted model answer (DESIGN section 13)."""

    text: str = ""
    tool_calls: list[ScriptedCall] = Field(default_factory=list)
    chunks: int = Field(default=1, ge=1, le=10_000)
    delay_s: float = Field(default=0.0, ge=0.0, le=3600.0)
    fail: ScriptedFailure | None = None


class Limits(_Strict):
    max_rounds_per_turn: int = Field(default=25, ge=1, le=1000)
    tool_timeout_s: float = Field(default=60.0, gt=0.0, le=86_400.0)
    llm_timeout_s: float = Field(default=300.0, gt=0.0, le=86_400.0)


class Compaction(_Strict):
    max_context_tokens: int | None = Field(default=None, ge=64)
    min_keep_turns: int = Field(default=2, ge=1)
    model: str | None = None
    prompt: str | None = None


class Settings(_Strict):
    """A conversation's settings, validated once when it is created."""

    provider: Literal["scripted", "openai", "anthropic"] = "scripted"
    model: str = "scripted"
    system: str = ""
    tools: list[str] | None = None
    script: list[ScriptedResponse] | None = None
    limits: Limits = Field(default_factory=Limits)
    compaction: Compaction = Field(default_factory=Compaction)


def parse_settings(data: dict[str, Any] | None) -> Settings:
    return Settings.model_validate(data or {})
