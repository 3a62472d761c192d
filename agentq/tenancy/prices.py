"""`[prices.MODEL]` of the operator's policy (and `[profiles.NAME.prices.MODEL]`, a profile's
own): what a model's tokens cost, per million, in the policy's one currency.

Prices are read as decimals (TOML numbers or strings) and kept as whole nanos per token
(agentq.core.prices), so no float ever touches an amount.
"""
from __future__ import annotations

from decimal import Decimal

from pydantic import BaseModel, ConfigDict, field_validator

from agentq.core.prices import Prices, nanos_per_token


class ModelPrice(BaseModel):
    """One model's prices per million tokens: input, output, cached input (default: the
    input's) and reasoning (default: the output's), each with at most 3 decimal places."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: Decimal
    output: Decimal
    cached_input: Decimal | None = None
    reasoning: Decimal | None = None

    @field_validator("input", "output", "cached_input", "reasoning", mode="before")
    @classmethod
    def _exact(cls, value: object) -> object:
        """A TOML float as the decimal it was written as (0.15, not 0.1499999…)."""
        return repr(value) if isinstance(value, float) else value

    @field_validator("input", "output", "cached_input", "reasoning")
    @classmethod
    def _whole_nanos(cls, value: Decimal | None) -> Decimal | None:
        if value is not None:
            nanos_per_token(value)  # ValueError says why
        return value

    def prices(self) -> Prices:
        cached = self.input if self.cached_input is None else self.cached_input
        reasoning = self.output if self.reasoning is None else self.reasoning
        return Prices(input=nanos_per_token(self.input), output=nanos_per_token(self.output),
                      cached_input=nanos_per_token(cached),
                      reasoning=nanos_per_token(reasoning))
