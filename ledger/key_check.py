"""Checking a cipher key against the ledger before anything is written (issue #17).

Encrypted payloads are AES-GCM (``eventsourcing.cryptography.AESCipher``): a
wrong key cannot decrypt them, and reading with one is a
:class:`~turnledger.ledger.errors.CorruptRecordError` that says the body does
not decrypt, never garbage. Writing with one, though, used to be accepted, and
left rows no later reader with the right key could decrypt.

:func:`check_cipher_key` closes that. The ledger records the **fingerprint** of
its key (:func:`key_fingerprint`: an HMAC-SHA256 keyed with the key over a fixed
label, so the key cannot be recovered from it) the first time a store opens it
with a key (read from the store's cipher); from then on a store with another
key is refused in one line, wherever the ledger's first encrypted event lies
(the refusal names the event's position when it is within the first
:data:`SCAN_ROWS` rows). A ledger encrypted before
fingerprints existed gets one at its next open with a key, after its first
encrypted event (searched through the whole ledger, once) decrypts with that
key. A store without a key is refused on a ledger whose first
:data:`SCAN_ROWS` rows hold an encrypted event, or that recorded a fingerprint
and holds an encrypted event anywhere. Both refusals are a
:class:`CipherKeyError`, before any write.

:func:`~turnledger.ledger.store.open_store` runs the check before it returns a
store (SQLite and PostgreSQL alike), so the command line, the bootstrap, the
adapters and library callers are all refused before their first append;
``open_store(..., check_key=False)`` skips it, and a store opened so with a
wrong key reads its encrypted events as a "does not decrypt"
:class:`~turnledger.ledger.errors.CorruptRecordError`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from typing import Final, Protocol

from turnledger.ledger.backend import Backend, StoredRow
from turnledger.ledger.codec import MsgspecMapper
from turnledger.ledger.envelope import Recorded
from turnledger.ledger.errors import CorruptRecordError, LedgerError

CIPHER_KEY_ENV: Final = "TURNLEDGER_CIPHER_KEY"
"""The environment variable holding the base64 AES key for encryption at rest."""

SCAN_ROWS: Final = 10_000
"""How many rows from the start are searched for the first encrypted one where no
fingerprint decides (a store without a key on a ledger without one), and for the
position a refused key's message names."""

_EVERY_ROW: Final = 2**62
_LABEL: Final = b"turnledger cipher key fingerprint v1"


def key_fingerprint(key: str | bytes) -> str:
    """Return a cipher key's fingerprint (HMAC-SHA256, hex; never the key).

    Args:
        key: The base64 key as configured, or its raw bytes.
    """
    raw = key if isinstance(key, bytes) else _raw_key(key)
    return hmac.new(raw, _LABEL, hashlib.sha256).hexdigest()


def _raw_key(key: str) -> bytes:
    try:
        return base64.b64decode(key, validate=True)
    except (binascii.Error, ValueError):
        return key.encode()


def _cipher_fingerprint(cipher: object) -> str | None:
    """The fingerprint of a cipher's key (AES: its ``key`` bytes), None if unknown."""
    raw = getattr(cipher, "key", None)
    return key_fingerprint(raw) if isinstance(raw, bytes) and raw else None


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
        scan_rows: How many rows from the start are searched for the first
            encrypted one where no fingerprint decides (a store without a key
            on a ledger without one), and for the position a refusal names.

    Raises:
        CipherKeyError: The store has a key and the ledger recorded another's
            fingerprint, or its first encrypted event does not decrypt with it
            (a wrong key); or the store has no key and the ledger holds
            encrypted events (a missing key).
    """
    backend = store.backend
    cipher = store.mapper.cipher
    recorded = backend.cipher_fingerprint(None)
    if cipher is None:
        limit = _EVERY_ROW if recorded is not None else scan_rows
        row = backend.first_encrypted(limit) if limit > 0 else None
        if row is not None:
            msg = (
                f"Expected a cipher key ({CIPHER_KEY_ENV}) for this ledger, found"
                f" none: its events are encrypted (first at position {row.position});"
                " nothing was written"
            )
            raise CipherKeyError(msg)
        return
    fingerprint = _cipher_fingerprint(cipher)
    if fingerprint is None:  # a cipher whose key cannot be read: decrypt only
        _decrypts_first(store, scan_rows)
        return
    if recorded is None:
        # A new ledger, or one from before fingerprints: its first encrypted
        # event (searched once, through the whole ledger) must decrypt.
        _decrypts_first(store, _EVERY_ROW)
        backend.cipher_fingerprint(fingerprint)
        return
    if not hmac.compare_digest(recorded, fingerprint):
        _decrypts_first(store, scan_rows)  # names the position when it is near
        msg = (
            "Expected the cipher key this ledger was encrypted with, found"
            " another: the ledger recorded another key's fingerprint, and what"
            " that key encrypts does not decrypt with this one; nothing was written"
        )
        raise CipherKeyError(msg)


def _decrypts_first(store: KeyedStore, limit: int) -> None:
    """Refuse the store's key if the first encrypted row does not decrypt with it."""
    if limit <= 0:
        return
    row = store.backend.first_encrypted(limit)  # the database scans
    if row is None:
        return
    try:
        store.decode(row)
    except CorruptRecordError:
        msg = (
            "Expected the cipher key this ledger was encrypted with, found"
            f" another: the event at position {row.position} does not decrypt"
            " with it; nothing was written"
        )
        raise CipherKeyError(msg) from None
