"""``verify``: prove the ledger is whole; ``seal``: pin it.

``verify`` reads every row in position order and checks that every event decodes,
that every stream's versions are contiguous from 1, and every row's hash chain
link (``ledger.chain``); then it checks the latest seal (its HMAC when a seal key
is given) against what it found. Problems are collected, not raised, so one run
lists them all, each with ``kind``, ``stream``, ``version`` and ``position``:

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
- ``truncated``: a stream ends before the version the last seal recorded;
- ``seal_forged``: the latest seal's HMAC does not match the key (it is then
  not used).

Rows written before the chain existed are counted as ``pre_chain``, not problems.
What ``verify`` cannot see: a row appended after the last seal by someone who
writes the database directly and computes the chain correctly; anything, when the
seals themselves were rewritten and no key is set; and changes after an older seal
when the newer seals were deleted (only the latest seal left is checked: keep the
id and position ``turnledger seal`` prints somewhere else to notice that). Seal
often, and set ``TURNLEDGER_SEAL_KEY``.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from uuid import UUID

import msgspec

from turnledger.ledger.backend import StoredRow
from turnledger.ledger.chain import (
    GENESIS,
    SEAL_KEY_ENV,
    SealBody,
    decode_seal,
    link_of,
    mac_matches,
    parse_chained,
    prechain_link,
)
from turnledger.ledger.errors import CorruptRecordError, UnknownEventTypeError
from turnledger.ledger.store import EventStore


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
        sealed_position: The position the latest valid seal covers (0: no seal).
        problems: Every problem, in the order found.
    """

    events: int
    streams: int
    last_position: int
    pre_chain: int
    sealed_position: int
    problems: tuple[Problem, ...]

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
class Walk:
    """What one pass over the ledger found (``seal`` uses it too)."""

    problems: list[Problem]
    streams: dict[UUID, _Stream]
    events: int
    last: int
    pre_chain: int
    seal: SealBody | None


def verify(
    store: EventStore, *, page_size: int = 1000, seal_key: str | None = None
) -> VerifyReport:
    """Check every row of the ledger and the latest seal.

    Args:
        store: The ledger to check.
        page_size: How many rows to read at a time.
        seal_key: The HMAC key seals are signed with (checked when given);
            defaults to ``TURNLEDGER_SEAL_KEY``.

    Returns:
        The counts and every problem found.
    """
    if seal_key is None:
        seal_key = os.environ.get(SEAL_KEY_ENV) or None
    walk = walk_ledger(store, page_size=page_size, seal_key=seal_key)
    return VerifyReport(
        events=walk.events,
        streams=len(walk.streams),
        last_position=walk.last,
        pre_chain=walk.pre_chain,
        sealed_position=walk.seal.position if walk.seal else 0,
        problems=tuple(walk.problems),
    )


def walk_ledger(  # noqa: C901 - one pass, one check per tampering kind
    store: EventStore, *, page_size: int = 1000, seal_key: str | None = None
) -> Walk:
    """Read the whole ledger once, checking each row and then the latest seal."""
    problems: list[Problem] = []
    seal = _latest_seal(store, seal_key, problems)
    walk = Walk(problems, {}, 0, 0, 0, seal)
    moved: list[tuple[StoredRow, int]] = []
    chained_from: int | None = None
    for row in store.iter_rows(page_size=page_size):
        walk.events += 1
        walk.last = max(walk.last, row.position)
        _decode(store, row, problems)
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
        expected = link_of(
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
        elif expected != chained.link:
            kind = "edited_envelope" if covered else "forged"
            _add(problems, kind, row, "the envelope no longer matches the link")
        elif stream.prev is not None and chained.prev != stream.prev:
            _broken(problems, row, stream, covered=covered)
        _advance(stream, row, chained.link, seal)
    _classify_moves(store, moved, seal, problems)
    _check_seal(walk)
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


def _latest_seal(
    store: EventStore, key: str | None, problems: list[Problem]
) -> SealBody | None:
    stored = store.backend.latest_seal()
    if stored is None:
        return None
    body = decode_seal(stored.body)
    forged = body is None or (
        key is not None and not mac_matches(stored.body, stored.mac, key)
    )
    if forged:
        problems.append(
            Problem(
                kind="seal_forged",
                stream=None,
                version=0,
                position=body.position if body else 0,
                message=f"Seal {stored.seal_id} does not match its HMAC (key given); "
                "it is not used",
            )
        )
        return None
    return body


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
