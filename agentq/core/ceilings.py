"""Operator ceilings: the most a tenant's settings may ask for, and its share of the workers (inv. 9).

Time limits, rounds per turn, a scripted answer's delay and output budgets all hold a
worker slot or spend the operator's money, so each has a ceiling. A value the tenant set
above its ceiling is refused, with the ceiling's name; a default above it (the tenant set
nothing) comes down to the ceiling, so lowering a ceiling never breaks a plain request.
`running_steps` is not a setting: it caps how many of a tenant's steps run at once, across
every worker, where steps are claimed (agentq.store.ledger).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agentq.core.settings import Settings


class Ceilings(BaseModel):
    """The highest value of each costly setting (the TOML section `[ceilings]`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    max_rounds_per_turn: int = Field(default=100, ge=1)
    llm_timeout_s: float = Field(default=900.0, gt=0.0)  # and read_timeout_s
    tool_timeout_s: float = Field(default=300.0, gt=0.0)
    scripted_delay_s: float = Field(default=60.0, ge=0.0)  # each scripted answer's delay_s
    script_responses: int = Field(default=1000, ge=0)
    max_tokens: int = Field(default=128_000, ge=1)
    max_context_tokens: int = Field(default=1_000_000, ge=64)  # and max_result_tokens
    # Sub-agents: how deep child conversations nest (a root is 0), and how many children one
    # turn may start; a call past either gets an error result its model reads.
    max_agent_depth: int = Field(default=3, ge=0)
    max_children_per_turn: int = Field(default=8, ge=0)
    # Steps of one tenant running at once on all workers; the others wait for a slot (None: no cap).
    running_steps: int | None = Field(default=None, ge=1)

    def overridden(self, overrides: dict[str, Any]) -> Ceilings:
        """These ceilings with some replaced (a tenant's own, say)."""
        return Ceilings.model_validate({**self.model_dump(), **overrides})


@dataclass(frozen=True)
class Excess:
    """One setting above its ceiling: where it is, what it asked, which ceiling it passed."""

    loc: tuple[str | int, ...]
    value: float
    ceiling: str
    limit: float

    @property
    def message(self) -> str:
        where = ".".join(str(part) for part in self.loc)
        return f"{where} is {self.value:g}, above the ceiling {self.ceiling} = {self.limit:g}"


# (section, field, ceiling) of each scalar setting that defaults to a number.
_DEFAULTED_LIMITS = (
    ("limits", "max_rounds_per_turn", "max_rounds_per_turn"),
    ("limits", "tool_timeout_s", "tool_timeout_s"),
    ("limits", "llm_timeout_s", "llm_timeout_s"),
)


def fit_to_ceilings(settings: Settings, ceilings: Ceilings) -> tuple[Settings, list[Excess]]:
    """`settings` with defaults lowered to the ceilings, and what the tenant set above them."""
    lowered = _lower_defaults(settings, ceilings)
    return lowered, list(_excesses(lowered, ceilings))


def _lower_defaults(settings: Settings, ceilings: Ceilings) -> Settings:
    limits = settings.limits
    chosen = limits.model_fields_set
    changes = {
        name: getattr(ceilings, ceiling)
        for _, name, ceiling in _DEFAULTED_LIMITS
        if name not in chosen and getattr(limits, name) > getattr(ceilings, ceiling)
    }
    if not changes:
        return settings
    return settings.model_copy(update={"limits": limits.model_copy(update=changes)})


def _excesses(settings: Settings, ceilings: Ceilings):
    limits, compaction = settings.limits, settings.compaction
    checks: list[tuple[tuple[str | int, ...], float | None, str]] = [
        (("limits", name), getattr(limits, name), ceiling) for _, name, ceiling in _DEFAULTED_LIMITS
    ]
    checks += [
        (("limits", "read_timeout_s"), limits.read_timeout_s, "llm_timeout_s"),
        (("max_tokens",), settings.max_tokens, "max_tokens"),
        (("compaction", "max_context_tokens"), compaction.max_context_tokens, "max_context_tokens"),
        (("compaction", "max_result_tokens"), compaction.max_result_tokens, "max_context_tokens"),
        (("script",), len(settings.script or ()), "script_responses"),
    ]
    checks += [
        (("script", index, "delay_s"), answer.delay_s, "scripted_delay_s")
        for index, answer in enumerate(settings.script or ())
    ]
    for loc, value, ceiling in checks:
        limit = getattr(ceilings, ceiling)
        if value is not None and value > limit:
            yield Excess(loc, value, ceiling, limit)
