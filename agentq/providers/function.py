"""Model functions: an offline model that is a Python function of what it is asked.

The scripted provider answers a round by its index, so it cannot react to what happened;
a model function reads the request (the messages, the tools offered, what the last round's
calls returned and with which status: a rejection, an error, an expiry) and answers
accordingly, so an agent's branches are tested without a provider key (docs/testing.md).
What the function returns is what one entry of a script says (docs/design.md §13), and it
is streamed as a script's is: the text in `chunks` deltas, tool call ids derived from the
step key, a `fail` raised on the attempts it names.

A model function is operator code, named by the function's name in the settings of the
operator's code agents (`profile: "function"`); a tenant's settings never name one (inv. 9,
`agentq.tenancy.policy`).
"""
from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from agentq.core.request import CallRef, Message, Request, ToolSpec
from agentq.core.settings import ScriptedResponse
from agentq.providers.base import CallContext, Delta, ModelResponse
from agentq.providers.errors import ProviderError
from agentq.providers.scripted import stream_answer, summary_answer

log = logging.getLogger(__name__)

NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,99}$")


@dataclass(frozen=True)
class ToolResult:
    """What one call of the last round returned: its status, and its output as the model
    reads it (a refusal's reason included), without the `[status]` mark before it."""

    call_id: str
    name: str
    args: dict[str, Any]
    status: str  # ok, error, rejected, expired, cancelled
    text: str


@dataclass(frozen=True)
class ModelRequest:
    """What a model function is asked: what a real model would be sent, and where it stands.

    `attempt` is 1 on a round's first try and one more on each retry after a failure;
    `rounds` counts the rounds the conversation committed before this one.
    """

    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]
    attempt: int
    rounds: int
    conversation_id: str

    @property
    def text(self) -> str:
        """The text of the last user message: what the turn was asked."""
        return next((m.text for m in reversed(self.messages) if m.role == "user"), "")

    @property
    def results(self) -> tuple[ToolResult, ...]:
        """What the last round's calls returned, in call order; none in a turn's first round."""
        end = len(self.messages)
        start = end
        while start > 0 and self.messages[start - 1].role == "tool":
            start -= 1
        if start == end or start == 0:
            return ()
        calls = {call.id: call for call in self.messages[start - 1].tool_calls}
        return tuple(_result(message, calls[message.tool_call_id])
                     for message in self.messages[start:end] if message.tool_call_id in calls)

    def result(self, name: str) -> ToolResult | None:
        """The last round's result of a call of the tool `name`, if it made one."""
        return next((r for r in self.results if r.name == name), None)


def _result(message: Message, call: CallRef) -> ToolResult:
    status = message.status or ("error" if message.is_error else "ok")
    text = message.text.removeprefix(f"[{status}] ") if status != "ok" else message.text
    return ToolResult(call.id, call.name, dict(call.args), status, text)


# What a model function returns: text alone, or an answer shaped as a script's entry.
Answer = str | Mapping[str, Any] | ScriptedResponse


class FunctionModel:
    """A model that is `function(request: ModelRequest) -> str | dict`, named for the settings.

    The dict is shaped as an entry of a script: `text`, `tool_calls` (`[{"name", "args"}]`),
    `chunks`, `delay_s`, `fail`. The function runs in the worker, once per attempt of a
    round; it should answer at once and depend on nothing but the request, as a model would.
    """

    def __init__(self, function: Callable[[ModelRequest], Answer], *, name: str | None = None
                 ) -> None:
        self.function = function
        self.name: str = name or str(getattr(function, "__name__", ""))
        if not NAME.match(self.name):
            raise ValueError(f"a model function's name is letters, digits, '_', '.' and '-' "
                             f"(give one with name=...), not {self.name!r}")

    def __repr__(self) -> str:
        return f"FunctionModel({self.name})"

    def answer(self, request: ModelRequest) -> ScriptedResponse:
        """What the function answers; a permanent ProviderError if it raised, or answered
        neither text nor an answer of a script's shape."""
        try:
            answered = self.function(request)
        except Exception as exc:
            log.exception("model function %s raised", self.name)
            raise ProviderError(f"the model function {self.name} raised "
                                f"{type(exc).__name__}: {exc}", code="model_function_failed") from None
        if isinstance(answered, str):
            return ScriptedResponse(text=answered)
        if isinstance(answered, ScriptedResponse):
            return answered
        try:
            return ScriptedResponse.model_validate(answered)
        except ValidationError as exc:
            raise ProviderError(f"the model function {self.name} answered neither text nor "
                                f"an answer shaped as a script's: {exc.errors()[0]['msg']}",
                                code="model_function_failed") from None


class FunctionModels:
    """The model functions of this process's code, by name; read-only once built."""

    def __init__(self, models: Iterable[FunctionModel] = ()) -> None:
        by_name: dict[str, FunctionModel] = {}
        for model in models:
            known = by_name.get(model.name)
            if known is not None and known.function is not model.function:
                raise ValueError(f"two model functions are named {model.name!r}")
            by_name[model.name] = model
        self._models = by_name

    def get(self, name: str) -> FunctionModel | None:
        return self._models.get(name)


class FunctionProvider:
    """Answers each round with the model function the settings name (`settings.model`)."""

    def __init__(self, models: FunctionModels) -> None:
        self._models = models

    def stream(
        self, request: Request, ctx: CallContext, cancel: threading.Event
    ) -> Iterator[Delta | ModelResponse]:
        if ctx.purpose == "summary":  # a compact step's summary is not the agent's to write
            answer = summary_answer(request)
        else:
            answer = self._model(request.model).answer(ModelRequest(
                system=request.system, messages=request.messages, tools=request.tools,
                attempt=ctx.attempt, rounds=ctx.rounds_committed,
                conversation_id=ctx.conversation_id))
        yield from stream_answer(request, answer, ctx, cancel)

    def _model(self, name: str) -> FunctionModel:
        found = self._models.get(name)
        if found is None:
            raise ProviderError(f"no model function {name!r} in this process: AGENTQ_TOOLS "
                                "names the modules of the agents that define one",
                                code="model_not_offered")
        return found
