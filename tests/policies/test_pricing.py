"""Cost from usage and rates; day/month budgets (§8.1)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta, timezone

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from turnledger.policies.budgets import (
    BudgetSpend,
    BudgetStatus,
    make_budget_checker,
    sum_spend,
)
from turnledger.policies.pricing import (
    CostBreakdown,
    ModelPrice,
    PricingError,
    TokenUsage,
    check_price,
    compute_cost,
    price_usage,
)

PRICE = ModelPrice(
    input_per_million=3.0, output_per_million=15.0, cached_input_per_million=0.3
)


def usage(inp=1_000_000, out=1_000_000, cached=0, model="m"):
    return TokenUsage(
        model=model, input_tokens=inp, output_tokens=out, cached_input_tokens=cached
    )


class TestCost:
    def test_formula(self):
        """Uncached input, cached input and output at their rates."""
        cost = compute_cost(usage(inp=2_000_000, out=500_000, cached=1_000_000), PRICE)
        assert cost == pytest.approx(1.0 * 3.0 + 1.0 * 0.3 + 0.5 * 15.0)

    def test_cached_rate_zero_means_input_rate(self):
        """Without a cached rate, cached tokens cost the input rate."""
        price = ModelPrice(input_per_million=2.0, output_per_million=0.0)
        assert compute_cost(usage(out=0, cached=400_000), price) == pytest.approx(2.0)

    def test_cached_clamped_to_input(self):
        """More cached than input tokens counts as all input cached."""
        assert compute_cost(usage(inp=100, out=0, cached=500), PRICE) == pytest.approx(
            100 / 1e6 * 0.3
        )

    @pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf, -math.inf, 0.0])
    def test_bad_rates_count_as_zero(self, bad):
        """Rates that are not finite and positive count as 0."""
        price = ModelPrice(
            input_per_million=bad, output_per_million=bad, cached_input_per_million=bad
        )
        assert compute_cost(usage(cached=10), price) == 0.0

    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            ({"inp": -1}, "Expected input_tokens to be an int >= 0, found -1"),
            ({"out": 1.5}, "Expected output_tokens to be an int >= 0, found 1.5"),
            (
                {"cached": True},
                "Expected cached_input_tokens to be an int >= 0, found True",
            ),
        ],
    )
    def test_bad_usage(self, kwargs, message):
        """Token counts must be ints >= 0."""
        with pytest.raises(PricingError, match=message):
            compute_cost(usage(**kwargs), PRICE)

    def test_overflow_is_an_error(self):
        """A cost that overflows is refused, never infinite."""
        price = ModelPrice(input_per_million=1e308, output_per_million=1e308)
        with pytest.raises(PricingError, match="Expected a finite cost for model 'm'"):
            compute_cost(usage(inp=10**12, out=10**12), price)

    def test_price_usage_breakdown(self):
        """A priced call carries its figures and no content."""
        assert price_usage(
            usage(inp=10, out=5, cached=20), {"m": PRICE}
        ) == CostBreakdown(
            model="m",
            input_tokens=10,
            cached_input_tokens=10,
            cache_write_tokens=0,
            output_tokens=5,
            reasoning_tokens=0,
            total_tokens=15,
            cost_usd=pytest.approx(10 / 1e6 * 0.3 + 5 / 1e6 * 15.0),
            pricing_available=True,
        )

    def test_unknown_model_costs_zero(self):
        """A model missing from the sheet costs 0, flagged unpriced."""
        breakdown = price_usage(usage(model="x"), {"m": PRICE})
        assert (breakdown.cost_usd, breakdown.pricing_available) == (0.0, False)

    @settings(max_examples=100)
    @given(
        st.tuples(*[st.integers(min_value=0, max_value=10**12)] * 3),
        st.tuples(*[st.floats(allow_nan=True, allow_infinity=True)] * 3),
    )
    def test_never_negative_or_non_finite(self, tokens, rates):
        """Any usage and rate sheet gives a finite cost >= 0, or a typed error."""
        inp, out, cached = tokens
        price = ModelPrice(
            input_per_million=rates[0],
            output_per_million=rates[1],
            cached_input_per_million=rates[2],
        )
        try:
            cost = compute_cost(usage(inp=inp, out=out, cached=cached), price)
        except PricingError:
            return
        assert math.isfinite(cost)
        assert cost >= 0


FULL = ModelPrice(
    input_per_million=3.0,
    output_per_million=15.0,
    cached_input_per_million=0.3,
    cache_write_per_million=3.75,
    reasoning_per_million=20.0,
)

counts = st.integers(min_value=0, max_value=10**9)
rate = st.floats(min_value=0.0, max_value=1e4)
optional_rate = st.none() | rate


@st.composite
def full_usage(draw):
    """A usage whose parts are consistent: cached + written <= input etc."""
    uncached, cached, written, plain, reasoning = (draw(counts) for _ in range(5))
    return TokenUsage(
        model="m",
        input_tokens=uncached + cached + written,
        cached_input_tokens=cached,
        cache_write_tokens=written,
        output_tokens=plain + reasoning,
        reasoning_tokens=reasoning,
    )


@st.composite
def full_price(draw):
    return ModelPrice(
        input_per_million=draw(rate),
        output_per_million=draw(rate),
        cached_input_per_million=draw(rate),
        cache_write_per_million=draw(optional_rate),
        reasoning_per_million=draw(optional_rate),
    )


def more(base: TokenUsage, kind: str, extra: int) -> TokenUsage:
    """``base`` with ``extra`` more tokens of one kind (its totals grown too)."""
    grow = {
        "uncached": {"input_tokens": extra},
        "cached": {"input_tokens": extra, "cached_input_tokens": extra},
        "written": {"input_tokens": extra, "cache_write_tokens": extra},
        "plain": {"output_tokens": extra},
        "reasoning": {"output_tokens": extra, "reasoning_tokens": extra},
    }[kind]
    changes = {name: getattr(base, name) + n for name, n in grow.items()}
    return msgspec.structs.replace(base, **changes)


class TestCacheAndReasoning:
    def test_formula(self):
        """Every part at its own rate: 1M of each kind."""
        cost = compute_cost(
            TokenUsage(
                model="m",
                input_tokens=3_000_000,
                cached_input_tokens=1_000_000,
                cache_write_tokens=1_000_000,
                output_tokens=2_000_000,
                reasoning_tokens=1_000_000,
            ),
            FULL,
        )
        assert cost == pytest.approx(3.0 + 0.3 + 3.75 + 15.0 + 20.0)

    def test_unset_rates_default_to_input_and_output(self):
        """No cache-write rate: the input rate; no reasoning rate: the output rate."""
        price = ModelPrice(input_per_million=2.0, output_per_million=8.0)
        written = TokenUsage(
            model="m", input_tokens=10**6, output_tokens=0, cache_write_tokens=10**6
        )
        thinking = TokenUsage(
            model="m", input_tokens=0, output_tokens=10**6, reasoning_tokens=10**6
        )
        assert compute_cost(written, price) == pytest.approx(2.0)
        assert compute_cost(thinking, price) == pytest.approx(8.0)

    def test_explicit_zero_rates_are_free(self):
        """Unlike the cached rate, an explicit 0 makes those tokens free."""
        price = msgspec.structs.replace(
            FULL, cache_write_per_million=0.0, reasoning_per_million=0.0
        )
        call = TokenUsage(
            model="m",
            input_tokens=10**6,
            cache_write_tokens=10**6,
            output_tokens=10**6,
            reasoning_tokens=10**6,
        )
        assert compute_cost(call, price) == 0.0

    def test_clamped_parts_and_breakdown(self):
        """Cache writes fit in the input left after reads; reasoning in the output."""
        call = TokenUsage(
            model="m",
            input_tokens=100,
            cached_input_tokens=70,
            cache_write_tokens=50,
            output_tokens=10,
            reasoning_tokens=40,
        )
        breakdown = price_usage(call, {"m": FULL})
        assert (breakdown.cached_input_tokens, breakdown.cache_write_tokens) == (70, 30)
        assert breakdown.reasoning_tokens == 10
        assert breakdown.cost_usd == pytest.approx(
            (70 * 0.3 + 30 * 3.75 + 10 * 20.0) / 1e6
        )

    @pytest.mark.parametrize("field", ["cache_write_tokens", "reasoning_tokens"])
    def test_bad_counts(self, field):
        """The new counts must be ints >= 0 too."""
        call = msgspec.structs.replace(usage(), **{field: -3})
        with pytest.raises(PricingError, match=f"Expected {field} to be an int >= 0"):
            compute_cost(call, FULL)

    @pytest.mark.parametrize(
        ("field", "value"),
        [
            ("input_per_million", -1.0),
            ("output_per_million", math.inf),
            ("cached_input_per_million", math.nan),
            ("cache_write_per_million", -0.5),
            ("reasoning_per_million", -math.inf),
        ],
    )
    def test_check_price_refuses(self, field, value):
        """Negative and non-finite rates are refused, naming rate and value."""
        price = msgspec.structs.replace(FULL, **{field: value})
        with pytest.raises(PricingError, match=f"^{field}: expected a finite number"):
            check_price(price)

    def test_check_price_accepts_zero_and_unset(self):
        """0 and unset are valid rates."""
        check_price(ModelPrice(input_per_million=0.0, output_per_million=0.0))

    @settings(max_examples=200)
    @given(
        full_usage(),
        full_price(),
        st.sampled_from(["uncached", "cached", "written", "plain", "reasoning"]),
        st.integers(min_value=1, max_value=10**9),
    )
    def test_cost_monotone_in_every_count(self, call, price, kind, extra):
        """More tokens of any one kind never cost less."""
        assert compute_cost(more(call, kind, extra), price) >= compute_cost(
            call, price
        ) * (1 - 1e-12)

    @settings(max_examples=100)
    @given(full_price())
    def test_zero_counts_cost_zero(self, price):
        """No tokens cost nothing, whatever the rates."""
        assert (
            compute_cost(TokenUsage(model="m", input_tokens=0, output_tokens=0), price)
            == 0.0
        )

    @settings(max_examples=200)
    @given(full_usage(), rate, rate)
    def test_no_token_priced_twice(self, call, input_rate, output_rate):
        """With every input rate equal and every output rate equal, the split
        does not matter: cached and written tokens are not priced again as input,
        reasoning not again as output."""
        price = ModelPrice(
            input_per_million=input_rate,
            output_per_million=output_rate,
            cached_input_per_million=input_rate,
            cache_write_per_million=input_rate,
            reasoning_per_million=output_rate,
        )
        plain = TokenUsage(
            model="m",
            input_tokens=call.input_tokens,
            output_tokens=call.output_tokens,
        )
        assert compute_cost(call, price) == pytest.approx(compute_cost(plain, price))

    @settings(max_examples=200)
    @given(full_usage(), full_price())
    def test_cost_is_the_sum_of_its_parts(self, call, price):
        """The input parts and the output parts are priced independently."""
        only_input = msgspec.structs.replace(
            price,
            output_per_million=0.0,
            reasoning_per_million=0.0,
        )
        only_output = msgspec.structs.replace(
            price,
            input_per_million=0.0,
            cached_input_per_million=0.0,
            cache_write_per_million=0.0,
        )
        assert compute_cost(call, price) == pytest.approx(
            compute_cost(call, only_input) + compute_cost(call, only_output)
        )


CHECK = make_budget_checker()


class TestBudget:
    @pytest.mark.parametrize(
        ("spend", "expected"),
        [
            (
                BudgetSpend(day_usd=1.0, month_usd=50.0),
                BudgetStatus(
                    state="ok",
                    period="day",
                    current_usd=1.0,
                    projected_usd=1.0,
                    limit_usd=10.0,
                    percent_used=10.0,
                ),
            ),
            (
                BudgetSpend(day_usd=7.5, month_usd=20.0, estimated_usd=0.5),
                BudgetStatus(
                    state="warning",
                    period="day",
                    current_usd=7.5,
                    projected_usd=8.0,
                    limit_usd=10.0,
                    percent_used=80.0,
                ),
            ),
            (
                BudgetSpend(day_usd=2.0, month_usd=99.5, estimated_usd=1.0),
                BudgetStatus(
                    state="exceeded",
                    period="month",
                    current_usd=99.5,
                    projected_usd=100.5,
                    limit_usd=100.0,
                    percent_used=100.5,
                ),
            ),
            (
                BudgetSpend(day_usd=10.0, month_usd=10.0),
                BudgetStatus(
                    state="warning",
                    period="day",
                    current_usd=10.0,
                    projected_usd=10.0,
                    limit_usd=10.0,
                    percent_used=100.0,
                ),
            ),
        ],
    )
    def test_states_with_figures(self, spend, expected):
        """Defaults 10/100 USD, warn at 80 %; exceeded means over the limit."""
        assert CHECK(spend) == expected

    def test_worst_period_wins_day_on_tie(self):
        """Both exceeded: the day is reported."""
        status = CHECK(BudgetSpend(day_usd=11.0, month_usd=101.0))
        assert (status.state, status.period) == ("exceeded", "day")

    def test_disabled_or_no_limits_is_ok(self):
        """Disabled tracking or no limits are always ok."""
        spend = BudgetSpend(day_usd=1e6, month_usd=1e6)
        assert make_budget_checker(enabled=False)(spend) == BudgetStatus(state="ok")
        unlimited = make_budget_checker(daily_limit_usd=None, monthly_limit_usd=None)
        assert unlimited(spend) == BudgetStatus(state="ok")

    def test_month_only(self):
        """A missing day limit leaves the month check."""
        check = make_budget_checker(daily_limit_usd=None, warn_at_percent=50)
        status = check(BudgetSpend(day_usd=60.0, month_usd=60.0))
        assert (status.state, status.period) == ("warning", "month")

    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            (
                {"daily_limit_usd": 0.0},
                "Expected daily_limit_usd to be a finite number > 0",
            ),
            ({"monthly_limit_usd": math.inf}, "monthly_limit_usd"),
            ({"warn_at_percent": 101}, r"warn_at_percent in \[0, 100\], found 101"),
            ({"warn_at_percent": math.nan}, "found nan"),
        ],
    )
    def test_bad_config(self, kwargs, message):
        """Bad limits are typed errors."""
        with pytest.raises(PricingError, match=message):
            make_budget_checker(**kwargs)

    @pytest.mark.parametrize(
        "spend",
        [
            BudgetSpend(day_usd=-1.0, month_usd=0.0),
            BudgetSpend(day_usd=0.0, month_usd=math.nan),
            BudgetSpend(day_usd=0.0, month_usd=0.0, estimated_usd=math.inf),
        ],
    )
    def test_bad_spend(self, spend):
        """Spend must be finite and >= 0."""
        with pytest.raises(PricingError, match="to be a finite number >= 0"):
            CHECK(spend)


NOW = datetime(2026, 8, 22, 10, 0, tzinfo=UTC)


class TestSumSpend:
    def test_day_and_month_in_utc(self):
        """Costs are summed into the current UTC day and month."""
        plus_two = timezone(timedelta(hours=2))
        costs = [
            (NOW - timedelta(hours=1), 1.0),
            (datetime(2026, 8, 22, 1, 0, tzinfo=plus_two), 2.0),  # 21st in UTC
            (datetime(2026, 8, 1, tzinfo=UTC), 4.0),
            (datetime(2026, 7, 31, 23, 59, tzinfo=UTC), 8.0),
            (datetime(2025, 8, 22, tzinfo=UTC), 16.0),
        ]
        assert sum_spend(costs, now=NOW, estimated_usd=0.5) == BudgetSpend(
            day_usd=1.0, month_usd=7.0, estimated_usd=0.5
        )

    def test_naive_times_are_errors(self):
        """Naive timestamps cannot be placed in a UTC day."""
        with pytest.raises(PricingError, match="Expected a timezone-aware now"):
            sum_spend([], now=datetime(2026, 1, 1))  # noqa: DTZ001 - testing naive input
        with pytest.raises(PricingError, match="timezone-aware cost timestamp"):
            sum_spend([(datetime(2026, 1, 1), 1.0)], now=NOW)  # noqa: DTZ001 - idem

    def test_bad_cost(self):
        """A negative recorded cost is an error."""
        with pytest.raises(PricingError, match="cost_usd"):
            sum_spend([(NOW, -1.0)], now=NOW)
