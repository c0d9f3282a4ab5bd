"""Forget that forgets: per-entry keys for memory payloads (crypto-shredding).

With shredding on, the content of a ``memory.stored`` event is sealed with a key
of its own (AES-GCM) before it reaches the ledger; the keys live in a small
key store beside it. Forgetting the entry destroys its keys: the ciphertext left
in the append-only ledger can no longer be read by anyone, the memory projection
drops the row, and a rebuild still succeeds, rendering ``[forgotten]``.

With a cipher key the key store is a SQLCipher database keyed with the key
derived for it (``ledger.file_keys``); one that does not fit the key is
refused at open (``ledger.sqlite.encrypted``).
"""

from __future__ import annotations

import base64
import os
import threading
from typing import Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from turnledger.ledger.file_keys import file_key
from turnledger.ledger.sqlite.encrypted import connect_file
from turnledger.projections.memory.errors import typed_memory_errors

SEALED_PREFIX: Final = "tl-sealed:v1:"
"""How a sealed content starts: ``tl-sealed:v1:<key id>:<base64 nonce+ciphertext>``."""

FORGOTTEN: Final = "[forgotten]"
"""What a sealed content reads as once its key is destroyed."""

CLEAR_KEYS_REMEDY: Final = (
    "encrypt it in place with turnledger encrypt-files (its keys cannot be"
    " rebuilt from the ledger: never delete it)"
)
"""What the refusal of a clear key store with a cipher key set tells the user."""


class ShreddingError(ValueError):
    """A sealed content is malformed or does not decrypt with its key."""


def is_sealed(content: str) -> bool:
    """Return whether a content is sealed."""
    return content.startswith(SEALED_PREFIX)


@typed_memory_errors("key")
class KeyStore:
    """Per-entry keys in a SQLite file that overwrites what it deletes.

    Args:
        path: The key file (``secure_delete`` is on, and every delete is
            checkpointed, so a destroyed key leaves no copy behind).
        cipher_key: The base64 cipher key (as ``open_store`` takes it); None
            reads ``TURNLEDGER_CIPHER_KEY``, ``""`` means none. With a key the
            file is encrypted (SQLCipher).
    """

    def __init__(self, path: str, *, cipher_key: str | None = None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._db = connect_file(
            path,
            key=file_key("keys", cipher_key),
            what="memory key store",
            clear_remedy=CLEAR_KEYS_REMEDY,
        )
        self._db.execute("PRAGMA secure_delete=ON")
        self._db.execute("PRAGMA journal_mode=DELETE")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS entry_keys (key_id TEXT PRIMARY KEY, "
            "agent TEXT NOT NULL, memory_key TEXT NOT NULL, secret BLOB NOT NULL)"
        )
        self._db.execute(
            "CREATE INDEX IF NOT EXISTS entry_keys_owner "
            "ON entry_keys(agent, memory_key)"
        )

    def seal(self, content: str, *, key_id: str, agent: str, memory_key: str) -> str:
        """Encrypt a content under a new key recorded for (agent, memory key)."""
        secret = AESGCM.generate_key(bit_length=256)
        with self._lock:
            self._db.execute(
                "INSERT INTO entry_keys VALUES (?,?,?,?)",
                (key_id, agent, memory_key, secret),
            )
        nonce = os.urandom(12)
        sealed = AESGCM(secret).encrypt(nonce, content.encode(), key_id.encode())
        payload = base64.b64encode(nonce + sealed).decode()
        return f"{SEALED_PREFIX}{key_id}:{payload}"

    def open(self, content: str) -> str:
        """Return the plain content, or ``[forgotten]`` when its key is gone.

        Raises:
            ShreddingError: The sealed content is malformed or tampered with.
        """
        if not is_sealed(content):
            return content
        key_id, sep, payload = content[len(SEALED_PREFIX) :].partition(":")
        if not sep:
            msg = f"Expected {SEALED_PREFIX}<key id>:<payload>, found no payload"
            raise ShreddingError(msg)
        with self._lock:
            row = self._db.execute(
                "SELECT secret FROM entry_keys WHERE key_id=?", (key_id,)
            ).fetchone()
        if row is None:
            return FORGOTTEN
        raw = base64.b64decode(payload)
        try:
            return AESGCM(row[0]).decrypt(raw[:12], raw[12:], key_id.encode()).decode()
        except InvalidTag as e:
            msg = f"Sealed content under key {key_id!r} does not decrypt"
            raise ShreddingError(msg) from e

    def destroy(self, *, agent: str, memory_key: str) -> int:
        """Destroy every key of (agent, memory key); return how many."""
        with self._lock:
            cursor = self._db.execute(
                "DELETE FROM entry_keys WHERE agent=? AND memory_key=?",
                (agent, memory_key),
            )
            self._db.execute("VACUUM")
        return cursor.rowcount

    def count(self) -> int:
        """Return how many keys are held."""
        with self._lock:
            return int(
                self._db.execute("SELECT count(*) FROM entry_keys").fetchone()[0]
            )

    def close(self) -> None:
        """Close the key file."""
        with self._lock:
            self._db.close()
