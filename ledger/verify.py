"""``verify``: prove the ledger is whole.

Every stream's versions are contiguous from 1, every event decodes into its type,
and positions strictly increase. Problems are collected, not raised, so one run
lists them all.
"""

from __future__ import annotations

from uuid import UUID

import msgspec

from turnledger.ledger.backend import StoredRow
from turnledger.ledger.errors import CorruptRecordError, UnknownEventTypeError
from turnledger.ledger.store import EventStore


class Problem(msgspec.Struct, frozen=True, kw_only=True):
    """One thing wrong with the ledger, located by position."""

    position: int
    stream_id: UUID
    version: int
    kind: str
    message: str


class VerifyReport(msgspec.Struct, frozen=True, kw_only=True):
    """What ``verify`` checked and found."""

    events: int
    streams: int
    last_position: int
    problems: tuple[Problem, ...]

    @property
    def ok(self) -> bool:
        """Whether no problem was found."""
        return not self.problems


def verify(store: EventStore, *, page_size: int = 1000) -> VerifyReport:
    """Check every row of the ledger.

    Args:
        store: The ledger to check.
        page_size: How many rows to read at a time.

    Returns:
        The counts and every problem found, in position order.
    """
    heads: dict[UUID, int] = {}
    problems: list[Problem] = []
    last = 0
    events = 0
    for row in store.iter_rows(page_size=page_size):
        events += 1
        problems.extend(_check(store, row, last, heads.get(row.stream_id, 0)))
        last = max(last, row.position)
        heads[row.stream_id] = max(heads.get(row.stream_id, 0), row.version)
    return VerifyReport(
        events=events, streams=len(heads), last_position=last, problems=tuple(problems)
    )


def _check(store: EventStore, row: StoredRow, last: int, head: int) -> list[Problem]:
    found: list[tuple[str, str]] = []
    if row.position <= last:
        found.append(
            (
                "position_order",
                f"Expected a position after {last}, found {row.position}",
            )
        )
    if row.version != head + 1:
        found.append(
            (
                "version_gap",
                (
                    f"Expected stream {row.stream_id} version {head + 1}, "
                    f"found {row.version}"
                ),
            )
        )
    try:
        store.decode(row)
    except UnknownEventTypeError as e:
        found.append(("unknown_type", str(e)))
    except CorruptRecordError as e:
        found.append(("corrupt", str(e)))
    return [
        Problem(
            position=row.position,
            stream_id=row.stream_id,
            version=row.version,
            kind=kind,
            message=message,
        )
        for kind, message in found
    ]
