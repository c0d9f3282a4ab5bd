"""``verify``: prove the ledger is whole; ``seal``: pin it.

``verify`` reads every row in position order and checks that every event decodes,
that every stream's versions are contiguous from 1, and every row's hash chain
link (``ledger.chain``); then the seal chain (every seal, its HMAC when a seal
key is given), the newest seal in chain order against what it found, the
idempotency records against the rows, and, given a witness (``ledger.witness``),
every witnessed seal. Problems are collected, not raised, so one run lists them
all, each with ``kind``, ``stream``, ``version`` and ``position``:

- ``corrupt`` / ``unknown_type``: the row does not decode;
- ``edited_payload``: the body does not match its recorded digest;
- ``edited_envelope``: the stream, version, type or header (recorded time, schema)
  no longer match the row's link;
- ``reordered``: the row sits at another position than the one it was written at,
  or behind a later version of its stream;
- ``deleted``: versions missing in the middle of a stream (or a sealed stream gone);
- ``replaced``: a row was rewritten consistently (its link no longer matches what
  the next version chains from, or what the seal recorded), or a row covered by
  the seal now carries no link or another row's bytes;
- ``forged``: a row after the last seal that the ledger did not write (no link,
  a link that does not match it, a copy of another row, or one that does not
  chain from its predecessor);
- ``truncated``: a stream ends before the version the newest seal recorded, or
  the ledger ends before the position a seal (or a witnessed seal) covers;
- ``seal_forged``: a seal does not decode or its HMAC does not match the key (it
  is then not used);
- ``seal_deleted``: seals missing from the chain (an index skipped, fewer seals
  than seal ids the database issued, or a witnessed seal gone);
- ``seal_reinserted``: a copy of an earlier seal, or a seal out of chain order
  (an older seal inserted again to roll the ledger back); it is not used;
- ``seal_replaced``: a seal that does not chain from the one before it, or that
  differs from what the witness recorded for its index;
- ``idempotency_edited``: an idempotency record that names rows of another
  stream or version, or no row, or (after the first row carrying the key flag)
  rows written without a key; or records changed since the seal that covers
  them (their digest);
- ``idempotency_deleted``: the last row of an append made under a key (its
  header flag says so) whose record is gone, or fewer records than the seal
  covers;
- ``beyond_sequence`` (PostgreSQL): a row above the position sequence's last
  value, which no reader sees (the sequence never issued its position).

Rows written before the chain existed are counted as ``pre_chain``, not problems.
What ``verify`` cannot see without a witness is listed in the security guide
(docs/guides/security.md): in short, whatever the database owner rewrites
consistently past the newest seal left standing. Seal often, set
``TURNLEDGER_SEAL_KEY``, and witness the seals.
"""

from __future__ import annotations

import hashlib
import heapq
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from uuid import UUID

import msgspec

from turnledger.ledger.backend import StoredRow
from turnledger.ledger.chain import (
    GENESIS,
    SEAL_KEY_ENV,
    AppendRecord,
    SealBody,
    decode_seal,
    link_of,
    mac_matches,
    parse_chained,
    prechain_link,
    records_digest,
    seal_digest,
)
from turnledger.ledger.errors import (
    CorruptRecordError,
    UnknownEventTypeError,
    quote_value,
)
from turnledger.ledger.frame import FLAG_KEYED
from turnledger.ledger.store import EventStore
from turnledger.ledger.witness import Witness, WitnessEntry, WitnessError


class Problem(msgspec.Struct, frozen=True, kw_only=True):
    """One thing wrong with the ledger, located by position."""

    kind: str
    stream: UUID | None
    version: int
    position: int
    message: str


class VerifyReport(msgspec.Struct, frozen=True, kw_only=True):
    """What ``verify`` checked and found.

    Attributes:
        events: Rows read.
        streams: Streams seen.
        last_position: The highest position.
        pre_chain: Rows written before the hash chain existed (no link of their own).
        sealed_position: The position the newest valid seal covers (0: no seal).
        problems: Every problem, in the order found.
        seals: Seals read.
        witnessed: Witness entries of this ledger checked (0: no witness).
    """

    events: int
    streams: int
    last_position: int
    pre_chain: int
    sealed_position: int
    problems: tuple[Problem, ...]
    seals: int = 0
    witnessed: int = 0

    @property
    def ok(self) -> bool:
        """Whether no problem was found."""
        return not self.problems


@dataclass
class _Stream:
    head: int = 0
    head_position: int = 0
    link: bytes = bytes(32)
    prev: bytes | None = GENESIS  # what the next version must chain from
    at_seal: bytes | None = None  # the link at the sealed version


