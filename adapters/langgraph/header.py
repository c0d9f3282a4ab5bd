"""A checkpoint record's header fields, written compactly and read back exactly.

Three fields of every checkpoint record are shortened when that loses nothing
(each is checked on write; otherwise the field is written as LangGraph gave it,
as records before this encoding always were, and read as such):

- ``ts``: LangGraph's ids are UUIDv6, whose 60-bit time is within a few
  microseconds of the checkpoint's ``ts``; the record keeps ``ts`` as the
  microseconds from the id's time (an int) when the ISO text rebuilt from them
  equals ``ts`` character for character;
- ``v``: left out when it is :data:`DEFAULT_V` (the format LangGraph 1.x writes);
- ``u`` (``updated_channels``): a channel also named in the record's ``vals``
  is written as its index there.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any, Final

DEFAULT_V: Final = 4
"""The checkpoint format ``v`` a record leaves out (a constant, not LangGraph's)."""

_GREGORIAN_TO_UNIX_100NS: Final = 0x01B21DD213814000
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_US: Final = timedelta(microseconds=1)


def _id_us(checkpoint_id: str) -> int | None:
    """The id's UUIDv6 time in microseconds since 1970 (``None``: not a UUIDv6)."""
    try:
        parsed = uuid.UUID(checkpoint_id)
    except ValueError:
        return None
    if parsed.version != 6 or str(parsed) != checkpoint_id:
        return None
    ticks = (
        (parsed.time_low << 28)
        | (parsed.time_mid << 12)
        | (parsed.time_hi_version & 0x0FFF)
    )
    return (ticks - _GREGORIAN_TO_UNIX_100NS) // 10


def _iso(us: int) -> str:
    return (_EPOCH + us * _US).isoformat()


def encode_ts(checkpoint_id: str, ts: Any) -> Any:
    """``ts`` as microseconds from the id's time when that rebuilds it exactly."""
    base = _id_us(checkpoint_id)
    if base is None or not isinstance(ts, str):
        return ts
    try:
        at = datetime.fromisoformat(ts)
    except ValueError:
        return ts
    if at.tzinfo is None:
        return ts
    delta = (at - _EPOCH) // _US - base
    return delta if _iso(base + delta) == ts else ts


def decode_ts(checkpoint_id: str, stored: Any) -> Any:
    """The ``ts`` a record holds (see :func:`encode_ts`)."""
    if not isinstance(stored, int):
        return stored
    base = _id_us(checkpoint_id)
    if base is None:  # never written so: an int is only kept for a UUIDv6 id
        msg = (
            f"Expected a UUIDv6 checkpoint id for an offset ts, found {checkpoint_id!r}"
        )
        raise ValueError(msg)
    return _iso(base + stored)


def encode_updated(updated: list[str] | None, vals: list[list[Any]]) -> Any:
    """``updated_channels`` with the channels named in ``vals`` as their index."""
    if updated is None:
        return None
    index = {entry[0]: i for i, entry in enumerate(vals)}
    return [index.get(name, name) for name in updated]


def decode_updated(stored: list[Any] | None, vals: list[list[Any]]) -> list[str] | None:
    """The ``updated_channels`` a record holds (see :func:`encode_updated`)."""
    if stored is None:
        return None
    return [vals[x][0] if isinstance(x, int) else x for x in stored]
