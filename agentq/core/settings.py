"""Conversation settings: the declared shape of what a conversation is configured with."""
from __future__ import annotations

import re
from typing import Any, Literal
from urllib.parse import parse_qsl, urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

# Settings are stored in clear and shown back to clients, so they must never hold a secret.
_SECRET_NAMES = frozenset({
    "api_key", "apikey", "api-key", "x-api-key", "key", "secret", "token", "auth_token",
    "access_token", "authorization", "password",
})
_KEY_LOOKING = re.compile(r"^(sk|rk|pk)-[A-Za-z0-9_\-]{16,}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_USE_REF = (
    "settings must not hold an API key in clear: put the key in an environment variable "
    "and give that variable's name in api_key_ref"
)


def _normal(name: str) -> str:
    return name.strip().lower().replace(" ", "_")


def _find_secret(value: Any) -> bool:
    """Whether a nested value carries a field named like a secret, or a key-looking string."""
    if isinstance(value, dict):
        return any(
            (isinstance(k, str) and _normal(k) in _SECRET_NAMES) or _find_secret(v)
            for k, v in value.items()
        )
    if isinstance(value, list):
        return any(_find_secret(item) for item in value)
    return isinstance(value, str) and bool(_KEY_LOOKING.match(value.strip()))


class _Strict(BaseModel):
    # Inputs stay out of error messages: a rejected value may be a secret.
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)


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
    # Longest wait for the next bytes of a model response, per attempt; None means
    # llm_timeout_s. Shorter than the step's limit, a stalled connection is retried in time.
    read_timeout_s: float | None = Field(default=None, gt=0.0, le=86_400.0)


class Compaction(_Strict):
    """When to summarize (the rendered context passes `max_context_tokens`) and how."""

    max_context_tokens: int | None = Field(default=None, ge=64)
    min_keep_turns: int = Field(default=2, ge=1)
    # a tool result longer than this is shortened in the rendered context (never in the
    # log); None: a quarter of max_context_tokens, or no limit without a budget
    max_result_tokens: int | None = Field(default=None, ge=16)
    model: str | None = None
    prompt: str | None = None


class Settings(_Strict):
    """A conversation's settings, validated once when it is created."""

    provider: Literal["scripted", "openai", "anthropic"] = "scripted"
    model: str = "scripted"
    system: str = ""
    tools: list[str] | None = None
    script: list[ScriptedResponse] | None = None
    script_repeat: bool = False  # cycle through the script instead of echoing past its end
    limits: Limits = Field(default_factory=Limits)
    compaction: Compaction = Field(default_factory=Compaction)
    # Provider options (openai, anthropic); None means the provider's default. extra_body
    # adds fields to the request body (e.g. response_format); it never replaces the others.
    base_url: str | None = None
    api_key_ref: str | None = None  # the NAME of an environment variable holding the key
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    max_tokens: int | None = Field(default=None, ge=1, le=1_000_000)
    extra_body: dict[str, Any] | None = None

    @model_validator(mode="before")
    @classmethod
    def _no_key_in_clear(cls, data: Any) -> Any:
        if isinstance(data, dict):
            names = {_normal(k) for k in data if isinstance(k, str)}
            if names & _SECRET_NAMES or _find_secret(data.get("extra_body")):
                raise ValueError(_USE_REF)
        return data

    @field_validator("api_key_ref")
    @classmethod
    def _a_variable_name(cls, value: str | None) -> str | None:
        if value is not None and not _ENV_NAME.match(value):
            raise ValueError(
                "api_key_ref is the name of an environment variable (like OPENAI_API_KEY), "
                "never the key itself"
            )
        return value

    @field_validator("base_url")
    @classmethod
    def _no_credentials_in_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("base_url must be an http(s) URL")
        query_names = {_normal(name) for name, _ in parse_qsl(parts.query)}
        if parts.username or parts.password or query_names & _SECRET_NAMES:
            raise ValueError(_USE_REF)
        return value


def parse_settings(data: dict[str, Any] | None) -> Settings:
    return Settings.model_validate(data or {})
