"""What a tool is: `@tool` turns a typed function into a `Tool`, its options checked.

Why no global registry: a module-level mutable singleton makes import order matter and
tests leak into each other, so registries (tools/registry.py) are built explicitly from
`Tool` values. A function that cannot be a tool (a parameter without a type hint, a type
JSON Schema cannot express, a generator) fails at decoration, that is at import, with what
to change.
"""
from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

import docstring_parser
from pydantic import BaseModel, ValidationError

from agentq.core.deciders import Deciders
from agentq.core.once import EFFECTS, Effect
from agentq.core.request import ToolSpec
from agentq.core.scope import Scope
from agentq.errors import AgentqError
from agentq.tools.schema import (
    ToolDefinitionError,
    clean_schema,
    param_docs,
    signature_model,
    tool_description,
)

Executor = Literal["server", "human", "client"]
EXECUTORS: tuple[str, ...] = ("server", "human", "client")
DEFAULT_EXPIRES_IN_S = 86_400.0
# Whether one call of a tool waits for a person's approval: always, never, or per call
# from its (validated) arguments and the scope it acts for.
NeedsApproval = bool | Callable[[dict[str, Any], Scope], bool]
# What a `once` tool runs on takeover to learn whether a started run took effect:
# (validated args, ToolContext) -> Ran | DidNotRun | CannotTell, or an awaitable of one.
Reconcile = Callable[..., Any]


class ToolArgsError(AgentqError):
    """Arguments that do not fit a tool's signature; the message is written for the model."""

    code = "invalid_tool_args"


@dataclass(frozen=True)
class Tool:
    """A typed function offered to the model: its argument model and how it runs.

    Still callable like the function it wraps. Both times are in seconds, named as the
    decorator names them: `timeout` None means the conversation's limit; `expires_in` is
    set for human and client tools, and for server tools that need approval (how long a
    person has to decide).
    """

    name: str
    description: str
    fn: Callable[..., Any]
    args_model: type[BaseModel]
    context_param: str | None = None
    executor: Executor = "server"
    expires_in: float | None = None
    timeout: float | None = None
    requires_user_scope: bool = False
    queue: str | None = None  # the Celery queue its calls go to (None: agentq.worker.queues.TOOLS)
    needs_approval: NeedsApproval = False
    effect: Effect = "idempotent"  # "once": never run again blindly (agentq.core.once)
    reconcile: Reconcile | None = None
    editable: bool = False  # a person may edit the arguments of a call they approve
    deciders: Deciders | None = None  # who may decide its calls (None: the policy's, or anyone)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    @functools.cached_property
    def spec(self) -> ToolSpec:
        schema = clean_schema(self.args_model.model_json_schema())
        schema.setdefault("properties", {})
        schema.setdefault("required", [])
        return ToolSpec(name=self.name, description=self.description, parameters=schema)

    def validate(self, args: Any) -> dict[str, Any]:
        """The coerced arguments, or ToolArgsError saying what is wrong."""
        if not isinstance(args, dict):
            raise ToolArgsError(f"arguments must be a JSON object, got {type(args).__name__}")
        try:
            model = self.args_model.model_validate(args)
        except ValidationError as exc:
            raise ToolArgsError(_readable(exc)) from None
        return dict(model)

    def gated(self, args: dict[str, Any], scope: Scope) -> bool:
        """Whether this call waits for a person's approval before it runs.

        Careful: a deciding function that raises gates the call (fail closed): a broken
        rule must not let a refund through unasked.
        """
        rule = self.needs_approval
        if not callable(rule):
            return bool(rule)
        try:
            return bool(rule(self.validate(args), scope))
        except Exception:  # noqa: BLE001 - any failure of the operator's rule means "ask"
            return True


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    executor: Executor = "server",
    expires_in: float | None = None,
    timeout: float | None = None,
    requires_user_scope: bool = False,
    queue: str | None = None,
    needs_approval: NeedsApproval = False,
    effect: Effect = "idempotent",
    reconcile: Reconcile | None = None,
    editable: bool = False,
    deciders: Deciders | Iterable[str] | None = None,
) -> Any:
    """Make a `Tool` of a typed function; usable bare (`@tool`) or with options (`@tool(...)`).

    `queue` sends its calls to a Celery queue of their own, for workers started with
    `-Q <queue>` (a slow or heavy tool then holds none of the other tools' workers).
    `needs_approval` (True, or `fn(args, scope) -> bool` deciding per call) makes a server
    tool's call wait until a person approves its exact arguments; `expires_in` is then how
    long they have before the system refuses it. `effect="once"` says a second run costs
    something the first cannot undo: a run found started and unfinished is never run
    again blindly; `reconcile(args, ctx)` tells, if it can, whether it took effect
    (docs/tools.md). `editable` lets the person who approves a call change its arguments
    (checked against the schema); `deciders` (a `Deciders`, or role names) says who may
    decide its calls (agentq.core.deciders).
    """

    def wrap(function: Callable[..., Any]) -> Tool:
        _check_options(executor, expires_in, timeout, queue, needs_approval)
        _check_effect(executor, effect, reconcile)
        _check_people(editable, deciders, executor, needs_approval)
        rule = None if deciders is None else Deciders.of(deciders)
        tool_name: str = name or str(getattr(function, "__name__", ""))
        _check_callable(function, tool_name)
        doc = docstring_parser.parse(inspect.getdoc(function) or "")
        args_model, context_param = signature_model(function, tool_name, param_docs(doc))
        waits = executor != "server" or needs_approval is not False
        expires = float(expires_in or DEFAULT_EXPIRES_IN_S) if waits else None
        return Tool(
            name=tool_name,
            description=tool_description(doc),
            fn=function,
            args_model=args_model,
            context_param=context_param,
            executor=executor,
            expires_in=expires,
            timeout=None if timeout is None else float(timeout),
            requires_user_scope=requires_user_scope,
            queue=queue,
            needs_approval=needs_approval,
            effect=effect,
            reconcile=reconcile,
            editable=editable,
            deciders=rule,
        )

    return wrap(fn) if fn is not None else wrap


