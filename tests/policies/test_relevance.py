"""Relevance scores: bounded, monotone, and independent of other rows."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from turnledger.policies.relevance import (
    ABSENT_EXPONENT,
    ABSENT_FULL_ROWS,
    UNRELATED_SCORE,
    absent_share,
    bm25_term,
    calibrate,
    discount_absent,
    gate_weights,
    keyword_score,
    mostly_unheld,
    other_subjects,
    term_strength,
)

counts = st.integers(-5, 1_000)
lengths = st.integers(-5, 10_000)
cosines = st.floats(-2.0, 2.0, allow_nan=False)


@given(frequency=counts, length=lengths)
def test_term_strength_is_bounded_and_zero_without_the_term(frequency, length):
    """A term that does not occur scores 0; any other scores in (0, 1)."""
    strength = term_strength(frequency, length)
    if frequency <= 0:
        assert strength == 0.0
    else:
        assert 0.0 < strength < 1.0


@given(frequency=st.integers(1, 500), length=st.integers(1, 5_000))
def test_term_strength_grows_with_frequency_and_falls_with_length(frequency, length):
    """More occurrences score more; the same occurrences in a longer entry, less."""
    assert term_strength(frequency + 1, length) > term_strength(frequency, length)
    assert term_strength(frequency, length + 1) <= term_strength(frequency, length)


@given(cosine=cosines, floor=st.floats(-1.0, 1.0), width=st.floats(0.01, 1.0))
@example(cosine=0.3, floor=0.51, width=0.21)  # the static model's range
@example(cosine=0.0, floor=0.5, width=0.5)
def test_calibrate_maps_the_range_in_order_and_ranks_what_is_under_it(
    cosine, floor, width
):
    """A positive ``floor`` maps to UNRELATED_SCORE, ``floor + width`` to 1,
    linearly between; a positive cosine under the floor scores in proportion,
    more than 0 and less than UNRELATED_SCORE; the map never decreases."""
    ceiling = floor + width
    mapped = calibrate(cosine, floor, ceiling)
    assert 0.0 <= mapped <= 1.0
    assert calibrate(ceiling + 1.0, floor, ceiling) == 1.0
    assert calibrate(cosine + 0.1, floor, ceiling) >= mapped
    if floor <= 0.0:  # no unrelated region among positive cosines: as before
        assert calibrate(floor, floor, ceiling) == 0.0
        assert mapped == min(1.0, max(0.0, (cosine - floor) / width))
        return
    assert calibrate(floor, floor, ceiling) == UNRELATED_SCORE
    if cosine <= 0.0:
        assert mapped == 0.0
    elif cosine < floor:
        assert 0.0 < mapped < UNRELATED_SCORE
    else:
        linear = min(1.0, (cosine - floor) / width)
        assert mapped == pytest.approx(
            min(1.0, UNRELATED_SCORE + (1 - UNRELATED_SCORE) * linear)
        )
        assert linear <= mapped <= linear + UNRELATED_SCORE  # at most 0.01 more


@given(cosine=cosines, floor=st.floats(-1.0, 1.0), below=st.floats(0.0, 1.0))
def test_an_empty_or_inverted_range_only_clamps(cosine, floor, below):
    """A declared range with no width is ignored: the cosine is clamped to [0, 1]."""
    assert calibrate(cosine, floor, floor - below) == min(1.0, max(0.0, cosine))


@given(
    weight=st.floats(0.01, 20.0),
    frequency=st.integers(1, 50),
    length=st.integers(1, 2_000),
    average=st.floats(1.0, 500.0),
)
def test_bm25_term_is_fts5s_formula(weight, frequency, length, average):
    """``w tf (k1 + 1) / (tf + k1 (1 - b + b len / avg))`` with k1 1.2, b 0.75."""
    expected = (
        weight * frequency * 2.2 / (frequency + 1.2 * (0.25 + 0.75 * length / average))
    )
    assert bm25_term(weight, frequency, length, average) == pytest.approx(expected)
    assert bm25_term(weight, frequency + 1, length, average) > bm25_term(
        weight, frequency, length, average
    )
    assert bm25_term(weight, frequency, length + 1, average) < bm25_term(
        weight, frequency, length, average
    )


def test_bm25_term_without_an_average_is_neutral_on_length():
    """No average length (an empty scope): the length ratio counts 1."""
    assert bm25_term(2.0, 1, 50, 0.0) == pytest.approx(2.0)
    assert bm25_term(2.0, 0, 0, 1.0) == pytest.approx(2.0)  # found: at least once


TERMS = ("editor", "shell", "use", "helix", "fish")
term_sets = st.frozensets(st.sampled_from(TERMS))


@given(
    weights=st.dictionaries(
        st.sampled_from(TERMS), st.floats(0.01, 10.0), min_size=1, max_size=5
    ),
    counts=st.dictionaries(st.sampled_from(TERMS), st.integers(0, 500)),
    rows=st.integers(1, 1_000),
    held=term_sets,
    subjects=st.lists(term_sets, max_size=4),
)
def test_the_gate_discounts_only_absent_words_and_other_subjects_in_small_scopes(
    weights, counts, rows, held, subjects
):
    """Every weight is kept or scaled by rows / ABSENT_FULL_ROWS; only a word no
    row holds or another subject's word is scaled, a word no row holds only
    while rows hold at least half of the query's words, and from
    ABSENT_FULL_ROWS rows nothing is; the score taken with them stays on
    [0, 1]."""
    others = other_subjects(held, subjects)
    assert not others & held
    assert all(any(t in s for s in subjects if not s & held) for t in others)
    gate = gate_weights(weights, counts, rows, others)
    assert gate.keys() == weights.keys()
    share = min(1.0, rows / ABSENT_FULL_ROWS)
    unheld = [t for t in weights if counts.get(t, 0) <= 0]
    assert mostly_unheld(counts, weights.keys()) == (len(unheld) * 2 > len(weights))
    for term, weight in weights.items():
        if term in unheld:
            discounted = not mostly_unheld(counts, weights.keys())
        else:
            discounted = term in others
        assert gate[term] == pytest.approx(weight * share if discounted else weight)
    if rows >= ABSENT_FULL_ROWS:
        assert gate == weights
    score = keyword_score(gate, dict.fromkeys(held, 1), 8)
    assert 0.0 <= score <= 1.0
    assert (score > 0) == bool(held & weights.keys())


@given(
    weights=st.dictionaries(
        st.sampled_from(TERMS), st.floats(0.01, 10.0), min_size=1, max_size=5
    ),
    counts=st.dictionaries(st.sampled_from(TERMS), st.integers(0, 500)),
    rows=st.integers(0, 1_000),
)
def test_the_absent_share_is_the_weight_no_row_holds_counted_as_the_gate_counts_it(
    weights, counts, rows
):
    """On [0, 1]; 0 when every word is held or the scope is empty; from
    ABSENT_FULL_ROWS rows, the weight of the words no row holds over the whole;
    under it, that in proportion to the rows (a missing word says little in a
    small store)."""
    share = absent_share(weights, counts, rows)
    assert 0.0 <= share <= 1.0
    absent = sum(w for t, w in weights.items() if counts.get(t, 0) <= 0)
    whole = absent / sum(weights.values())
    if rows <= 0 or absent == 0:
        assert share == 0.0
    else:
        scale = min(1.0, rows / ABSENT_FULL_ROWS)
        assert share == pytest.approx(scale * whole)


def test_a_word_no_row_holds_weighs_by_its_idf():
    """The rarest word of the query, absent, is most of its weight."""
    weights = {"good": 0.5, "morning": 1.5, "finnish": 6.0}
    counts = {"good": 300, "morning": 40}
    assert absent_share(weights, counts, 500) == pytest.approx(6.0 / 8.0)
    assert absent_share(weights, counts, 50) == pytest.approx(0.5 * 6.0 / 8.0)
    assert absent_share(weights, {**counts, "finnish": 1}, 500) == 0.0


@given(
    relevance=st.floats(0.0, 1.0),
    other=st.floats(0.0, 1.0),
    absent=st.floats(0.0, 1.0),
    more=st.floats(0.0, 1.0),
)
@example(relevance=0.67, other=0.0, absent=0.75, more=1.0)
def test_the_absent_discount_keeps_order_and_never_drops_a_row(
    relevance, other, absent, more
):
    """Never above the relevance; 0 only for 0; never under the smaller of the
    relevance and UNRELATED_SCORE (the row stays ranked); monotone in the
    relevance, never increasing with the absent share; nothing absent changes
    nothing; (1 - share) ** ABSENT_EXPONENT above UNRELATED_SCORE."""
    discounted = discount_absent(relevance, absent)
    assert discounted <= relevance
    assert (discounted > 0) == (relevance > 0)
    assert discounted >= min(relevance, UNRELATED_SCORE)
    assert discount_absent(relevance, 0.0) == relevance
    low, high = sorted((relevance, other))
    assert discount_absent(low, absent) <= discount_absent(high, absent)
    assert discount_absent(relevance, max(absent, more)) <= discounted
    expected = relevance * (1 - absent) ** ABSENT_EXPONENT
    if expected > UNRELATED_SCORE:
        assert discounted == pytest.approx(expected)