@dataclass
class SealChain:
    """The seals as read: the newest in chain order, and what each is."""

    accepted: SealBody | None = None
    count: int = 0
    by_index: dict[int, str] = field(default_factory=dict)
    digests: dict[str, int] = field(default_factory=dict)


@dataclass
class Walk:
    """What one pass over the ledger found (``seal`` uses it too)."""

    problems: list[Problem]
    streams: dict[UUID, _Stream]
    events: int
    last: int
    pre_chain: int
    seal: SealBody | None
    seals: int = 0
    witnessed: int = 0


def verify(
    store: EventStore,
    *,
    page_size: int = 1000,
    seal_key: str | None = None,
    witness: Witness | None = None,
) -> VerifyReport:
    """Check every row of the ledger, the seals and the idempotency records.

    Args:
        store: The ledger to check.
        page_size: How many rows to read at a time.
        seal_key: The HMAC key seals are signed with (checked when given);
            defaults to ``TURNLEDGER_SEAL_KEY``.
        witness: Where the seals were witnessed (``seal --witness``): every
            entry of this ledger is checked against it.

    Returns:
        The counts and every problem found.

    Raises:
        WitnessError: The witness cannot be read, or holds no entry of this
            ledger.
    """
    if seal_key is None:
        seal_key = os.environ.get(SEAL_KEY_ENV) or None
    entries = None if witness is None else _entries_of(store, witness)
    walk = walk_ledger(store, page_size=page_size, seal_key=seal_key, witness=entries)
    return VerifyReport(
        events=walk.events,
        streams=len(walk.streams),
        last_position=walk.last,
        pre_chain=walk.pre_chain,
        sealed_position=walk.seal.position if walk.seal else 0,
        problems=tuple(walk.problems),
        seals=walk.seals,
        witnessed=walk.witnessed,
    )


def _entries_of(store: EventStore, witness: Witness) -> list[WitnessEntry]:
    entries = witness.entries()
    ledger = store.backend.ledger_id or ""
    mine = [e for e in entries if e.ledger == ledger]
    if not mine:
        msg = (
            f"Expected the witness {witness.target} to hold seals of this ledger "
            f"(id {ledger or 'none'}), found {len(entries)} entries, none of it"
        )
        raise WitnessError(msg)
    return mine


def walk_ledger(  # noqa: C901, PLR0912, PLR0915 - one pass, one check per kind
    store: EventStore,
    *,
    page_size: int = 1000,
    seal_key: str | None = None,
    witness: Sequence[WitnessEntry] | None = None,
) -> Walk:
    """Read the whole ledger once, checking each row, then seals and records."""
    problems: list[Problem] = []
    # The ids issued first: every seal they count is then among those read.
    issued = store.backend.seal_sequence()
    chain = _seal_chain(store, seal_key, problems)
    seal = chain.accepted
    walk = Walk(problems, {}, 0, 0, 0, seal, chain.count)
    # Read before the rows: every record's rows are committed, so the walk sees them.
    expected = RecordRows(store.backend.append_records())
    keyed: list[StoredRow] = []
    moved: list[tuple[StoredRow, int]] = []
    chained_from: int | None = None
    for row in store.iter_rows(page_size=page_size):
        walk.events += 1
        walk.last = max(walk.last, row.position)
        _decode(store, row, problems)
        if expected.pending:
            expected.check(row, problems)
        if len(row.state) > 1 and row.state[1] & FLAG_KEYED:
            keyed.append(row)
        stream = walk.streams.setdefault(row.stream_id, _Stream())
        covered = seal is not None and row.position <= seal.position
        chained = parse_chained(row.state)
        if chained is not None and chained_from is None:
            chained_from = row.position
        if row.version <= stream.head:
            _add(problems, "reordered", row, f"after version {stream.head}")
            continue
        if row.version > stream.head + 1:
            missing = f"{stream.head + 1}..{row.version - 1}"
            _add(problems, "deleted", row, f"versions {missing} are missing")
            stream.prev = None  # the chain resumes from this row
        if chained is None:
            if chained_from is None:
                walk.pre_chain += 1
                link = prechain_link(
                    stream.prev or GENESIS,
                    row.stream_id,
                    version=row.version,
                    position=row.position,
                    topic=row.topic,
                    state=row.state,
                )
            else:
                kind = "replaced" if covered else "forged"
                _add(problems, kind, row, "a row without a chain link after it began")
                link = bytes(32)
            _advance(stream, row, link, seal)
            stream.prev = None if chained_from is not None else link[:16]
            continue
        body_sha = hashlib.sha256(chained.body).digest()
        expected_link = link_of(
            chained.prev,
            row.stream_id,
            version=row.version,
            position=chained.position,
            topic=row.topic,
            header=chained.header,
            body_sha=body_sha,
        )
        if body_sha[:16] != chained.body_digest:
            _add(problems, "edited_payload", row, "the body differs from its digest")
        elif chained.position != row.position:
            moved.append((row, chained.position))
        elif expected_link != chained.link:
            kind = "edited_envelope" if covered else "forged"
            _add(problems, kind, row, "the envelope no longer matches the link")
        elif stream.prev is not None and chained.prev != stream.prev:
            _broken(problems, row, stream, covered=covered)
        _advance(stream, row, chained.link, seal)
    _classify_moves(store, moved, seal, problems)
    _check_seal(walk)
    _check_records(store, walk, expected, keyed)
    _check_sequences(store, walk, chain, issued)
    if witness is not None:
        _check_witness(walk, chain, witness)
    return walk


