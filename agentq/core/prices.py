"""What a model call costs: the operator's prices per million tokens, applied to its tokens.

Money is counted in whole nanos (10⁻⁹ of the policy's currency), integers end to end: a
price per million tokens has at most three decimal places (`PRICE_PLACES`), so one token
costs a whole number of nanos and a call's cost is an exact integer with no rounding at
all. Sums of calls are exact too, in Python and in the store's BIGINT columns (2⁶³ nanos
is over nine billion currency units). Decimal only appears at the edges: reading a price
(`nanos_per_token`) and writing an amount (`format_money`, `parse_money`).

Token kinds follow `agentq.core.usage.Tokens`: cached tokens are a part of the input,
reasoning tokens a part of the output; each part is priced at its own rate.
"""
from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from agentq.core.usage import Tokens

NANOS = 10**9  # nanos in one currency unit
PRICE_PLACES = 3  # decimal places of a price per million tokens: a whole nano per token
MONEY_PLACES = 9  # decimal places an amount is written with (its nanos)


@dataclass(frozen=True)
class Prices:
    """One model's prices, in nanos per token (= thousandths of a unit per million)."""

    input: int
    output: int
    cached_input: int
    reasoning: int

    def cost_of(self, tokens: Tokens) -> int:
        """What `tokens` cost, in nanos: every kind of token at its own price."""
        cached = min(tokens.cached_tokens, tokens.input_tokens)
        reasoning = min(tokens.reasoning_tokens, tokens.output_tokens)
        return ((tokens.input_tokens - cached) * self.input + cached * self.cached_input
                + (tokens.output_tokens - reasoning) * self.output
                + reasoning * self.reasoning)


def cost_of(prices: Prices | None, tokens: Tokens) -> int:
    """What `tokens` cost at `prices`; an unpriced model costs nothing (0)."""
    return 0 if prices is None else prices.cost_of(tokens)


def nanos_per_token(per_million: Decimal) -> int:
    """A price per million tokens as whole nanos per token; ValueError unless it is a
    non-negative amount with at most `PRICE_PLACES` decimal places."""
    if not per_million.is_finite() or per_million < 0:
        raise ValueError("a price is a non-negative amount")
    nanos = per_million * (NANOS // 10**6)
    if nanos != nanos.to_integral_value():
        raise ValueError(f"a price per million tokens has at most {PRICE_PLACES} decimal places")
    return int(nanos)


def format_money(nanos: int) -> str:
    """An amount as decimal text with `MONEY_PLACES` places: 1500 -> "0.000001500"."""
    return f"{Decimal(nanos).scaleb(-MONEY_PLACES):.{MONEY_PLACES}f}"


def parse_money(text: str | Decimal | int) -> int:
    """An amount (decimal text, Decimal or int) as nanos; ValueError if it is negative, not
    a number, or finer than a nano."""
    try:
        amount = Decimal(text) if not isinstance(text, Decimal) else text
    except (InvalidOperation, TypeError, ValueError):
        raise ValueError(f"not an amount: {text!r}") from None
    if not amount.is_finite() or amount < 0:
        raise ValueError("an amount is a non-negative number")
    nanos = amount.scaleb(MONEY_PLACES)
    if nanos != nanos.to_integral_value():
        raise ValueError(f"an amount has at most {MONEY_PLACES} decimal places")
    return int(nanos)
