"""``seal``: record every stream's head and the last position, signed.

A seal is written only over a ledger that verifies clean (sealing tampered history
would bless it). On a ledger written before the hash chain, the first seal is where
the links of the old rows are computed and pinned. Seals are append-only rows of
their own table; ``verify`` checks the latest one.
"""

from __future__ import annotations

import os

import msgspec

from turnledger.ledger.chain import SEAL_KEY_ENV, SealBody, encode_seal, sign
from turnledger.ledger.frame import now_us
from turnledger.ledger.store import EventStore
from turnledger.ledger.verify import Problem, walk_ledger


class SealReport(msgspec.Struct, frozen=True, kw_only=True):
    """What ``seal`` did.

    Attributes:
        seal_id: The new seal's id (0 when refused).
        position: The last position it covers.
        streams: The stream heads it records.
        signed: Whether it carries an HMAC.
        problems: Why it was refused (empty when written).
    """

    seal_id: int
    position: int
    streams: int
    signed: bool
    problems: tuple[Problem, ...]

    @property
    def ok(self) -> bool:
        """Whether the seal was written."""
        return not self.problems


def seal_key_from_env() -> str | None:
    """Return the seal key of ``TURNLEDGER_SEAL_KEY`` (``None`` when unset or empty)."""
    return os.environ.get(SEAL_KEY_ENV) or None


def seal(store: EventStore, *, key: str | None = None) -> SealReport:
    """Verify the ledger, then record a seal of it.

    Args:
        store: The ledger.
        key: The HMAC key; defaults to ``TURNLEDGER_SEAL_KEY``; none: unsigned.

    Returns:
        The seal written, or the problems that refused it (nothing written).
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
    body = encode_seal(SealBody(position=walk.last, sealed_at_us=now_us(), heads=heads))
    seal_id = store.backend.insert_seal(body, sign(body, key))
    return SealReport(
        seal_id=seal_id,
        position=walk.last,
        streams=len(heads),
        signed=bool(key),
        problems=(),
    )
