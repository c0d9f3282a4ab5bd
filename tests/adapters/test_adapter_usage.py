"""What the adapters record of a model call and of the instructions (adapters._usage)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from turnledger.adapters._usage import (
    MAX_MODEL_CHARS,
    UNKNOWN_MODEL,
    Instructions,
    model_called,
)
from turnledger.ledger.events import SystemPromptSet, text_digest
from turnledger.policies.pricing import ModelPrice, TokenUsage, price_usage

PRICING = {"m": ModelPrice(input_per_million=2.0, output_per_million=8.0)}
counts = st.one_of(st.integers(-5, 10**9), st.booleans(), st.none(), st.floats())


@given(counts, counts, counts)
def test_counts_are_recorded_as_given_when_they_are_counts(
    given_in: object, given_out: object, cached: object
) -> None:
    """A count that is an int >= 0 is kept; anything else (bool, float, -1) is 0."""

    def kept(v: object) -> int:
        ok = isinstance(v, int) and not isinstance(v, bool) and v >= 0
        return v if ok else 0  # type: ignore[return-value]

    event = model_called(
        turn_id="t1",
        provider="p",
        model="m",
        pricing=PRICING,
        input_tokens=given_in,
        output_tokens=given_out,
        cached_input_tokens=cached,
    )
    assert event.input_tokens == kept(given_in)
    assert event.output_tokens == kept(given_out)
    assert event.cached_input_tokens == min(kept(cached), event.input_tokens)
    usage = TokenUsage(
        model="m",
        input_tokens=event.input_tokens,
        output_tokens=event.output_tokens,
        cached_input_tokens=event.cached_input_tokens,
    )
    assert event.cost_usd == price_usage(usage, PRICING).cost_usd


def test_a_model_name_that_cannot_be_stored_is_unknown_and_costs_nothing() -> None:
    for bad in (None, "", "x" * (MAX_MODEL_CHARS + 1), "a\nb", "\ud800"):
        event = model_called(
            turn_id="t1", provider="", model=bad, pricing=PRICING, input_tokens=10
        )
        assert (event.model, event.provider, event.cost_usd) == (
            UNKNOWN_MODEL,
            "unknown",
            0.0,
        )
    assert model_called(turn_id="t1", provider="p", model="m", pricing={}).cost_usd == 0


def test_instructions_are_recorded_once_per_change() -> None:
    seen = Instructions()
    first = seen.change("be terse", turn_id="t1")
    assert [e.text for e in first] == ["be terse"]
    assert seen.change("be terse", turn_id="t2") == []
    assert seen.change(None, turn_id="t2") == []
    assert seen.change("", turn_id="t2") == []
    assert [e.text for e in seen.change("be kind", turn_id="t3")] == ["be kind"]
    again = Instructions()
    again.see(SystemPromptSet.of("be kind"))
    assert again.digest == text_digest("be kind")
    assert again.change("be kind", turn_id="t4") == []
