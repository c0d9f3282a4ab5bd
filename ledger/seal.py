"""``seal``: record every stream's head and the last position, signed and chained.

A seal is written only over a ledger that verifies clean (sealing tampered history
would bless it). On a ledger written before the hash chain, the first seal is where
the links of the old rows are computed and pinned. Seals are append-only rows of
their own table and a chain of their own: each records its index and the digest
of the seal before it, and covers the idempotency records (their count and a
digest). With a witness (``ledger.witness``) each seal's digest is also recorded
outside the ledger's database.
"""

from __future__ import annotations

import os

import msgspec

from turnledger.ledger.chain import (
    SEAL_KEY_ENV,
    SealBody,
    decode_seal,
    encode_seal,
    records_digest,
    seal_digest,
    sign,
)
from turnledger.ledger.errors import LedgerLockedError
from turnledger.ledger.frame import now_us
from turnledger.ledger.store import EventStore
from turnledger.ledger.verify import Problem, walk_ledger
from turnledger.ledger.witness import Witness, WitnessEntry, WitnessError

_TRIES = 20


class SealReport(msgspec.Struct, frozen=True, kw_only=True):
    """What ``seal`` did.

    Attributes:
        seal_id: The new seal's id (0 when refused).
        position: The last position it covers.
        streams: The stream heads it records.
        signed: Whether it carries an HMAC.
        problems: Why it was refused (empty when written).
        index: Its place in the seal chain (0 when refused).
        witness: What a witness records of it (``None`` when refused).
    """

    seal_id: int
    position: int
    streams: int
    signed: bool
    problems: tuple[Problem, ...]
    index: int = 0
    witness: WitnessEntry | None = None

    @property
    def ok(self) -> bool:
        """Whether the seal was written."""
        return not self.problems


def seal_key_from_env() -> str | None:
    """Return the seal key of ``TURNLEDGER_SEAL_KEY`` (``None`` when unset or empty)."""
    return os.environ.get(SEAL_KEY_ENV) or None


def seal(
    store: EventStore, *, key: str | None = None, witness: Witness | None = None
) -> SealReport:
    """Verify the ledger, then record a seal of it (and witness it).

    Args:
        store: The ledger.
        key: The HMAC key; defaults to ``TURNLEDGER_SEAL_KEY``; none: unsigned.
        witness: Where the seal's digest is also recorded, outside the ledger.

    Returns:
        The seal written, or the problems that refused it (nothing written).

    Raises:
        WitnessError: The seal was written, the witness refused its entry.
    """
    key = key if key is not None else seal_key_from_env()
    walk = walk_ledger(store, seal_key=key)
    heads = {
        stream_id.hex: (found.head, found.link.hex(), found.head_position)
        for stream_id, found in sorted(walk.streams.items())
    }
    if walk.problems:
        return SealReport(
            seal_id=0,
            position=walk.last,
            streams=len(heads),
            signed=bool(key),
            problems=tuple(walk.problems),
        )
    records = [
        r
        for r in store.backend.append_records()
        if max(r.positions, default=0) <= walk.last
    ]
    appends, appends_digest = records_digest(records)
    for _ in range(_TRIES):
        latest = store.backend.latest_seal()
        before = decode_seal(latest.body) if latest is not None else None
        index = (before.index if before is not None else 0) + 1
        body = encode_seal(
            SealBody(
                position=walk.last,
                sealed_at_us=now_us(),
                heads=heads,
                index=index,
                prev=seal_digest(latest.body) if latest is not None else "",
                appends=appends,
                appends_digest=appends_digest,
            )
        )
        after = latest.seal_id if latest is not None else 0
        seal_id = store.backend.insert_seal(body, sign(body, key), after=after)
        if seal_id:
            break
    else:
        msg = f"Another process kept sealing: no seal written after {_TRIES} tries"
        raise LedgerLockedError(msg)
    entry = WitnessEntry(
        ledger=store.backend.ledger_id or "",
        index=index,
        seal=seal_id,
        position=walk.last,
        digest=seal_digest(body),
    )
    if witness is not None:
        try:
            witness.record(entry)
        except WitnessError as e:
            msg = f"Seal {seal_id} was written but not witnessed: {e}"
            raise WitnessError(msg) from e
    return SealReport(
        seal_id=seal_id,
        position=walk.last,
        streams=len(heads),
        signed=bool(key),
        problems=(),
        index=index,
        witness=entry,
    )
