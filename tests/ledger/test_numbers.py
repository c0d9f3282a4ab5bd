"""Whole numbers from text (ledger.numbers): ASCII digits only, bounded, no raise."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from turnledger.ledger.numbers import MAX_INTEGER, parse_whole


@given(st.integers(0, 2**70), st.integers(0, 3))
def test_ascii_digits_read_as_int_does_up_to_the_bound(value, zeros):
    text = "0" * zeros + str(value)
    assert parse_whole(text) == (value if value <= MAX_INTEGER else None)
    assert parse_whole(text, 999) == (value if value <= 999 else None)


@given(st.text(max_size=12))
@example("\u00b2")  # a digit to str.isdigit, not to int
@example("\u0663")  # int() reads it as 3
@example("1_000")
@example(" 5")
@example("-1")
@example("+1")
@example("")
@example("9" * 5_000)  # int() refuses more than 4,300 digits
def test_anything_else_is_none_and_nothing_raises(text):
    found = parse_whole(text)
    if text.isascii() and text.isdigit() and int(text[:30]) <= MAX_INTEGER:
        assert found == int(text)
    else:
        assert found is None
