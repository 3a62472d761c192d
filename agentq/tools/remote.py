"""Tools served by a remote server (MCP): how settings name them and what a source must do.

Settings name a whole server (`"mcp:crm"`) or one of its tools (`"mcp:crm/lookup"`); the
model sees each such tool as `mcp__crm__lookup` (provider tool names allow only letters,
digits, `_` and `-`). The source itself (agentq.mcp) is the only code that speaks MCP;
this module keeps the registry free of the SDK.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Protocol

from agentq.core.breaker import Wait
from agentq.core.request import ToolSpec

REF_PREFIX = "mcp:"
MODEL_PREFIX = "mcp__"
BREAKER_PREFIX = "mcp:"  # a server's circuit breaker is the endpoint "mcp:NAME"
SERVER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,31}")
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_REF = re.compile(rf"{REF_PREFIX}({SERVER_NAME.pattern})(?:/([A-Za-z0-9_.-]{{1,64}}))?")


def is_ref(name: str) -> bool:
    return name.startswith(REF_PREFIX)


def parse_ref(ref: str) -> tuple[str, str | None] | None:
    """(server, tool or None for the whole server) of `mcp:server[/tool]`; None if malformed."""
    found = _REF.fullmatch(ref)
    return (found.group(1), found.group(2)) if found else None


def model_name(server: str, tool: str) -> str | None:
    """The name the model calls the tool by; None if it cannot be one (too long, odd chars)."""
    name = f"{MODEL_PREFIX}{server}__{tool}"
    return name if _TOOL_NAME.fullmatch(name) else None


def split_model_name(name: str) -> tuple[str, str] | None:
    """(server, tool) of a model-facing name `mcp__server__tool`; None for any other name."""
    if not name.startswith(MODEL_PREFIX):
        return None
    server, sep, tool = name[len(MODEL_PREFIX):].partition("__")
    return (server, tool) if sep and server and tool else None


@dataclass(frozen=True)
class RemoteResult:
    """A server's result: ("ok" | "error", output), and the images it held as content parts
    (core/parts.py's `{"type": "image", "media_type", "data"}`), in order."""

    status: str
    output: Any
    parts: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class Asked:
    """The server asked a person something instead of answering (MCP `input_required`).

    `question` is what they are shown (the server's message, and the schema of the answer
    it wants or the address it sends them to); `resume` is what the server needs back when
    the call is made again, opaque to agentq.
    """

    question: dict[str, Any]
    resume: dict[str, Any]
    expires_in_s: float = 86_400.0  # how long the person has to answer


class RemoteUnavailable(Exception):
    """The server could not be reached or answered with a failure, not a tool result."""


class RemoteTools(Protocol):
    """One operator-declared tool server, as the registry uses it."""

    @property
    def server(self) -> str: ...

    @property
    def queue(self) -> str | None: ...

    def listing(self) -> list[ToolSpec]:
        """The server's tools under their own names and schemas; RemoteUnavailable if down."""
        ...

    def call(
        self, tool: str, args: dict[str, Any], call_id: str, timeout_s: float,
        elicitation: dict[str, Any] | None = None,
    ) -> RemoteResult | Asked:
        """The result of one call, or the server's question for a person;
        RemoteUnavailable when no result came back. `elicitation` is the call's record of
        the last question and the person's answer (`ToolCallRecord.elicitation`), for a
        call made again with it."""
        ...


class ServerBreakers(Protocol):
    """The circuit breakers the calls to a server go through (agentq.providers.breakers):
    shared by every worker, so a server that keeps failing is called by none for a while."""

    def before_call(self, endpoint: str | None) -> Wait | None:
        """None: call now; else until when not to."""
        ...

    def record_server(self, endpoint: str, failure: str | None) -> None:
        """The call got an answer (None) or none at all (why)."""
        ...
