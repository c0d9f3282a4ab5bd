"""Checking a cipher key against the ledger before anything is written (issue #17).

Encrypted payloads are AES-GCM (``eventsourcing.cryptography.AESCipher``): a
wrong key cannot decrypt them, and reading with one is a
:class:`~turnledger.ledger.errors.CorruptRecordError` that says the body does
not decrypt, never garbage. Writing with one, though, used to be accepted, and
left rows no later reader with the right key could decrypt.

:func:`check_cipher_key` closes that: the ledger's first encrypted event is its
key check value. A store with a key must decrypt it, a store without a key must
not write to a ledger that has one, and both are refused with a
:class:`CipherKeyError` before any write. No separate value is stored: the first
encrypted row (the oldest, so it never changes once written) is the check. A
ledger with no encrypted row yet accepts any key, and its first encrypted append
becomes the check. Finding it is one query: the database reads the frame header
of the first :data:`SCAN_ROWS` rows and returns only the first encrypted row.

:func:`~turnledger.ledger.store.open_store` runs the check before it returns a
store (SQLite and PostgreSQL alike), so the command line, the bootstrap, the
adapters and library callers are all refused before their first append;
``open_store(..., check_key=False)`` skips it, and a store opened so with a
wrong key reads its encrypted events as a "does not decrypt"
:class:`~turnledger.ledger.errors.CorruptRecordError`.
"""

from __future__ import annotations

from typing import Final, Protocol

from turnledger.ledger.backend import Backend, StoredRow
from turnledger.ledger.codec import MsgspecMapper
from turnledger.ledger.envelope import Recorded
from turnledger.ledger.errors import CorruptRecordError, LedgerError

CIPHER_KEY_ENV: Final = "TURNLEDGER_CIPHER_KEY"
"""The environment variable holding the base64 AES key for encryption at rest."""

SCAN_ROWS: Final = 10_000
"""How many rows from the start are searched for the first encrypted one."""


class CipherKeyError(LedgerError):
    """The cipher key does not fit the ledger (wrong, or missing)."""


class KeyedStore(Protocol):
    """What the check reads of a store (:class:`~ledger.store.EventStore` is one).

    Its ``backend`` finds the first encrypted row, its ``mapper`` holds the key
    (or none), and ``decode`` decrypts a row with it.
    """

    @property
    def backend(self) -> Backend:
        """Where the rows live."""
        ...

    @property
    def mapper(self) -> MsgspecMapper:
        """The mapper holding the store's cipher (``None`` without a key)."""
        ...

    def decode(self, row: StoredRow) -> Recorded:
        """Decode (and decrypt) one raw row."""
        ...


def check_cipher_key(store: KeyedStore, *, scan_rows: int = SCAN_ROWS) -> None:
    """Refuse a store whose cipher key does not fit its ledger.

    Args:
        store: An open store, with or without a cipher key.
        scan_rows: How many rows from the start to look at for the first
            encrypted one (a ledger encrypted from its start has it first).

    Raises:
        CipherKeyError: The store has a key and the ledger's first encrypted
            event does not decrypt with it (a wrong key), or the store has no key
            and the ledger holds encrypted events (a missing key).
    """
    if scan_rows <= 0:
        return
    row = store.backend.first_encrypted(scan_rows)  # the database scans
    if row is None:
        return
    if store.mapper.cipher is None:
        msg = (
            f"Expected a cipher key ({CIPHER_KEY_ENV}) for this ledger, found none:"
            f" its events are encrypted (first at position {row.position});"
            " nothing was written"
        )
        raise CipherKeyError(msg)
    try:
        store.decode(row)
    except CorruptRecordError:
        msg = (
            "Expected the cipher key this ledger was encrypted with, found"
            f" another: the event at position {row.position} does not decrypt"
            " with it; nothing was written"
        )
        raise CipherKeyError(msg) from None
