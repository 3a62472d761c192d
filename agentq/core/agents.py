"""Agents: a named, versioned definition of what a conversation runs with.

An agent is its name, a description, its settings (profile and model, system prompt,
tools, provider parameters, limits, compaction, response format, a script) and which
settings a conversation started from it may override. A version never changes once
published: it is numbered (1, 2, …, per owner and name) and identified by its content
too, the digest of its canonical definition, so the same definition published twice is
recognised as the same. Defined in code or through the API, it is this one model.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agentq.core.keys import canonical_json
from agentq.core.settings import Settings

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
MAX_DESCRIPTION = 2000
# The canonical definition's UTF-8 size: a version is read on every conversation it starts.
MAX_DEFINITION_BYTES = 256 * 1024
# What a conversation may be allowed to override: the settings' own top-level fields.
OVERRIDABLE = tuple(Settings.model_fields)
Source = Literal["api", "code"]
_REF = re.compile(r"^(?P<name>[^@]+)(?:@(?P<version>[0-9]{1,9}))?$")


class NotOverridable(ValueError):
    """Overrides of settings the agent does not let a conversation change."""

    def __init__(self, agent: str, fields: list[str], allowed: tuple[str, ...]) -> None:
        self.fields = fields
        allowed_text = ", ".join(allowed) or "none"
        super().__init__(f"agent {agent!r} does not let a conversation override "
                         f"{', '.join(fields)}; it allows: {allowed_text}")


class AgentDefinition(BaseModel):
    """What a version of an agent says; its `digest` identifies it by content."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    name: str = Field(pattern=NAME_PATTERN)
    description: str = Field(default="", max_length=MAX_DESCRIPTION)
    settings: Settings = Field(default_factory=Settings)
    overridable: tuple[str, ...] = ()

    @field_validator("overridable", mode="before")
    @classmethod
    def _settings_fields(cls, value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            unknown = [f for f in value if not isinstance(f, str) or f not in OVERRIDABLE]
            if unknown:
                raise ValueError(f"overridable names settings fields ({', '.join(OVERRIDABLE)}); "
                                 f"not {', '.join(map(str, unknown))}")
            return tuple(sorted(set(value)))
        return value

    def canonical(self) -> dict[str, Any]:
        """The definition as plain JSON: the settings as set (defaults left out, so a
        default that a later release changes does not make a new version)."""
        return {
            "name": self.name,
            "description": self.description,
            "settings": self.settings.model_dump(mode="json", exclude_unset=True),
            "overridable": list(self.overridable),
        }

    @property
    def digest(self) -> str:
        """sha256 of the canonical definition: the version's identity by content."""
        return hashlib.sha256(self.canonical_text().encode("utf-8", "surrogatepass")).hexdigest()

    def canonical_text(self) -> str:
        return canonical_json(self.canonical())

    def checked_size(self) -> AgentDefinition:
        """This definition, or ValueError if its canonical form is larger than the limit."""
        size = len(self.canonical_text().encode("utf-8", "surrogatepass"))
        if size > MAX_DEFINITION_BYTES:
            raise ValueError(f"the agent's definition is {size} bytes; at most "
                             f"{MAX_DEFINITION_BYTES} are taken")
        return self


@dataclass(frozen=True)
class AgentVersion:
    """One published, immutable version of an agent, as stored."""

    definition: AgentDefinition
    version: int
    digest: str
    source: Source
    created_at: datetime

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def ref(self) -> AgentRef:
        return AgentRef(self.name, self.version)


@dataclass(frozen=True)
class AgentRef:
    """Which agent a conversation was started from: a name and, once pinned, a version."""

    name: str
    version: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version}


def parse_agent_ref(text: str) -> AgentRef:
    """`support` (its latest version) or `support@3`; ValueError saying what is wrong."""
    found = _REF.match(text) if isinstance(text, str) else None
    if found is None or not re.match(NAME_PATTERN, found["name"]):
        raise ValueError("agent must be a name (letters, digits, '_', '.', '-'; at most 64) "
                         "or name@version, like support@3")
    version = found["version"]
    if version is not None and int(version) < 1:
        raise ValueError("an agent's versions start at 1")
    return AgentRef(found["name"], None if version is None else int(version))


def settings_with_overrides(version: AgentVersion, overrides: dict[str, Any]) -> Settings:
    """The agent's settings with a conversation's overrides over them (sections merge).

    Raises NotOverridable if an override names a field the agent keeps fixed, and a
    pydantic ValidationError if the merged settings do not hold together.
    """
    named = {"profile" if key == "provider" else key: value for key, value in overrides.items()}
    refused = sorted(set(named) - set(version.definition.overridable))
    if refused:
        raise NotOverridable(version.name, refused, version.definition.overridable)
    base = version.definition.settings.model_dump(mode="json", exclude_unset=True)
    return Settings.model_validate(merged(base, named))


def merged(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    """`top` over `base`; where both hold an object, the two merge key by key."""
    out = dict(base)
    for key, value in top.items():
        below = out.get(key)
        out[key] = merged(below, value) if isinstance(below, dict) and isinstance(value, dict) else value
    return out
