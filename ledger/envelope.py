"""The envelope the store writes around every event: where and when it was recorded."""

from __future__ import annotations

from datetime import datetime
from typing import TypeAlias
from uuid import UUID

import msgspec

from turnledger.ledger.events import LedgerEvent

Position: TypeAlias = int
"""A global, strictly increasing position in the ledger (1-based)."""


class Recorded(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """An event as recorded: the envelope plus the payload, kept apart.

    Attributes:
        stream_id: The stream the event belongs to.
        version: Its version in that stream (1-based, contiguous).
        position: Its global position (strictly increasing, commit order).
        recorded_at: When the store recorded it (UTC).
        event: The payload.
    """

    stream_id: UUID
    version: int
    position: Position
    recorded_at: datetime
    event: LedgerEvent


class AppendResult(msgspec.Struct, frozen=True, kw_only=True):
    """What an append wrote.

    Attributes:
        stream_id: The stream appended to.
        first_version: The version of the first event written.
        last_version: The stream's new head version.
        positions: The global position of each event, in order.
    """

    stream_id: UUID
    first_version: int
    last_version: int
    positions: tuple[Position, ...]