def _advance(
    stream: _Stream, row: StoredRow, link: bytes, seal: SealBody | None
) -> None:
    stream.head = row.version
    stream.head_position = row.position
    stream.link = link
    stream.prev = link[:16]
    if seal is not None:
        sealed = seal.heads.get(row.stream_id.hex)
        if sealed is not None and sealed[0] == row.version:
            stream.at_seal = link


def _broken(
    problems: list[Problem], row: StoredRow, stream: _Stream, *, covered: bool
) -> None:
    if covered:
        problems.append(
            Problem(
                kind="replaced",
                stream=row.stream_id,
                version=row.version - 1,
                position=stream.head_position,
                message=(
                    f"Version {row.version} does not chain from this row: "
                    "it was rewritten"
                ),
            )
        )
    else:
        _add(problems, "forged", row, f"it does not chain from version {stream.head}")


def _classify_moves(
    store: EventStore,
    moved: list[tuple[StoredRow, int]],
    seal: SealBody | None,
    problems: list[Problem],
) -> None:
    for row, written_at in moved:
        original = store.backend.select_all(
            gt=written_at - 1, limit=1, topics=(), lte=written_at
        )
        if original and original[0].state == row.state:
            covered = seal is not None and row.position <= seal.position
            kind = "replaced" if covered else "forged"
            _add(problems, kind, row, f"a copy of the row at position {written_at}")
        else:
            _add(problems, "reordered", row, f"written at position {written_at}")


def _check_seal(walk: Walk) -> None:
    seal = walk.seal
    if seal is None:
        return
    for stream_hex, (version, link_hex, position) in sorted(seal.heads.items()):
        stream_id = UUID(stream_hex)
        found = walk.streams.get(stream_id)
        if found is None:
            walk.problems.append(
                Problem(
                    kind="deleted",
                    stream=stream_id,
                    version=1,
                    position=position,
                    message=f"Expected the sealed stream at version {version}, "
                    "found it gone",
                )
            )
        elif found.head < version:
            walk.problems.append(
                Problem(
                    kind="truncated",
                    stream=stream_id,
                    version=found.head + 1,
                    position=position,
                    message=(
                        f"Expected the stream at version {version} or later "
                        f"(sealed), found it ending at {found.head}"
                    ),
                )
            )
        elif found.at_seal is not None and found.at_seal.hex() != link_hex:
            reported = {(p.stream, p.version) for p in walk.problems}
            if (stream_id, version) not in reported:
                walk.problems.append(
                    Problem(
                        kind="replaced",
                        stream=stream_id,
                        version=version,
                        position=position,
                        message="The sealed head's link differs from the seal's",
                    )
                )