QUEUE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,99}")


def _check_options(
    executor: str, expires_in: float | None, timeout: float | None, queue: str | None,
    needs_approval: NeedsApproval,
) -> None:
    if executor not in EXECUTORS:
        raise ValueError(f"executor must be one of {', '.join(EXECUTORS)}, not {executor!r}")
    if not (isinstance(needs_approval, bool) or callable(needs_approval)):
        raise ValueError("needs_approval is True, False, or a function (args, scope) -> bool")
    if needs_approval is not False and executor != "server":
        raise ValueError("needs_approval is for server tools: a person already answers "
                         f"a {executor} tool's calls")
    waits = executor != "server" or needs_approval is not False
    if expires_in is not None and (not waits or expires_in <= 0):
        raise ValueError("expires_in is a positive number of seconds, for human and client "
                         "tools and tools that need approval")
    if timeout is not None and (executor != "server" or timeout <= 0):
        raise ValueError("timeout is a positive number of seconds, for server tools")
    if queue is not None and (executor != "server" or not QUEUE_NAME.fullmatch(queue)):
        raise ValueError("queue names a Celery queue (letters, digits, '.', '_', ':', '-'), "
                         "for server tools")


def _check_effect(executor: str, effect: str, reconcile: Reconcile | None) -> None:
    if effect not in EFFECTS:
        raise ValueError(f"effect must be one of {', '.join(EFFECTS)}, not {effect!r}")
    if effect == "once" and executor != "server":
        raise ValueError("effect='once' is for server tools: a person or client runs the others")
    if reconcile is not None and (effect != "once" or not callable(reconcile)):
        raise ValueError("reconcile is a function (args, ctx), for tools with effect='once'")


def _check_people(editable: bool, deciders: object, executor: str,
                  needs_approval: NeedsApproval) -> None:
    """`editable` and `deciders` are for calls a person decides."""
    if not isinstance(editable, bool):
        raise ValueError("editable is True or False")
    if editable and needs_approval is False:
        raise ValueError("editable is for tools that need approval: a person edits the "
                         "arguments of a call they approve")
    if deciders is not None and executor == "server" and needs_approval is False:
        raise ValueError("deciders are for calls a person decides: a tool that needs approval, "
                         "or a human or client tool")


def _check_callable(function: Callable[..., Any], tool_name: str) -> None:
    """Refuse what a worker could not run as one call with one result."""
    if not callable(function):
        raise ToolDefinitionError(f"@tool decorates a function, not {type(function).__name__}")
    if inspect.isasyncgenfunction(function) or inspect.isgeneratorfunction(function):
        kind = "an async generator" if inspect.isasyncgenfunction(function) else "a generator"
        raise ToolDefinitionError(
            f"tool {tool_name!r} is {kind} function: a tool call has one result, so return "
            "it (a list, or the parts joined) instead of yielding parts")


def _readable(exc: ValidationError) -> str:
    """`argument 'city': field required; argument 'units': unexpected argument`."""
    problems = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"]) or "arguments"
        if error["type"] == "missing":
            what = "field required"
        elif error["type"] == "extra_forbidden":
            what = "unexpected argument"
        else:
            what = error["msg"][:1].lower() + error["msg"][1:]
        problems.append(f"argument '{where}': {what}")
    return "; ".join(problems)

