"""The declared request options of an answer round, checked once for every adapter.

`tool_choice` and `response_format` shape how the model answers the user; a summary
request (no tools, a transcript to condense) gets neither. Each adapter spells them in
its own API's words.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentq.core.request import Request
from agentq.core.settings import NamedTool, Settings
from agentq.providers.errors import ProviderError


@dataclass(frozen=True)
class AnswerOptions:
    """`tool_choice` ("auto", "none", "required" or a tool name) and the JSON schema of the
    answer, where the call takes them."""

    tool_choice: str | None = None
    tool_name: str | None = None
    schema_name: str = "answer"
    schema: dict[str, Any] | None = None
    strict: bool = True
    parallel_tool_calls: bool | None = None  # None: the API's default (several at once)


def answer_options(request: Request, settings: Settings, purpose: str) -> AnswerOptions:
    """What of `settings` this call sends; a named tool the request does not offer is a
    permanent error (the API would refuse every attempt)."""
    if purpose != "answer":
        return AnswerOptions()
    choice, name = None, None
    if request.tools and isinstance(settings.tool_choice, NamedTool):
        name = settings.tool_choice.name
        if name not in {tool.name for tool in request.tools}:
            raise ProviderError(f"tool_choice names {name!r}, which is not one of the "
                                "conversation's tools", code="invalid_tool_choice")
        choice = "tool"
    elif request.tools and isinstance(settings.tool_choice, str):  # auto, none, required
        choice = settings.tool_choice
    parallel = settings.parallel_tool_calls if request.tools else None
    out = settings.response_format
    if out is None:
        return AnswerOptions(choice, name, parallel_tool_calls=parallel)
    return AnswerOptions(choice, name, out.name, out.schema_, out.strict, parallel)
