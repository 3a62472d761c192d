"""Guardrails the operator's code offers: `@agentq.guardrail` functions, found as tools are, run as tools run.

A guardrail is a function of a text (the user's message, or the final answer) and,
optionally, a `GuardrailContext`; sync or `async def`. It answers a `GuardrailVerdict`
(or a bool: tripped or not). Settings name it; only the operator's code defines one, so a
tenant's agent may use it by name and never send code. It runs in the worker, on a thread
of its own with a time limit, as a tool does. A guardrail that raises or runs out of time
trips (fail closed): a check that could not say yes did not say yes.
"""
from __future__ import annotations

import importlib
import inspect
import logging
import re
from collections.abc import Callable, Iterable
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any

from pydantic_core import to_jsonable_python

from agentq.core.agents import AgentRef
from agentq.core.guardrails import MAX_INFO_CHARS, Phase, Verdict
from agentq.core.keys import canonical_json
from agentq.core.scope import Scope
from agentq.core.settings import GUARDRAIL_NAME
from agentq.process.threads import DaemonThreads
from agentq.tools.calls import Coroutines, awaited

log = logging.getLogger("agentq.tools")

DEFAULT_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class GuardrailVerdict:
    """What a guardrail function answers: `tripped` stops the turn; `info` says why (JSON)."""

    tripped: bool
    info: Any = None


@dataclass(frozen=True)
class GuardrailContext:
    """What a running guardrail may know of the turn it checks."""

    conversation_id: str
    phase: Phase
    scope: Scope  # who the turn acts for
    agent: AgentRef | None  # the agent version the conversation runs, if any
    step_key: str  # this run's key: the idempotency key of anything it records
    tool: str | None = None  # the tool whose call it checks (tool_input, tool_output)


@dataclass(frozen=True)
class Guardrail:
    """A guardrail function, by name; `parallel`: what an agent given it in Python asks by default."""

    name: str
    fn: Callable[..., Any]
    parallel: bool = False
    timeout_s: float = DEFAULT_TIMEOUT_S

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    @property
    def takes_context(self) -> bool:
        return len(inspect.signature(self.fn).parameters) >= 2


def guardrail(function: Callable[..., Any] | None = None, *, name: str | None = None,
              parallel: bool = False, timeout_s: float = DEFAULT_TIMEOUT_S) -> Any:
    """Make a function a guardrail: `fn(text)` or `fn(text, ctx)`, answering a
    `GuardrailVerdict` or a bool. Assign it to a module-level name of a module AGENTQ_TOOLS
    lists, as a tool."""
    def wrap(fn: Callable[..., Any]) -> Guardrail:
        found = name or fn.__name__
        if not re.match(GUARDRAIL_NAME, found):
            raise ValueError(f"guardrail name {found!r}: letters, digits, '_', '.', '-'; at most 64")
        count = len(inspect.signature(fn).parameters)
        if count not in (1, 2):
            raise ValueError(f"guardrail {found!r} takes the text and, optionally, a "
                             f"GuardrailContext; it takes {count} parameters")
        if timeout_s <= 0:
            raise ValueError(f"guardrail {found!r}: timeout_s must be positive")
        return Guardrail(found, fn, parallel, timeout_s)

    return wrap(function) if function is not None else wrap


class Guardrails:
    """The guardrails a deployment offers, by name; read-only once built."""

    def __init__(self, guardrails: Iterable[Guardrail] = ()) -> None:
        by_name: dict[str, Guardrail] = {}
        for item in guardrails:
            known = by_name.get(item.name)
            if known is not None and known is not item:
                raise ValueError(f"two guardrails are named {item.name!r}")
            by_name[item.name] = item
        self._by_name = by_name
        self._threads = DaemonThreads("agentq-guardrail")
        self._coroutines = Coroutines()

    @classmethod
    def from_modules(cls, modules: Iterable[str]) -> Guardrails:
        found: list[Guardrail] = []
        for module_name in modules:
            module = importlib.import_module(module_name)
            found.extend(v for v in vars(module).values() if isinstance(v, Guardrail))
        return cls(found)

    @property
    def names(self) -> list[str]:
        return list(self._by_name)

    def unknown(self, names: Iterable[str]) -> list[str]:
        """Those of `names` no module registered."""
        return [n for n in names if n not in self._by_name]

    def run(self, name: str, text: str, ctx: GuardrailContext) -> Verdict:
        """The guardrail's verdict on `text`; one that is missing, raises or times out trips."""
        item = self._by_name.get(name)
        if item is None:
            return Verdict(name, ctx.phase, True, {"error": f"no guardrail {name!r} is registered"})
        args = (text, ctx) if item.takes_context else (text,)
        coroutines = self._coroutines
        future = self._threads.submit(lambda: awaited(item.fn(*args), coroutines, item.timeout_s))
        where = {"guardrail": name, "conversation_id": ctx.conversation_id}
        try:
            error = future.exception(timeout=item.timeout_s)
        except FutureTimeout:
            log.warning("guardrail %s timed out after %gs", name, item.timeout_s, extra=where)
            return Verdict(name, ctx.phase, True, {"error": f"timed out after {item.timeout_s:g}s"})
        if error is not None:
            log.warning("guardrail %s raised %s: %s", name, type(error).__name__, error,
                        exc_info=(type(error), error, error.__traceback__), extra=where)
            return Verdict(name, ctx.phase, True, {"error": f"{type(error).__name__}: {error}"})
        return _verdict(name, ctx.phase, future.result())


def _verdict(name: str, phase: Phase, answer: Any) -> Verdict:
    """What the function answered, as a verdict; anything but a verdict or a bool trips."""
    if isinstance(answer, bool):
        return Verdict(name, phase, answer)
    if isinstance(answer, GuardrailVerdict):
        info = to_jsonable_python(answer.info, fallback=str, inf_nan_mode="null")
        return Verdict(name, phase, bool(answer.tripped), _bounded(info))
    return Verdict(name, phase, True, {"error": f"guardrail answered a {type(answer).__name__}, "
                                                "not a GuardrailVerdict or a bool"})


def _bounded(info: Any) -> Any:
    """`info`, or its JSON text cut to MAX_INFO_CHARS when longer."""
    try:
        text = canonical_json(info)
    except (TypeError, ValueError):
        return str(info)[:MAX_INFO_CHARS]
    return info if len(text) <= MAX_INFO_CHARS else text[:MAX_INFO_CHARS] + "…"
