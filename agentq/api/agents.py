"""The shapes of /v1/agents: an agent's versions, and how a conversation names one."""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from agentq.api.common import MAX_SEQ, AnswerModel, BodyModel, RequestModel, Token
from agentq.core.agents import MAX_DESCRIPTION, OVERRIDABLE
from agentq.core.agents import NAME_PATTERN as AGENT_NAME
from agentq.core.settings import Settings

AgentRefText = Annotated[str, StringConstraints(
    pattern=AGENT_NAME[:-1] + r"(@[1-9][0-9]{0,8})?$")]
OverridableField = Literal[OVERRIDABLE]
Description = Annotated[str, StringConstraints(max_length=MAX_DESCRIPTION)]


class CreateAgent(BodyModel):
    """A new agent: version 1 of its definition."""

    name: Annotated[str, StringConstraints(pattern=AGENT_NAME)]
    description: Description = ""
    settings: Settings = Field(default_factory=Settings)
    overridable: list[OverridableField] = Field(
        default_factory=list, max_length=len(OVERRIDABLE),
        description="the settings a conversation started from the agent may override")


class NewAgentVersion(BodyModel):
    """The next version of an agent: its whole definition (nothing is carried over)."""

    description: Description = ""
    settings: Settings = Field(default_factory=Settings)
    overridable: list[OverridableField] = Field(default_factory=list, max_length=len(OVERRIDABLE))


class ListAgents(RequestModel):
    cursor: Token | None = Field(None, description="`next_cursor` of the previous page")
    limit: int = Field(100, ge=1, le=200)


class ListAgentVersions(RequestModel):
    cursor: int | None = Field(None, ge=0, le=MAX_SEQ, description="`next_cursor` of the previous page")
    limit: int = Field(100, ge=1, le=200)


class AgentRefOut(AnswerModel):
    """The agent version a conversation was started from."""

    name: str
    version: int


class AgentOut(AnswerModel):
    """One immutable version of an agent."""

    name: str
    version: int
    digest: str = Field(description="sha256 of the canonical definition: the version's content")
    source: Literal["api", "code"] = Field(description="api: yours; code: the operator's")
    description: str
    settings: Settings = Field(description="as the definition sets them: unset fields are left out")
    overridable: list[str]
    created_at: str


class AgentList(AnswerModel):
    agents: list[AgentOut] = Field(description="the latest version of each agent you may use")
    next_cursor: str | None


class AgentVersionPage(AnswerModel):
    versions: list[AgentOut] = Field(description="oldest first")
    next_cursor: int | None