def _seal_chain(
    store: EventStore, key: str | None, problems: list[Problem]
) -> SealChain:
    """Read every seal in id order and follow their chain (index and ``prev``)."""
    chain = SealChain()
    last_index = 0
    last_digest = ""
    for stored in store.backend.seals():
        chain.count += 1
        body = decode_seal(stored.body)
        if body is None or (
            key is not None and not mac_matches(stored.body, stored.mac, key)
        ):
            problems.append(
                _sealed(
                    "seal_forged",
                    body.position if body else 0,
                    f"Seal {stored.seal_id} does not match its HMAC (key given) or "
                    "does not decode; it is not used",
                )
            )
            continue
        digest = seal_digest(stored.body)
        copied = chain.digests.get(digest)
        if copied is not None:
            problems.append(
                _sealed(
                    "seal_reinserted",
                    body.position,
                    f"Seal {stored.seal_id} is a copy of seal {copied} (to position "
                    f"{body.position}): inserted again; it is not used",
                )
            )
            continue
        chain.digests[digest] = stored.seal_id
        if body.index <= last_index and (body.index > 0 or chain.by_index):
            problems.append(
                _sealed(
                    "seal_reinserted",
                    body.position,
                    f"Seal {stored.seal_id} (index {body.index}, to position "
                    f"{body.position}) comes after seal index {last_index}: an older "
                    "seal inserted out of chain order; it is not used",
                )
            )
            continue
        if body.index > last_index + 1:
            problems.append(
                _sealed(
                    "seal_deleted",
                    body.position,
                    f"Seals of index {last_index + 1}..{body.index - 1} are missing "
                    f"before seal {stored.seal_id} (index {body.index})",
                )
            )
        elif body.index > 0 and body.prev != last_digest:
            problems.append(
                _sealed(
                    "seal_replaced",
                    body.position,
                    f"Seal {stored.seal_id} (index {body.index}) does not chain from "
                    "the seal before it: that seal was changed or replaced",
                )
            )
        chain.accepted = body
        last_digest = digest
        if body.index > 0:
            last_index = body.index
            chain.by_index[body.index] = digest
    return chain


class RecordRows:
    """The rows idempotency records name, checked as the walk passes them.

    Records are taken in the order of their first position and each one's
    positions followed with a heap, so only the records whose rows the walk is
    between are held apart (not one entry per keyed row).
    """

    def __init__(self, records: list[AppendRecord]) -> None:
        self.records = sorted(
            (r for r in records if r.positions), key=lambda r: r.positions[0]
        )
        self.next = 0
        self.heap: list[tuple[int, int, int]] = []  # (position, record, offset)
        self.pending = bool(self.records)

    def check(self, row: StoredRow, problems: list[Problem]) -> None:
        """Check ``row`` against the record naming its position, if any."""
        records = self.records
        while (
            self.next < len(records) and records[self.next].positions[0] <= row.position
        ):
            heapq.heappush(self.heap, (records[self.next].positions[0], self.next, 0))
            self.next += 1
        heap = self.heap
        while heap and heap[0][0] <= row.position:
            position, index, offset = heapq.heappop(heap)
            record = records[index]
            version = record.first_version + offset
            if position < row.position:
                _no_row(record, version, position, problems)
            elif row.stream_id != record.stream_id or row.version != version:
                problems.append(
                    Problem(
                        kind="idempotency_edited",
                        stream=record.stream_id,
                        version=version,
                        position=row.position,
                        message=(
                            f"The idempotency record of key {quote_value(record.key)} "
                            f"expects version {version} of its stream at position "
                            f"{row.position}, found version {row.version} of stream "
                            f"{row.stream_id}"
                        ),
                    )
                )
            if offset + 1 < len(record.positions):
                heapq.heappush(heap, (record.positions[offset + 1], index, offset + 1))
        self.pending = bool(heap) or self.next < len(records)

    def unseen(self, last: int, problems: list[Problem]) -> None:
        """After the walk: positions up to ``last`` a record names but no row held."""
        for index in range(self.next, len(self.records)):
            heapq.heappush(self.heap, (self.records[index].positions[0], index, 0))
        while self.heap and self.heap[0][0] <= last:
            position, index, offset = heapq.heappop(self.heap)
            record = self.records[index]
            _no_row(record, record.first_version + offset, position, problems)
            if offset + 1 < len(record.positions):
                heapq.heappush(
                    self.heap, (record.positions[offset + 1], index, offset + 1)
                )


def _no_row(
    record: AppendRecord, version: int, position: int, problems: list[Problem]
) -> None:
    problems.append(
        Problem(
            kind="idempotency_edited",
            stream=record.stream_id,
            version=version,
            position=position,
            message=(
                f"The idempotency record of key {quote_value(record.key)} names "
                f"position {position}, which holds no row"
            ),
        )
    )


def _check_records(
    store: EventStore, walk: Walk, expected: RecordRows, keyed: list[StoredRow]
) -> None:
    """Records that name no row, keyed rows without a record, the seal's digest."""
    problems = walk.problems
    expected.unseen(walk.last, problems)
    # Read after the rows: the record of every keyed row seen is committed.
    records = store.backend.append_records()
    lasts = {r.positions[-1]: r for r in records if r.positions}
    for row in keyed:
        if row.position not in lasts:
            _add(
                problems,
                "idempotency_deleted",
                row,
                "the last row of an append made under an idempotency key, whose "
                "record is gone (a retry would write it again)",
            )
    flagged = {row.position for row in keyed}
    # Appends made before the flag existed carry none: only a record after the
    # first flagged row must name a flagged one.
    since = min(flagged, default=walk.last + 1)
    for position, record in sorted(lasts.items()):
        if since < position <= walk.last and position not in flagged:
            problems.append(
                Problem(
                    kind="idempotency_edited",
                    stream=record.stream_id,
                    version=record.last_version,
                    position=position,
                    message=(
                        "The idempotency record of key "
                        f"{quote_value(record.key)} names position {position}, "
                        "whose row was not written under a key"
                    ),
                )
            )
    _check_sealed_records(walk, records)


