"""Tools: `@tool` turns a typed function into a `Tool`; a `Registry` checks and runs calls.

Why no global registry: a module-level mutable singleton makes import order matter and
tests leak into each other, so registries are built explicitly from `Tool` values
(`Registry([...])` or `Registry.from_modules([...])`). Everything the model gets wrong
(unknown tool, bad arguments) and everything a tool does wrong (exception, timeout)
becomes an error `ToolOutcome` the model can read, never a crash; a tool that raises is
also logged with its traceback, for the developer. A function that cannot be a tool (a
parameter without a type hint, a type JSON Schema cannot express, a generator) fails at
decoration, that is at import, with what to change.
"""
from __future__ import annotations

import functools
import importlib
import inspect
import logging
import re
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any, Literal

import docstring_parser
from pydantic import BaseModel, ConfigDict, Field, PydanticUserError, ValidationError, create_model
from pydantic.fields import FieldInfo
from pydantic_core import to_jsonable_python

from agentq.core.request import ToolSpec
from agentq.core.scope import Scope
from agentq.core.timefmt import format_ts
from agentq.errors import AgentqError
from agentq.process.threads import DaemonThreads
from agentq.tools import remote
from agentq.tools.calls import Coroutines, awaited, capped, capped_parts
from agentq.tools.remote import Asked, RemoteTools, RemoteUnavailable, ServerBreakers

log = logging.getLogger("agentq.tools")  # what tools did, under one name wherever the code lives

Executor = Literal["server", "human", "client"]
EXECUTORS: tuple[str, ...] = ("server", "human", "client")
DEFAULT_EXPIRES_IN_S = 86_400.0
# Whether one call of a tool waits for a person's approval: always, never, or per call
# from its (validated) arguments and the scope it acts for.
NeedsApproval = bool | Callable[[dict[str, Any], Scope], bool]


class ToolDefinitionError(ValueError):
    """A function that cannot be a tool as written; the message says what to change."""


class ToolArgsError(AgentqError):
    """Arguments that do not fit a tool's signature; the message is written for the model."""

    code = "invalid_tool_args"


@dataclass(frozen=True)
class ToolContext:
    """What a running tool may know. Use `tool_call_id` as the idempotency key of side effects."""

    tool_call_id: str
    conversation_id: str
    scope: Scope


