"""Token usage: what one model call cost, in the names every provider is mapped to.

Providers report usage in their own words (`agentq.providers.*` map them to
`input_tokens`, `output_tokens`, `cache_read_input_tokens`, `reasoning_tokens`); this
module turns one such dict into counts that add up, and places a call in its hour, the
grain the rollups keep (`agentq.store.usage`).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agentq.core.timefmt import to_utc

# Counted columns of a rollup, in order: the four token counts and the number of calls.
COUNTS = ("input_tokens", "output_tokens", "cached_tokens", "reasoning_tokens", "calls")


@dataclass(frozen=True)
class Tokens:
    """Counts that add: tokens by kind, and how many model calls spent them."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0  # input tokens read from the provider's prompt cache
    reasoning_tokens: int = 0  # output tokens spent thinking (part of output_tokens)
    calls: int = 0

    @classmethod
    def of_call(cls, usage: Mapping[str, Any] | None) -> Tokens:
        """One call's usage as the provider reported it; a missing or odd count is 0."""
        usage = usage or {}
        return cls(
            input_tokens=_count(usage.get("input_tokens")),
            output_tokens=_count(usage.get("output_tokens")),
            cached_tokens=_count(usage.get("cache_read_input_tokens")),
            reasoning_tokens=_count(usage.get("reasoning_tokens")),
            calls=1,
        )

    def __add__(self, other: Tokens) -> Tokens:
        return Tokens(*(getattr(self, n) + getattr(other, n) for n in COUNTS))

    @property
    def total(self) -> int:
        """What a budget counts: every input and output token (cached and reasoning are parts)."""
        return self.input_tokens + self.output_tokens

    def to_json(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in COUNTS}


def hour_of(when: datetime) -> datetime:
    """The UTC hour `when` falls in: the rollups' grain."""
    return to_utc(when).replace(minute=0, second=0, microsecond=0)


def day_of(when: datetime) -> datetime:
    """The UTC day `when` falls in."""
    return hour_of(when).replace(hour=0)


def _count(value: Any) -> int:
    """A token count as an int: providers send ints; anything else (None, bool, junk) is 0."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return 0
    return value
