"""The narrow port a storage backend offers the ledger store.

Both backends are built on eventsourcing's recorders; this Protocol is the part of
them the store uses, in the store's own vocabulary. Rows cross it as the library's
``StoredEvent`` / ``Notification`` records; decoding happens in the store.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import NamedTuple, Protocol
from uuid import UUID

from eventsourcing.persistence import Notification, StoredEvent

from turnledger.ledger.chain import AppendRecord, Seal
from turnledger.ledger.frame import FLAG_KEYED, HEADER_SIZE


class EncodedRow(NamedTuple):
    """One event ready to insert: what a stored event holds besides its stream.

    The frame (format 1, see ``ledger.frame``) in its two parts: ``header``, its
    12 clear bytes, and ``body``, the payload as stored (encrypted under a
    cipher); :attr:`state` joins them. Kept apart so that the SQLite writer
    chains a row without slicing its frame.
    """

    originator_version: int
    topic: str
    header: bytes
    body: bytes

    @property
    def state(self) -> bytes:
        """The frame: ``header | body``."""
        return self.header + self.body


def mark_keyed(rows: Sequence[EncodedRow | StoredEvent]) -> list[EncodedRow]:
    """Return an append's rows with :data:`~ledger.frame.FLAG_KEYED` on the last one.

    The flag sits in the row's clear header, which its link covers: ``verify``
    then knows these rows were written under an idempotency key, and that the
    key's record must exist.
    """
    out = [
        row
        if type(row) is EncodedRow
        else EncodedRow(
            row.originator_version,
            row.topic,
            row.state[:HEADER_SIZE],
            row.state[HEADER_SIZE:],
        )
        for row in rows
    ]
    if not out:
        return out
    last = out[-1]
    header = bytearray(last.header)
    header[1] |= FLAG_KEYED
    out[-1] = last._replace(header=bytes(header))
    return out


class AppendRequest(NamedTuple):
    """One stream's append inside a group commit.

    ``rows`` hold codec frames (format 1; ``EventStore.encode`` makes
    :class:`EncodedRow` s, a frame's header and body apart); the backend chains
    them (see ``ledger.chain``) once it knows their positions. With an
    ``idempotency_key`` the backend first looks the key up inside the write
    transaction: when an earlier append used it, that append's outcome is
    returned and nothing is written; otherwise the key is recorded with the
    rows, in the same savepoint.
    """

    stream_id: UUID
    expected_version: int
    rows: Sequence[EncodedRow | StoredEvent]
    idempotency_key: str | None = None


class Replayed(NamedTuple):
    """An append whose idempotency key was already used: the first outcome."""

    stream_id: UUID
    first_version: int
    last_version: int
    positions: tuple[int, ...]


class Conflict(NamedTuple):
    """An append refused because the stream's head was not the expected version."""

    found: int


class StoredRow(NamedTuple):
    """A raw row with its global position."""

    position: int
    stream_id: UUID
    version: int
    topic: str
    state: bytes


class RowSubscription(Protocol):
    """A blocking iterator of new rows that can be stopped from another thread."""

    def __iter__(self) -> Iterator[Notification]:
        """Iterate over notifications as they are recorded."""
        ...

    def __next__(self) -> Notification:
        """Block until the next notification, or raise StopIteration when stopped."""
        ...

    def stop(self) -> None:
        """Stop the subscription; a blocked ``next`` returns."""
        ...


class Backend(Protocol):
    """What a storage backend does for the store."""

    kind: str
    ledger_id: str | None
    """The ledger's random id (None: an old ledger opened read-only has none)."""

    def insert_batch(
        self, requests: Sequence[AppendRequest], *, atomic: bool = False
    ) -> list[tuple[int, ...] | Conflict | Replayed]:
        """Write the appends in ONE transaction, each in its own savepoint.

        Returns, per request, the positions written, the conflict found, or the
        earlier outcome of its idempotency key. A conflict
        in one request leaves the others untouched, unless ``atomic``: then the
        whole transaction is rolled back and nothing is written (the conflicting
        request still reports its conflict; the others report empty positions).
        """
        ...

    def select_stream(
        self,
        stream_id: UUID,
        *,
        gt: int,
        lte: int | None,
        limit: int | None,
        topics: Sequence[str] = (),
    ) -> list[StoredRow]:
        """Return a stream's rows with versions in ``(gt, lte]``, in version order.

        With ``topics``, only rows of those topics (the others are not read out).
        """
        ...

    def select_all(
        self, *, gt: int, limit: int, topics: Sequence[str], lte: int | None
    ) -> list[StoredRow]:
        """Return rows with positions in ``(gt, lte]`` in order, optionally by topic."""
        ...

    def stream_version(self, stream_id: UUID) -> int:
        """Return a stream's head version (0 when empty)."""
        ...

    def max_position(self) -> int:
        """Return the highest position written (0 when empty)."""
        ...

    def stream_ids(self) -> list[UUID]:
        """Return every stream id, sorted."""
        ...

    def count_rows(self) -> int:
        """Return the number of rows."""
        ...

    def first_encrypted(self, scan_rows: int) -> StoredRow | None:
        """Return the first encrypted row among the first ``scan_rows``.

        Encrypted: a frame (format 1 or 2, at least a header long) whose flags
        say so. The database does the scan: no row is sent back but that one.
        """
        ...

    def first_sealed(self) -> int | None:
        """Return the position of the first sealed row (``None``: none).

        Sealed: a frame whose flags say :data:`~ledger.frame.FLAG_SEALED`.
        A marker table answers, written by a trigger in the transaction that
        inserts the first sealed row; a ledger from before the marker is
        searched once, whole (the database scans), and the answer recorded.
        """
        ...

    def subscribe(self, *, gt: int, topics: Sequence[str]) -> RowSubscription:
        """Subscribe to rows after position ``gt``."""
        ...

    def insert_seal(self, body: bytes, mac: str, *, after: int) -> int:
        """Record a seal (append-only) if the newest seal's id is still ``after``.

        Returns the new seal's id, or 0 when another seal was written since
        (``after`` 0: none may exist yet); the caller then chains again.
        """
        ...

    def latest_seal(self) -> Seal | None:
        """Return the newest seal, if any."""
        ...

    def seals(self) -> list[Seal]:
        """Return every seal, oldest first."""
        ...

    def seal_sequence(self) -> int:
        """Return the highest seal id the database ever issued (0: none)."""
        ...

    def append_records(self) -> list[AppendRecord]:
        """Return every idempotency record."""
        ...

    def beyond_sequence(self) -> list[StoredRow]:
        """Return rows whose position the position sequence never issued.

        PostgreSQL: rows above the sequence's last value (no reader sees them
        until a real append passes them). SQLite has no such sequence: none.
        """
        ...

    def cipher_fingerprint(self, fingerprint: str | None) -> str | None:
        """Return the cipher key fingerprint recorded in the ledger.

        With ``fingerprint``, record it first when none is recorded yet (the
        first one recorded stays); a read-only ledger records nothing.
        """
        ...

    def close(self) -> None:
        """Release connections."""
        ...
