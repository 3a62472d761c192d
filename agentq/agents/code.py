"""Agents defined in Python, next to their tools: `support = agentq.agent("support", ...)`.

The processes find them as they find tools, as module-level values of the modules
AGENTQ_TOOLS names, and publish each at start: a new version when its definition
changed since the latest one, none when it is the same (versions are by content). A
definition that cannot work (bad settings, a tool no module offers) fails at import or
at start with a message naming the agent, never at a tenant's first conversation.

An agent's model may be a Python function (`model=decide`, agentq.providers.function):
the definition names it (`profile: "function"`, `model: "decide"`) and each process finds
the function through the agents its modules define. Only such agents of the operator
use model functions (inv. 9).
"""
from __future__ import annotations

import importlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from agentq.core.agents import AgentDefinition, AgentVersion
from agentq.core.handoff_targets import CODE_FILTER_PREFIX
from agentq.core.handoffs import CodeInputFilter
from agentq.core.settings import FUNCTION_PROFILE
from agentq.providers.function import FunctionModel, FunctionModels
from agentq.tools import Registry, Tool
from agentq.tools.guardrails import Guardrail
from agentq.tools.instructions import Instructions, instructions

log = logging.getLogger(__name__)

GUARDRAIL_FIELDS = ("input_guardrails", "output_guardrails", "tool_input_guardrails",
                    "tool_output_guardrails")


@dataclass(frozen=True)
class Agent:
    """An agent as a module defines it: collected by `CodeAgents.from_modules`."""

    definition: AgentDefinition
    function: FunctionModel | None = None  # the model, when it is a function of the code
    instructions: Instructions | None = None  # its system prompt, when a function (`system=`)
    # the input filters of its handoffs that are functions of the code, by name
    input_filters: tuple[tuple[str, CodeInputFilter], ...] = ()

    @property
    def name(self) -> str:
        return self.definition.name


@dataclass(frozen=True)
class Handoff:
    """A handoff target as `handoff()` makes it: the agent, and what history it sees."""

    target: Agent | str
    input_filter: str | CodeInputFilter = "all"
    description: str | None = None

    def as_setting(self) -> dict[str, Any]:
        """The target as settings name it; a function filter by its name (`code:<name>`)."""
        name = self.target.name if isinstance(self.target, Agent) else self.target
        described = self.target.definition.description if isinstance(self.target, Agent) else ""
        shown = self.input_filter if isinstance(self.input_filter, str) else (
            CODE_FILTER_PREFIX + self.input_filter.__name__)
        return {"name": name, "description": self.description or described,
                "input_filter": shown}


def handoff(target: Agent | str, *, input_filter: str | CodeInputFilter = "all",
            description: str | None = None) -> Handoff:
    """A handoff to `target` for an agent's `handoffs=[...]`: `input_filter` is `"all"`,
    `"turn"`, `"no_tools"` or a function of the events before the handoff that returns
    those the target is to see (a subset, in log order, each call with its result)."""
    return Handoff(target, input_filter, description)


def agent(
    name: str,
    *,
    description: str = "",
    tools: Iterable[Tool | str] | None = None,
    overridable: Iterable[str] = (),
    **settings: Any,
) -> Agent:
    """Define an agent: its name, and its settings as keyword arguments (`system`, `model`,
    `profile`, `limits`, `temperature`, `response_format`, `script`, …).

    `tools` are `@tool` functions (or their names); `input_guardrails` and
    `output_guardrails` are `@guardrail` functions (or their names); `system` is a text or a
    function of an `InstructionsContext` (instructions as code); `overridable` names the settings a
    conversation started from it may change. `model` is a model's name, or a function of
    the request (a `FunctionModel`, or a function it names by its own name). Assign the
    result to a module-level name, as with tools: that is how the processes find it.
    """
    function = _function_model(name, settings)
    written = _instructions(name, settings)
    for phase in GUARDRAIL_FIELDS:
        if settings.get(phase) is not None:
            settings[phase] = [_guardrail_ref(name, item, phase) for item in settings[phase]]
    if tools is not None:
        settings["tools"] = [_tool_name(name, item) for item in tools]
    if settings.get("agents") is not None:  # other agents as tools: Agent values or names
        settings["agents"] = [_agent_tool(item) for item in settings["agents"]]
    filters: dict[str, CodeInputFilter] = {}
    if settings.get("handoffs") is not None:  # agents to hand over to: Agent values or names
        for item in settings["handoffs"]:
            if isinstance(item, Handoff) and callable(item.input_filter):
                filters[item.input_filter.__name__] = item.input_filter
        settings["handoffs"] = [item.as_setting() if isinstance(item, Handoff) else
                                _agent_tool(item) for item in settings["handoffs"]]
    try:
        definition = AgentDefinition.model_validate({
            "name": name, "description": description, "settings": settings,
            "overridable": tuple(overridable),
        }).checked_size()
    except ValidationError as exc:
        raise ValueError(f"agent {name!r} is not valid:\n{exc}") from None
    except ValueError as exc:
        raise ValueError(f"agent {name!r}: {exc}") from None
    return Agent(definition, function, written, tuple(sorted(filters.items())))


def _instructions(agent_name: str, settings: dict[str, Any]) -> Instructions | None:
    """The agent's instructions if `system` is a function, the settings then naming it."""
    system = settings.get("system")
    if not (isinstance(system, Instructions) or callable(system)):
        return None
    try:
        written = system if isinstance(system, Instructions) else instructions(system)
    except ValueError as exc:
        raise ValueError(f"agent {agent_name!r}: {exc}") from None
    settings.pop("system")
    settings["instructions"] = written.name
    return written


