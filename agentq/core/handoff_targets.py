"""What a handoff is as settings name it: another agent the model may pass the conversation
to, offered as a `transfer_to_<name>` tool, and what history that agent then sees.

Apart from `agentq.core.handoffs` (the fold, the filter, the events) because settings need
it, and that module needs events, which need settings.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from agentq.core.request import ToolSpec

TRANSFER_PREFIX: Final = "transfer_to_"
# An agent name a transfer tool can carry: a provider takes at most 64 characters of
# letters, digits, `_` and `-` as a tool name, `transfer_to_` being 12 of them.
TARGET_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,51}$"
# What the agent taking over sees of the conversation before its handoff: all of it, the
# turn from its user message on, or all of it without tool calls and their results...
InputFilter = Literal["all", "turn", "no_tools"]
# ... or what a function of the operator's code keeps of it (`code:<its name>`), which only
# the operator's agents name (agentq.agents.code).
CODE_FILTER_PREFIX: Final = "code:"
CodeFilter = Annotated[str, StringConstraints(pattern=r"^code:[A-Za-z_][A-Za-z0-9_]{0,99}$")]
TRANSFER_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"reason": {"type": "string",
                              "description": "Why the conversation goes to this agent."}},
    "required": ["reason"],
    "additionalProperties": False,
}


class HandoffTarget(BaseModel):
    """An agent the model may hand the conversation to: by name, with what the model reads."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    name: str = Field(pattern=TARGET_NAME)
    description: str = Field(default="", max_length=2000)
    input_filter: InputFilter | CodeFilter = "all"

    @property
    def tool_name(self) -> str:
        return transfer_tool_name(self.name)

    def spec(self) -> ToolSpec:
        description = (f"Hand the conversation to the agent {self.name!r}: it answers from "
                       f"now on. {self.description}").strip()
        return ToolSpec(name=self.tool_name, description=description,
                        parameters=TRANSFER_PARAMETERS)


def code_filter_name(input_filter: str) -> str | None:
    """The name of the operator's function an input filter names, if it names one."""
    return input_filter.removeprefix(CODE_FILTER_PREFIX) if input_filter.startswith(
        CODE_FILTER_PREFIX) else None


def transfer_tool_name(agent_name: str) -> str:
    """`transfer_to_<name>`, the name's dots made underscores (a provider refuses them)."""
    return TRANSFER_PREFIX + re.sub(r"[^A-Za-z0-9_-]", "_", agent_name)


def handoff_targets(value: Any) -> Any:
    """`"billing"` is short for `{"name": "billing"}`."""
    if isinstance(value, list):
        return [{"name": item} if isinstance(item, str) else item for item in value]
    return value


def find_target(targets: Sequence[HandoffTarget] | None, tool_name: str) -> HandoffTarget | None:
    """The target the model called by its transfer tool's name, if the settings offer one."""
    return next((t for t in targets or () if t.tool_name == tool_name), None)


def transfer_specs(targets: Sequence[HandoffTarget] | None) -> list[ToolSpec]:
    """The transfer tools the model is offered, one per target."""
    return [t.spec() for t in targets or ()]
