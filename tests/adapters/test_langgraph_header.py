"""Checkpoint header fields: the compact forms read back exactly, or are not used."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from hypothesis import given
from hypothesis import strategies as st
from langgraph.checkpoint.base.id import uuid6

from turnledger.adapters.langgraph.header import (
    decode_ts,
    decode_updated,
    encode_ts,
    encode_updated,
)

names = st.text("abc:_", min_size=1, max_size=4)


@given(
    offset_us=st.integers(-(10**6), 10**6),
    clock_seq=st.integers(0, 2**14 - 1),
)
def test_a_ts_near_the_id_is_an_offset_that_rebuilds_it(
    offset_us: int, clock_seq: int
) -> None:
    """LangGraph's shape (UUIDv6 id, UTC ISO ts): an int offset, read back equal."""
    checkpoint_id = str(uuid6(clock_seq=clock_seq))
    ts = (datetime.now(UTC) + timedelta(microseconds=offset_us)).isoformat()
    stored = encode_ts(checkpoint_id, ts)
    assert isinstance(stored, int)
    assert decode_ts(checkpoint_id, stored) == ts


def test_a_ts_that_would_not_rebuild_is_kept_as_given() -> None:
    """Another id kind, another text form, another zone or a non-string: kept."""
    v6 = str(uuid6())
    now = datetime.now(UTC)
    kept = [
        ("1", now.isoformat()),  # the conformance suite's ids
        ("00000000-0000-4000-8000-000000000000", now.isoformat()),  # UUIDv4
        (v6, now.replace(microsecond=123000).isoformat(timespec="milliseconds")),
        (v6, now.astimezone(timezone(timedelta(hours=2))).isoformat()),
        (v6, now.replace(tzinfo=None).isoformat()),
        (v6, "yesterday"),
        (v6, None),
        (v6.upper(), now.isoformat()),  # rebuilt ids are lower case
    ]
    for checkpoint_id, ts in kept:
        assert encode_ts(checkpoint_id, ts) == ts
        assert decode_ts(checkpoint_id, ts) == ts


@given(
    vals=st.lists(names, max_size=4, unique=True),
    updated=st.none() | st.lists(names, max_size=4),
)
def test_updated_channels_read_back_equal(
    vals: list[str], updated: list[str] | None
) -> None:
    """Names in ``vals`` become indexes there, others stay names; same list back."""
    entries = [[name, ["e"], 1] for name in vals]
    stored = encode_updated(updated, entries)
    assert decode_updated(stored, entries) == updated
    if updated is not None:
        assert all(
            isinstance(x, int) == (n in vals)
            for x, n in zip(stored, updated, strict=True)
        )