def _check_sealed_records(walk: Walk, records: list[AppendRecord]) -> None:
    """The records the newest seal covers: as many, and the same, as it recorded."""
    problems = walk.problems
    seal = walk.seal
    if seal is None or seal.index == 0:
        return
    if any(p.kind.startswith("idempotency_") for p in problems):
        return  # named row by row already
    count, digest = records_digest(
        r for r in records if max(r.positions, default=0) <= seal.position
    )
    if count < seal.appends:
        problems.append(
            _sealed(
                "idempotency_deleted",
                seal.position,
                f"Expected {seal.appends} idempotency records up to position "
                f"{seal.position} (sealed), found {count}",
            )
        )
    elif digest != seal.appends_digest:
        problems.append(
            _sealed(
                "idempotency_edited",
                seal.position,
                f"The idempotency records up to position {seal.position} differ "
                "from what the seal recorded (a key changed, added or removed)",
            )
        )


def _check_sequences(
    store: EventStore, walk: Walk, chain: SealChain, issued: int
) -> None:
    """Rows above the position sequence; seal ids issued but gone; a cut tail."""
    problems = walk.problems
    for row in store.backend.beyond_sequence():
        _add(
            problems,
            "beyond_sequence",
            row,
            "above the position sequence's last value: no append wrote it, and no "
            "reader sees it",
        )
    if issued > chain.count:
        problems.append(
            _sealed(
                "seal_deleted",
                chain.accepted.position if chain.accepted else 0,
                f"Expected {issued} seals (the ids the database issued), found "
                f"{chain.count}: seals were deleted",
            )
        )
    seal = walk.seal
    if (
        seal is not None
        and seal.position > walk.last
        and not any(p.kind == "truncated" for p in problems)
    ):
        problems.append(
            _sealed(
                "truncated",
                seal.position,
                f"Expected the ledger to reach position {seal.position} (sealed), "
                f"found it ending at {walk.last}",
            )
        )


def _check_witness(
    walk: Walk, chain: SealChain, entries: Sequence[WitnessEntry]
) -> None:
    """Every witnessed seal in the ledger, unchanged; the ledger reaching it."""
    problems = walk.problems
    checked: set[tuple[int, str]] = set()
    for entry in entries:
        if (entry.index, entry.digest) in checked:
            continue
        checked.add((entry.index, entry.digest))
        if entry.digest in chain.digests:
            continue
        if entry.index in chain.by_index:
            kind = "seal_replaced"
            why = "differs from what the witness recorded"
        else:
            kind = "seal_deleted"
            why = "is gone from the ledger"
        problems.append(
            _sealed(
                kind,
                entry.position,
                f"Witnessed seal {entry.seal} (index {entry.index}, to position "
                f"{entry.position}) {why}",
            )
        )
    walk.witnessed = len(checked)
    highest = max(entries, key=lambda e: e.position)
    if highest.position > walk.last:
        problems.append(
            _sealed(
                "truncated",
                highest.position,
                f"Expected the ledger to reach position {highest.position} "
                f"(witnessed seal {highest.seal}), found it ending at {walk.last}",
            )
        )


def _sealed(kind: str, position: int, message: str) -> Problem:
    return Problem(
        kind=kind, stream=None, version=0, position=position, message=message
    )


def _decode(store: EventStore, row: StoredRow, problems: list[Problem]) -> None:
    try:
        store.decode(row)
    except UnknownEventTypeError as e:
        problems.append(_problem("unknown_type", row, str(e)))
    except CorruptRecordError as e:
        problems.append(_problem("corrupt", row, str(e)))


def _add(problems: list[Problem], kind: str, row: StoredRow, why: str) -> None:
    problems.append(
        _problem(kind, row, f"Position {row.position} ({row.topic}): {why}")
    )


def _problem(kind: str, row: StoredRow, message: str) -> Problem:
    return Problem(
        kind=kind,
        stream=row.stream_id,
        version=row.version,
        position=row.position,
        message=message,
    )
