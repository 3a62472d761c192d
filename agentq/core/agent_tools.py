"""What a sub-agent is as settings name it: another agent offered to the model as a tool,
the id of the child conversation a call of it runs as (derived, inv. 10), and where that
child belongs (`Parent`).

Apart from `agentq.core.subagents` because settings and events both need it, and those
need settings and events.
"""
from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Final

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, model_validator

from agentq.core.request import ToolSpec

AGENT_EXECUTOR: Final = "agent"
# The kind of the step that hands a child's answer to its parent's call.
CHILD_STEP = "child"
DEFAULT_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"input": {"type": "string", "description": "What to ask the agent."}},
    "required": ["input"],
    "additionalProperties": False,
}
_NAMESPACE = uuid.UUID("0c1d6f0e-9a51-4a47-b2c1-5d1e6a3f7b10")
TOOL_NAME = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"  # an agent name a provider takes as a tool name
# A JSON schema of type object (a tool's input, a structured answer), as the spec states it:
# the validators below check the same `type`.
ObjectSchema = Annotated[dict[str, Any], WithJsonSchema({
    "type": "object", "required": ["type"], "properties": {"type": {"const": "object"}},
    "additionalProperties": True, "description": "a JSON schema of type object"})]


class AgentTool(BaseModel):
    """An agent offered to the model as a tool: by name, with what the model reads of it."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True,
                              serialize_by_alias=True, validate_by_name=True, validate_by_alias=True)

    name: str = Field(pattern=TOOL_NAME)
    description: str = Field(default="", max_length=2000)
    input_schema: ObjectSchema | None = None

    @model_validator(mode="after")
    def _an_object_schema(self) -> AgentTool:
        if self.input_schema is not None and self.input_schema.get("type") != "object":
            raise ValueError("an agent tool's input_schema must be a JSON schema of type object")
        return self

    def spec(self) -> ToolSpec:
        description = self.description or f"Ask the agent {self.name!r}; it answers with text."
        return ToolSpec(name=self.name, description=description,
                        parameters=self.input_schema or DEFAULT_INPUT_SCHEMA)


def find(agents: Sequence[AgentTool] | None, name: str) -> AgentTool | None:
    """The agent tool the model called by `name`, if the settings offer one."""
    return next((a for a in agents or () if a.name == name), None)


def child_conversation_id(parent_id: str, tool_call_id: str) -> str:
    """The child's id: one per parent call, whichever worker or attempt starts it (inv. 10)."""
    return str(uuid.uuid5(_NAMESPACE, f"{parent_id}:{tool_call_id}"))


@dataclass(frozen=True)
class Parent:
    """Where a child conversation belongs: its parent's call, how deep it nests, its root."""

    conversation_id: str
    tool_call_id: str
    depth: int  # the child's: 1 under a root conversation
    root_id: str

    def to_json(self) -> dict[str, Any]:
        return {"conversation_id": self.conversation_id, "tool_call_id": self.tool_call_id,
                "depth": self.depth, "root_conversation_id": self.root_id}
