"""Instructions that are code: `@agentq.instructions` functions that write an agent's system prompt.

An agent's `system=` may be such a function of the conversation's context (who the turn
acts for, the tenant, the agent's version, the system text the settings hold). The model
step calls it each time it calls the model, and the answer records what it produced
(agentq.core.guardrails.instructions_record), so an audit shows what the model was told.
Only the operator's code defines one; settings name it, a tenant's agent by name too.
"""
from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from agentq.core.agents import AgentRef
from agentq.core.scope import Scope
from agentq.core.settings import GUARDRAIL_NAME


@dataclass(frozen=True)
class InstructionsContext:
    """What instructions may read of the conversation they are written for."""

    conversation_id: str
    tenant: str
    scope: Scope  # who the turn acts for: `scope.user` is the acting user, if any
    agent: AgentRef | None  # the agent version the conversation runs, if any
    system: str  # the settings' own system text


@dataclass(frozen=True)
class Instructions:
    """An instructions function, by name."""

    name: str
    fn: Callable[[InstructionsContext], str]

    def __call__(self, ctx: InstructionsContext) -> str:
        return self.fn(ctx)


def instructions(function: Callable[[InstructionsContext], str] | None = None, *,
                 name: str | None = None) -> Any:
    """Make a function of an `InstructionsContext` the instructions an agent names
    (`system=fn`); it returns the system prompt."""
    def wrap(fn: Callable[[InstructionsContext], str]) -> Instructions:
        found = name or fn.__name__
        if not re.match(GUARDRAIL_NAME, found):
            raise ValueError(f"instructions name {found!r}: letters, digits, '_', '.', '-'")
        if inspect.iscoroutinefunction(fn) or len(inspect.signature(fn).parameters) != 1:
            raise ValueError(f"instructions {found!r} are a plain function of one "
                             "InstructionsContext")
        return Instructions(found, fn)

    return wrap(function) if function is not None else wrap


class InstructionSet:
    """The instructions functions a deployment offers, by name."""

    def __init__(self, items: Iterable[Instructions] = ()) -> None:
        by_name: dict[str, Instructions] = {}
        for item in items:
            known = by_name.get(item.name)
            if known is not None and known is not item:
                raise ValueError(f"two instructions functions are named {item.name!r}")
            by_name[item.name] = item
        self._by_name = by_name

    @classmethod
    def from_modules(cls, modules: Iterable[str]) -> InstructionSet:
        """Each module-level `Instructions`, and those an agent of the modules holds."""
        found: list[Instructions] = []
        for module_name in modules:
            for value in vars(importlib.import_module(module_name)).values():
                # an Agent's own (`system=fn`); a module (`agentq`) is not asked
                held = None if inspect.ismodule(value) else getattr(value, "instructions", None)
                found.extend(v for v in (value, held) if isinstance(v, Instructions))
        return cls(found)

    def get(self, name: str) -> Instructions | None:
        return self._by_name.get(name)

    def text(self, name: str, ctx: InstructionsContext) -> str:
        """The system prompt `name` writes for `ctx`; ValueError if none is registered or it
        does not answer a string (the model step fails its turn with it)."""
        item = self._by_name.get(name)
        if item is None:
            raise ValueError(f"no instructions {name!r} are registered in this process")
        text = item(ctx)
        if not isinstance(text, str):
            raise ValueError(f"instructions {name!r} returned a {type(text).__name__}, not a str")
        return text
