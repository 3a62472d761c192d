"""A model call's cost: each kind of token at its own price, in whole nanos, exactly; money
budgets are checked like token budgets."""
from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentq.core.prices import Prices, cost_of, format_money, nanos_per_token, parse_money
from agentq.core.token_budgets import Meter, TokenBudgets, checks, overspent, period_start
from agentq.core.usage import Tokens

NOW = datetime(2026, 11, 29, 8, 30, tzinfo=UTC)
# $2.50 in, $10 out, $1.25 cached, $10 reasoning per million tokens: nanos per token
GPT = Prices(input=2_500, output=10_000, cached_input=1_250, reasoning=10_000)

counts = st.integers(min_value=0, max_value=10**9)
per_million = st.decimals(min_value=0, max_value=1000, places=3, allow_nan=False,
                          allow_infinity=False)


@st.composite
def calls(draw):
    inputs, outputs = draw(counts), draw(counts)
    return Tokens(input_tokens=inputs, output_tokens=outputs,
                  cached_tokens=draw(st.integers(0, inputs)),
                  reasoning_tokens=draw(st.integers(0, outputs)), calls=1)


@st.composite
def prices(draw):
    return Prices(*(nanos_per_token(draw(per_million)) for _ in range(4)))


def test_a_call_costs_each_kind_of_token_at_its_own_price():
    call = Tokens(input_tokens=1_000, output_tokens=500, cached_tokens=400, reasoning_tokens=100,
                  calls=1)
    # 600 fresh input, 400 cached, 400 plain output, 100 reasoning
    assert GPT.cost_of(call) == 600 * 2_500 + 400 * 1_250 + 400 * 10_000 + 100 * 10_000
    assert format_money(GPT.cost_of(call)) == "0.007000000"


@given(calls(), prices())
def test_a_calls_cost_equals_the_decimal_arithmetic_of_prices_per_million(call, price):
    per_token = [Decimal(n) / 10**9 for n in (price.input, price.cached_input, price.output,
                                             price.reasoning)]
    parts = (call.input_tokens - call.cached_tokens, call.cached_tokens,
             call.output_tokens - call.reasoning_tokens, call.reasoning_tokens)
    exact = sum((Decimal(n) * p for n, p in zip(parts, per_token, strict=True)), Decimal(0))
    assert Decimal(format_money(price.cost_of(call))) == exact


@given(st.lists(calls(), max_size=20), prices())
def test_the_cost_of_calls_added_up_is_the_sum_of_their_costs(many, price):
    total = sum(many, Tokens())
    assert price.cost_of(total) == sum(price.cost_of(call) for call in many)


def test_counts_a_provider_got_wrong_never_make_a_cost_negative():
    odd = Tokens(input_tokens=10, output_tokens=5, cached_tokens=50, reasoning_tokens=9, calls=1)
    assert GPT.cost_of(odd) == 10 * 1_250 + 5 * 10_000


def test_an_amount_is_written_with_nine_places_however_small_or_large():
    assert (format_money(0), format_money(1), format_money(12_345_000_000_000)) == (
        "0.000000000", "0.000000001", "12345.000000000")


def test_an_unpriced_model_costs_nothing():
    assert cost_of(None, Tokens(input_tokens=10**6, output_tokens=10**6, calls=1)) == 0


@given(per_million)
def test_a_price_with_three_places_is_a_whole_number_of_nanos_per_token(price):
    assert Decimal(nanos_per_token(price)) == price * 1000


@pytest.mark.parametrize("bad", [Decimal("0.0001"), Decimal("-1"), Decimal("NaN"),
                                 Decimal("Infinity")])
def test_a_price_finer_than_a_nano_per_token_or_not_an_amount_is_refused(bad):
    with pytest.raises(ValueError):
        nanos_per_token(bad)


@given(st.integers(min_value=0, max_value=2**63 - 1))
def test_an_amount_written_as_text_reads_back_to_the_same_nanos(nanos):
    written = format_money(nanos)
    assert parse_money(written) == nanos and written.count(".") == 1 and len(written) >= 11
    assert written[-10] == "." and "E" not in written


@pytest.mark.parametrize("bad", ["-0.5", "abc", "1e-12", "0.0000000001", "inf"])
def test_an_amount_that_is_negative_not_a_number_or_finer_than_a_nano_is_refused(bad):
    with pytest.raises(ValueError):
        parse_money(bad)


def test_a_money_budget_is_spent_once_its_cost_reaches_it_and_says_so_in_money():
    budgets = TokenBudgets(cost_per_day=parse_money("5"), tokens_per_day=10**9)
    day = Meter("tenant", "", "day", period_start("day", NOW))
    money = checks(budgets, None, "c1", NOW, unit="cost")
    assert money == [(day, 5 * 10**9)]
    assert overspent(money, {day: 5 * 10**9 - 1}, NOW, unit="cost") is None
    over = overspent(money, {day: 5 * 10**9}, NOW, unit="cost")
    assert over is not None and over.unit == "cost"
    assert "money budget" in over.message() and "5.000000000 of 5.000000000" in over.message()
    assert over.details("acme", None, "c1")["limit"] == "5.000000000"


def test_a_conversations_money_budget_is_checked_over_its_whole_life_and_an_agents_per_period():
    budgets = TokenBudgets(cost_per_conversation=100, agents={})
    (only,) = checks(budgets, "helper", "c1", NOW, unit="cost")
    assert only[0].scope == "conversation" and only[1] == 100
    assert checks(budgets, "helper", "c1", NOW) == []  # no token budget
    assert budgets.any()

