"""The stored frame's layout: its clear header, format numbers and recorded time.

A row's ``state`` is ``header | body``. The 12-byte header is always in clear:
frame format (1 byte), flags (1 byte: bit 0 = body encrypted, bit 7 = the last
row of an append made under an idempotency key), the event's
schema version (uint16) and the recorded time in microseconds since the epoch
(int64), all big-endian. The codec encodes frame format 1; the backends store
format 2, with the hash chain tail between header and body (``ledger.chain``).
This module holds those numbers and structs, and the microsecond clock the
header records.
"""

from __future__ import annotations

import struct
import time
from datetime import UTC, datetime, timedelta
from typing import Final

FRAME_FORMAT: Final = 1
"""The frame format the codec encodes (no chain tail)."""

FLAG_ENCRYPTED: Final = 0b1
"""The header flag bit set when the body is encrypted."""

FLAG_SEALED: Final = 0b10
"""The header flag bit set when the body is sealed under an erasable subject's own
data key (``ledger.erasable``); under :data:`FLAG_ENCRYPTED` when both are set."""

FLAG_KEYED: Final = 0b1000_0000
"""The header flag bit the backends set on the last row of an append made under an
idempotency key (``verify`` then requires that key's record)."""

HEADER: Final = struct.Struct(">BBHq")
"""Format, flags, schema version and recorded time (microseconds)."""

HEADER_SIZE: Final = HEADER.size

PREFIX: Final = struct.Struct(">BBH")
"""The header's first four bytes: format, flags and schema version."""

TIME: Final = struct.Struct(">q")
"""The header's last eight bytes: the recorded time in microseconds."""

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


def now_us() -> int:
    """Return the current time in whole microseconds since the epoch (UTC)."""
    return time.time_ns() // 1_000


def datetime_from_us(micros: int) -> datetime:
    """Return the UTC datetime of a microsecond timestamp."""
    return _EPOCH + timedelta(microseconds=micros)
