"""The tools a deployment offers: a `Registry` checks and runs calls, local and remote.

Everything the model gets wrong (unknown tool, bad arguments) and everything a tool does
wrong (exception, timeout) becomes an error `ToolOutcome` the model can read, never a
crash; a tool that raises is also logged with its traceback, for the developer.
"""
from __future__ import annotations

import importlib
import logging
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any, Literal

from pydantic_core import to_jsonable_python

from agentq.core.request import ToolSpec
from agentq.core.timefmt import format_ts
from agentq.process.threads import DaemonThreads
from agentq.tools import remote
from agentq.tools.calls import Coroutines, awaited, capped, capped_parts
from agentq.tools.context import ToolContext
from agentq.tools.definition import Tool, ToolArgsError
from agentq.tools.guardrails import Guardrails
from agentq.tools.instructions import InstructionSet
from agentq.tools.reconcile import CannotTell, Ran, Reconciled, reconciled
from agentq.tools.remote import Asked, RemoteTools, RemoteUnavailable, ServerBreakers

log = logging.getLogger("agentq.tools")  # what tools did, under one name wherever the code lives


@dataclass(frozen=True)
class ToolOutcome:
    """The result of one call, as it goes into a `tool_result` event."""

    status: Literal["ok", "error"]
    output: Any
    # a tool server asked a person something instead (MCP elicitation): no result yet
    asked: Asked | None = None
    # images a tool server's result held (core/parts.py), shown to the model beside `output`
    parts: tuple[dict[str, Any], ...] = ()


class Registry:
    """The tools a deployment offers, by name; read-only once built.

    `remote` are the operator's tool servers (agentq.mcp): settings name them `mcp:server`
    or `mcp:server/tool`, and their tools join the local ones under `mcp__server__tool`.
    """

    def __init__(self, tools: Iterable[Tool], remote: Iterable[RemoteTools] = (), *,
                 guardrails: Guardrails | None = None,
                 instructions: InstructionSet | None = None) -> None:
        """`guardrails` and `instructions`: the operator's functions settings name
        (agentq.tools.guardrails, agentq.tools.instructions)."""
        by_name: dict[str, Tool] = {}
        for item in tools:
            known = by_name.get(item.name)
            if known is not None and known is not item:
                raise ValueError(f"two tools are named {item.name!r}")
            by_name[item.name] = item
        self._tools = by_name
        self._remote = {source.server: source for source in remote}
        self.guardrails = guardrails or Guardrails()
        self.instructions = instructions or InstructionSet()
        self._threads = DaemonThreads("agentq-tool")
        self._coroutines = Coroutines()

    @classmethod
    def from_modules(cls, modules: Iterable[str], remote: Iterable[RemoteTools] = ()) -> Registry:
        """Import each module and collect every module-level `Tool` it holds (and its
        guardrails and instructions)."""
        modules = list(modules)
        found: list[Tool] = []
        for module_name in modules:
            module = importlib.import_module(module_name)
            found.extend(value for value in vars(module).values() if isinstance(value, Tool))
        return cls(found, remote, guardrails=Guardrails.from_modules(modules),
                   instructions=InstructionSet.from_modules(modules))

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

    def specs_in_code(self, names: list[str] | None) -> list[ToolSpec]:
        """The specs of `names` that this code still registers, for a running conversation:
        its settings were checked when it started, so a local tool missing now was removed
        from the code by a deploy since. It is left out of what the model is offered (and
        logged), and a call of it gets an error result (`check`), not a failed turn."""
        if names is None:
            return self.specs()
        removed = [n for n in names if not remote.is_ref(n) and n not in self._tools]
        if removed:
            log.warning("settings name tools the code no longer registers: %s", ", ".join(removed))
        return self.specs([n for n in names if n not in removed])

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
        checked = self._checked(name, args, allowed)
        return checked if isinstance(checked, ToolOutcome) else None

    def _checked(self, name: str, args: Any, allowed: list[str] | None) -> ToolOutcome | dict[str, Any]:
        """The arguments the call runs with (a remote tool's as given, a local tool's
        validated), or the error outcome to hand back to the model."""
        split = remote.split_model_name(name)
        if split is not None and split[0] in self._remote and _remote_allowed(split, allowed):
            if not isinstance(args, dict):
                return ToolOutcome("error", f"invalid arguments for '{name}': arguments must be "
                                            f"a JSON object, got {type(args).__name__}")
            return args  # the server validates against its own schema and says what is wrong
        item = self._tools.get(name)
        if item is None or (allowed is not None and name not in allowed):
            available = [n for n in self._tools if allowed is None or n in allowed]
            available += [n for n in allowed or () if remote.is_ref(n)]
            if item is None and allowed is not None and name in allowed:  # removed by a deploy
                return ToolOutcome("error", f"tool '{name}' is no longer available: it was removed "
                                            f"since this conversation started; available: "
                                            f"{', '.join(available) or 'none'}")
            return ToolOutcome("error", f"unknown tool '{name}'; available: {', '.join(available) or 'none'}")
        try:
            return item.validate(args)
        except ToolArgsError as exc:
            return ToolOutcome("error", f"invalid arguments for '{name}': {exc}")

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
        kwargs = self._checked(name, args, allowed)
        if isinstance(kwargs, ToolOutcome):
            return kwargs
        split = remote.split_model_name(name)
        if split is not None and split[0] in self._remote:
            outcome = _call_remote(self._remote[split[0]], split[1], kwargs, ctx, timeout_s,
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
    def reconcile(self, name: str, args: Any, ctx: ToolContext, *, timeout_s: float
                  ) -> Reconciled:
        """What a `once` tool's reconcile says of a run found started and unfinished;
        CannotTell when it has none, raises or runs out of time (a person decides then)."""
        item = self._tools.get(name)
        check = item.reconcile if item is not None else None
        if item is None or check is None:
            return CannotTell(None)
        try:
            kwargs = item.validate(args)
        except ToolArgsError as exc:
            return CannotTell(str(exc))
        coroutines = self._coroutines
        future = self._threads.submit(lambda: awaited(check(kwargs, ctx), coroutines, timeout_s))
        try:
            error = future.exception(timeout=timeout_s)
        except FutureTimeout:
            return CannotTell(f"reconcile timed out after {timeout_s:g}s")
        if error is not None:
            log.warning("reconcile of %s raised %s: %s", name, type(error).__name__, error,
                        exc_info=(type(error), error, error.__traceback__))
            return CannotTell(f"reconcile raised {type(error).__name__}: {error}")
        answer = reconciled(future.result())
        return Ran(jsonable(answer.result)) if isinstance(answer, Ran) else answer


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