@dataclass(frozen=True)
class ToolOutcome:
    """The result of one call, as it goes into a `tool_result` event."""

    status: Literal["ok", "error"]
    output: Any
    # a tool server asked a person something instead (MCP elicitation): no result yet
    asked: Asked | None = None
    # images a tool server's result held (core/parts.py), shown to the model beside `output`
    parts: tuple[dict[str, Any], ...] = ()


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

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    @functools.cached_property
    def spec(self) -> ToolSpec:
        schema = _clean_schema(self.args_model.model_json_schema())
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
) -> Any:
    """Make a `Tool` of a typed function; usable bare (`@tool`) or with options (`@tool(...)`).

    `queue` sends its calls to a Celery queue of their own, for workers started with
    `-Q <queue>` (a slow or heavy tool then holds none of the other tools' workers).
    `needs_approval` (True, or `fn(args, scope) -> bool` deciding per call) makes a server
    tool's call wait until a person approves its exact arguments; `expires_in` is then how
    long they have before the system refuses it.
    """

    def wrap(function: Callable[..., Any]) -> Tool:
        _check_options(executor, expires_in, timeout, queue, needs_approval)
        tool_name: str = name or str(getattr(function, "__name__", ""))
        _check_callable(function, tool_name)
        doc = docstring_parser.parse(inspect.getdoc(function) or "")
        args_model, context_param = _signature_model(function, tool_name, _param_docs(doc))
        waits = executor != "server" or needs_approval is not False
        expires = float(expires_in or DEFAULT_EXPIRES_IN_S) if waits else None
        return Tool(
            name=tool_name,
            description=_description(doc),
            fn=function,
            args_model=args_model,
            context_param=context_param,
            executor=executor,
            expires_in=expires,
            timeout=None if timeout is None else float(timeout),
            requires_user_scope=requires_user_scope,
            queue=queue,
            needs_approval=needs_approval,
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


def _check_callable(function: Callable[..., Any], tool_name: str) -> None:
    """Refuse what a worker could not run as one call with one result."""
    if not callable(function):
        raise ToolDefinitionError(f"@tool decorates a function, not {type(function).__name__}")
    if inspect.isasyncgenfunction(function) or inspect.isgeneratorfunction(function):
        kind = "an async generator" if inspect.isasyncgenfunction(function) else "a generator"
        raise ToolDefinitionError(
            f"tool {tool_name!r} is {kind} function: a tool call has one result, so return "
            "it (a list, or the parts joined) instead of yielding parts")


def _param_docs(doc: docstring_parser.Docstring) -> dict[str, str]:
    """Each documented parameter's description, from a Google, NumPy or reST docstring."""
    return {p.arg_name: p.description for p in doc.params if p.description}


def _description(doc: docstring_parser.Docstring) -> str:
    """The docstring's text without its parameter section (the schema carries that part)."""
    parts = [doc.short_description, doc.long_description]
    if doc.returns is not None and doc.returns.description:
        parts.append(f"Returns: {doc.returns.description}")
    return "\n\n".join(part for part in parts if part)


def _signature_model(
    function: Callable[..., Any], tool_name: str, docs: dict[str, str]
) -> tuple[type[BaseModel], str | None]:
    """A pydantic model of the function's parameters, and the name of its ToolContext parameter.

    Every parameter needs a type hint: the model reads the schema to know what to send,
    and `Any` would tell it nothing.
    """
    try:
        hints = typing.get_type_hints(function, include_extras=True)
    except Exception as exc:  # a hint naming what the module does not define
        raise ToolDefinitionError(f"tool {tool_name!r}: its type hints cannot be read: {exc}") from None
    fields: dict[str, Any] = {}
    context_param = None
    for param in inspect.signature(function).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolDefinitionError(f"tool {tool_name!r}: *args and **kwargs have no JSON schema")
        if param.name not in hints:
            raise ToolDefinitionError(
                f"tool {tool_name!r}: parameter {param.name!r} has no type hint; annotate it "
                f"(e.g. `{param.name}: str`) so the model knows what to send")
        hint = hints[param.name]
        if hint is ToolContext:
            context_param = param.name
            continue
        if param.name.startswith("_"):
            raise ToolDefinitionError(
                f"tool {tool_name!r}: parameter {param.name!r} must not start with '_'")
        default = ... if param.default is param.empty else param.default
        described = param.name in docs and not _described(hint)
        field = Field(default, description=docs[param.name]) if described else Field(default)
        fields[param.name] = (hint, field)
        _check_expressible(tool_name, param.name, hint)
    model = create_model(f"{tool_name}_args", __config__=ConfigDict(extra="forbid"), **fields)
    return model, context_param


def _described(hint: Any) -> bool:
    """Whether `Annotated[..., Field(description=...)]` already describes the parameter."""
    return typing.get_origin(hint) is typing.Annotated and any(
        isinstance(meta, FieldInfo) and meta.description for meta in hint.__metadata__)


def _check_expressible(tool_name: str, param: str, hint: Any) -> None:
    """ToolDefinitionError naming `param` if JSON Schema cannot say what it takes."""
    try:
        create_model("probe", value=(hint, ...)).model_json_schema()
    except PydanticUserError as exc:
        shown = getattr(hint, "__name__", None) or repr(hint)
        first = str(exc).splitlines()[0]
        raise ToolDefinitionError(
            f"tool {tool_name!r}: parameter {param!r} of type {shown} has no JSON schema, so "
            f"the model cannot send it ({first}); use JSON types (str, int, float, bool, "
            "list, dict, Literal, a pydantic model)") from None


_SUBSCHEMA_MAPS = ("properties", "$defs", "patternProperties")
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUBSCHEMAS = ("items", "additionalProperties", "not")


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema without pydantic's generated `title`s (noise in every request).

    Careful: only schema keywords are walked, so a property named "title" survives.
    """
    clean = {key: value for key, value in schema.items() if key != "title"}
    for key in _SUBSCHEMA_MAPS:
        if isinstance(clean.get(key), dict):
            clean[key] = {name: _clean_schema(sub) for name, sub in clean[key].items()}
    for key in _SUBSCHEMA_LISTS:
        if isinstance(clean.get(key), list):
            clean[key] = [_clean_schema(sub) for sub in clean[key]]
    for key in _SUBSCHEMAS:
        if isinstance(clean.get(key), dict):
            clean[key] = _clean_schema(clean[key])
    return clean


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


class Registry:
    """The tools a deployment offers, by name; read-only once built.

    `remote` are the operator's tool servers (agentq.mcp): settings name them `mcp:server`
    or `mcp:server/tool`, and their tools join the local ones under `mcp__server__tool`.
    """

    def __init__(self, tools: Iterable[Tool], remote: Iterable[RemoteTools] = ()) -> None:
        by_name: dict[str, Tool] = {}
        for item in tools:
            known = by_name.get(item.name)
            if known is not None and known is not item:
                raise ValueError(f"two tools are named {item.name!r}")
            by_name[item.name] = item
        self._tools = by_name
        self._remote = {source.server: source for source in remote}
        self._threads = DaemonThreads("agentq-tool")
        self._coroutines = Coroutines()

    @classmethod
    def from_modules(cls, modules: Iterable[str], remote: Iterable[RemoteTools] = ()) -> Registry:
        """Import each module and collect every module-level `Tool` it holds."""
        found: list[Tool] = []
        for module_name in modules:
            module = importlib.import_module(module_name)
            found.extend(value for value in vars(module).values() if isinstance(value, Tool))
        return cls(found, remote)

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    @property
    def queues(self) -> Mapping[str, str]:
        """The queue of each tool that names one of its own, by tool name (a remote
        server's tools go to the server's queue)."""
        own = {name: item.queue for name, item in self._tools.items() if item.queue}
        servers = {name: source.queue for name, source in self._remote.items() if source.queue}
        return ToolQueues(own, servers)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def require(self, names: list[str] | None) -> None:
        """ValueError if `names` holds a local tool that is not registered or a malformed
        server reference; whether a server is the tenant's to use is the policy's call."""
        if names is None:
            return
        malformed = [n for n in names if remote.is_ref(n) and remote.parse_ref(n) is None]
        if malformed:
            raise ValueError(f"malformed tool server references: {', '.join(malformed)} "
                             "(write mcp:SERVER or mcp:SERVER/TOOL)")
        unknown = [n for n in names if not remote.is_ref(n) and n not in self._tools]
        if unknown:
            raise ValueError(f"unknown tools: {', '.join(unknown)}; registered: {', '.join(self._tools)}")

    def specs(self, names: list[str] | None = None) -> list[ToolSpec]:
        """The specs of `names` (None: every local tool); unknown names are a settings error.

        A server reference adds that server's tools (all, or the one named) with the
        server's own descriptions and input schemas; a server that cannot be listed now
        adds none (its calls would fail too) and is logged.
        """
        if names is None:
            return [item.spec for item in self._tools.values()]
        self.require(names)
        specs: list[ToolSpec] = []
        for name in names:
            if remote.is_ref(name):
                specs.extend(self._remote_specs(name))
            else:
                specs.append(self._tools[name].spec)
        return specs

    def _remote_specs(self, ref: str) -> list[ToolSpec]:
        server, only = remote.parse_ref(ref) or ("", None)
        source = self._remote.get(server)
        if source is None:
            log.warning("settings name the tool server %r, which this process does not know", server)
            return []
        try:
            listing = source.listing()
        except RemoteUnavailable as exc:
            log.warning("tool server %r cannot be listed: %s", server, exc)
            return []
        out = []
        for spec in listing:
            if only is not None and spec.name != only:
                continue
            name = remote.model_name(server, spec.name)
            if name is None:
                log.warning("tool %r of server %r has no name a model can call", spec.name, server)
                continue
            out.append(ToolSpec(name=name, description=spec.description, parameters=spec.parameters))
        return out

    def check(self, name: str, args: Any, allowed: list[str] | None = None) -> ToolOutcome | None:
        """None if the call may run; else the error outcome to hand back to the model."""
        split = remote.split_model_name(name)
        if split is not None and split[0] in self._remote and _remote_allowed(split, allowed):
            if not isinstance(args, dict):
                return ToolOutcome("error", f"invalid arguments for '{name}': arguments must be "
                                            f"a JSON object, got {type(args).__name__}")
            return None  # the server validates against its own schema and says what is wrong
        item = self._tools.get(name)
        if item is None or (allowed is not None and name not in allowed):
            available = [n for n in self._tools if allowed is None or n in allowed]
            available += [n for n in allowed or () if remote.is_ref(n)]
            return ToolOutcome("error", f"unknown tool '{name}'; available: {', '.join(available) or 'none'}")
        try:
            item.validate(args)
        except ToolArgsError as exc:
            return ToolOutcome("error", f"invalid arguments for '{name}': {exc}")
        return None

    def call(
        self, name: str, args: Any, ctx: ToolContext, *, timeout_s: float,
        allowed: list[str] | None = None, max_result_chars: int | None = None,
        elicitation: dict[str, Any] | None = None, breakers: ServerBreakers | None = None,
    ) -> ToolOutcome:
        """Check, then run a server tool in a worker thread; every failure is an error outcome.

        `timeout_s` is the conversation's limit; a tool's own `timeout` wins over it.
        An output longer than `max_result_chars` (None: no cap) is cut, and says so.
        `elicitation` is the call's record of its server's last question and the answer
        (a remote tool's call made again with it). `breakers` guard the calls to remote
        servers: one whose breaker is open is not called, and the model reads when to try again.
        """
        refused = self.check(name, args, allowed)
        if refused is not None:
            return refused
        split = remote.split_model_name(name)
        if split is not None and split[0] in self._remote:
            outcome = _call_remote(self._remote[split[0]], split[1], args, ctx, timeout_s,
                                   elicitation, breakers)
            if outcome.asked is not None:
                return outcome
            output = capped(outcome.output, max_result_chars)
            return ToolOutcome(outcome.status, output,
                               parts=capped_parts(output, outcome.parts, max_result_chars))
        item = self._tools[name]
        if item.executor != "server":
            return ToolOutcome(
                "error", f"tool '{name}' is resolved by the {item.executor}, not run by a worker")
        # a gated call reaches here only once approved: the tool step runs a call whose row
        # is `scheduled`, and a gated call's row is `pending` until a person approves it
        if item.requires_user_scope and (ctx.scope.is_system or ctx.scope.user is None):
            return ToolOutcome("error", f"tool '{name}' requires a user scope")
        kwargs = item.validate(args)
        if item.context_param is not None:
            kwargs[item.context_param] = ctx
        timeout_s = item.timeout if item.timeout is not None else timeout_s
        outcome = self._run(item, kwargs, ctx, timeout_s)
        return ToolOutcome(outcome.status, capped(outcome.output, max_result_chars))

    def _run(self, item: Tool, kwargs: dict[str, Any], ctx: ToolContext, timeout_s: float) -> ToolOutcome:
        # On a daemon thread of its own, not the step's: Python cannot kill a thread, so on
        # timeout the call is abandoned and must not hold the worker's shutdown hostage. The
        # step's lease and attempt count (docs/design.md §5) keep an abandoned call from being
        # trusted or rerun blindly; tools make side effects idempotent with ctx.tool_call_id.
        # The tool logs with the step's log context (agentq.process.logs), which `submit` carries.
        coroutines = self._coroutines
        future = self._threads.submit(
            lambda: awaited(item.fn(**kwargs), coroutines, timeout_s))
        where = {"tool": item.name, "tool_call_id": ctx.tool_call_id,
                 "conversation_id": ctx.conversation_id}
        try:
            error = future.exception(timeout=timeout_s)
        except FutureTimeout:
            log.warning("tool %s timed out after %gs", item.name, timeout_s, extra=where)
            return ToolOutcome("error", f"timed out after {timeout_s:g}s")
        if error is not None:
            log.warning("tool %s raised %s: %s", item.name, type(error).__name__, error,
                        exc_info=(type(error), error, error.__traceback__), extra=where)
            return ToolOutcome("error", f"{type(error).__name__}: {error}")
        return ToolOutcome("ok", jsonable(future.result()))

def _remote_allowed(split: tuple[str, str], allowed: list[str] | None) -> bool:
    """Whether the settings' tools name this server, or this tool of it (None names none:
    a server's tools are offered only when named)."""
    server, tool_name = split
    refs = {f"{remote.REF_PREFIX}{server}", f"{remote.REF_PREFIX}{server}/{tool_name}"}
    return allowed is not None and bool(refs & set(allowed))


def _call_remote(
    source: RemoteTools, tool_name: str, args: dict[str, Any], ctx: ToolContext, timeout_s: float,
    elicitation: dict[str, Any] | None, breakers: ServerBreakers | None,
) -> ToolOutcome:
    endpoint = f"{remote.BREAKER_PREFIX}{source.server}"
    wait = breakers.before_call(endpoint) if breakers is not None else None
    if wait is not None:  # failing fast: only this server's calls, and the model may retry
        return ToolOutcome("error", f"tool server '{source.server}' is failing and was not "
                                    f"called; try again after {format_ts(wait.until)}")
    try:
        answered = source.call(tool_name, args, ctx.tool_call_id, timeout_s, elicitation)
    except RemoteUnavailable as exc:
        if breakers is not None:
            breakers.record_server(endpoint, str(exc))
        return ToolOutcome("error", f"tool server '{source.server}' did not answer: {exc}")
    if breakers is not None:
        breakers.record_server(endpoint, None)
    if isinstance(answered, Asked):
        return ToolOutcome("ok", None, asked=answered)
    return ToolOutcome("ok" if answered.status == "ok" else "error", answered.output,
                       parts=answered.parts)


class ToolQueues(Mapping[str, str]):
    """Tool name -> queue: the tools' own, and each remote server's for its tools."""

    def __init__(self, own: dict[str, str], servers: dict[str, str]) -> None:
        self._own = own
        self._servers = servers

    def __getitem__(self, name: str) -> str:
        if name in self._own:
            return self._own[name]
        split = remote.split_model_name(name)
        if split is not None and split[0] in self._servers:
            return self._servers[split[0]]
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        yield from self._own
        yield from (f"{remote.MODEL_PREFIX}{server}__*" for server in self._servers)

    def __len__(self) -> int:
        return len(self._own) + len(self._servers)


def jsonable(value: Any) -> Any:
    """`value` as plain JSON: pydantic models dumped, unknown objects as str(), NaN as null."""
    return to_jsonable_python(value, fallback=str, inf_nan_mode="null")