def _guardrail_ref(agent_name: str, item: Any, phase: str) -> Any:
    """A `@guardrail` function given in Python, by its name (and its `parallel` default)."""
    if isinstance(item, Guardrail):
        parallel = item.parallel and phase == "input_guardrails"
        return {"name": item.name, "parallel": True} if parallel else item.name
    if isinstance(item, Agent):  # a guardrail that is an agent: its model answers a verdict
        return {"agent": item.name}
    if callable(item):
        raise TypeError(f"agent {agent_name!r}: {phase} are @agentq.guardrail functions or "
                        f"their names, not the plain function {getattr(item, '__name__', item)!r}")
    return item


def _function_model(agent_name: str, settings: dict[str, Any]) -> FunctionModel | None:
    """The agent's model if it is a function, its settings then naming it; else None."""
    model = settings.get("model")
    if not (isinstance(model, FunctionModel) or callable(model)):
        return None  # a model's name (or not one: the settings say what is wrong)
    if "profile" in settings or "provider" in settings or "script" in settings:
        raise ValueError(f"agent {agent_name!r}: a model function is the whole model: "
                         "give no profile and no script with it")
    try:
        function = model if isinstance(model, FunctionModel) else FunctionModel(model)
    except ValueError as exc:
        raise ValueError(f"agent {agent_name!r}: {exc}") from None
    settings.update(profile=FUNCTION_PROFILE, model=function.name)
    return function


def _input_filters(agents: Iterable[Agent]) -> dict[str, CodeInputFilter]:
    """The code's handoff input filters by name; ValueError for two functions of one name."""
    found: dict[str, CodeInputFilter] = {}
    for item in agents:
        for name, function in item.input_filters:
            if found.setdefault(name, function) is not function:
                raise ValueError(f"two handoff input filters are named {name!r}")
    return found


def _agent_tool(item: Any) -> Any:
    """An `Agent` offered as a tool or a handoff: by its name, described as the agent
    describes itself."""
    if isinstance(item, Agent):
        return {"name": item.name, "description": item.definition.description}
    return item


def _tool_name(agent_name: str, item: Any) -> str:
    if isinstance(item, Tool):
        return item.name
    if isinstance(item, str):
        return item
    raise TypeError(f"agent {agent_name!r}: tools are @tool functions or tool names, "
                    f"not {type(item).__name__}")


class CodeAgents:
    """The agents the loaded modules define, by name; read-only once built."""

    def __init__(self, agents: Iterable[Agent]) -> None:
        by_name: dict[str, Agent] = {}
        for item in agents:
            known = by_name.get(item.name)
            if known is not None and known is not item:
                raise ValueError(f"two agents are named {item.name!r}")
            by_name[item.name] = item
        self._agents = by_name
        self.functions = FunctionModels(a.function for a in by_name.values() if a.function)
        self.input_filters = _input_filters(by_name.values())

    @classmethod
    def from_modules(cls, modules: Iterable[str], registry: Registry | None = None) -> CodeAgents:
        """Every module-level `Agent` of the modules; with `registry`, each agent's tools
        must be among its tools."""
        found: list[Agent] = []
        for module_name in modules:
            module = importlib.import_module(module_name)
            found.extend(value for value in vars(module).values() if isinstance(value, Agent))
        agents = cls(found)
        if registry is not None:
            agents.check_tools(registry)
        return agents

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self._agents)

    def get(self, name: str) -> Agent | None:
        return self._agents.get(name)

    def __iter__(self):
        return iter(self._agents.values())

    def check_tools(self, registry: Registry) -> None:
        """ValueError naming the agent if it names a tool the registry lacks, or offers as a
        tool, or as a handoff, an agent the code does not define."""
        for item in self._agents.values():
            try:
                registry.require(item.definition.settings.tools)
            except ValueError as exc:
                raise ValueError(f"agent {item.name!r}: {exc}") from None
            settings = item.definition.settings
            missing = registry.guardrails.unknown(
                ref.name for field in GUARDRAIL_FIELDS for ref in getattr(settings, field) or ()
                if ref.name is not None)
            if missing:
                raise ValueError(f"agent {item.name!r} names guardrails no module registers: "
                                 f"{', '.join(missing)}")
            if settings.instructions and registry.instructions.get(settings.instructions) is None:
                raise ValueError(f"agent {item.name!r} names instructions no module registers: "
                                 f"{settings.instructions}")
            for offered, names in (("as tools", [a.name for a in settings.agents or ()]),
                                   ("handoffs to", [t.name for t in settings.handoffs or ()]),
                                   ("as guardrails", settings.guardrail_agents())):
                unknown = [name for name in names if name not in self._agents]
                if unknown:
                    raise ValueError(f"agent {item.name!r} offers {offered} agents no module "
                                     f"defines: {', '.join(unknown)}")

    def publish(self, store, *, now: datetime) -> list[AgentVersion]:
        """Publish each agent whose definition changed; the latest version of each."""
        latest = []
        for item in self._agents.values():
            version, published = store.agents.publish_code(item.definition, now=now)
            if published:
                log.info("published agent %s version %d (%s)", item.name, version.version,
                         version.digest[:12])
            latest.append(version)
        return latest
