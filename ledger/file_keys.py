"""One cipher key, one key per file: the keys of the SQLite files beside a ledger.

With ``TURNLEDGER_CIPHER_KEY`` set, the ledger's payloads are AES-GCM with that
key (``ledger.store``), and every SQLite file that holds content beside it (the
view store, the SQLite memory databases, the memory key store) is a SQLCipher
database (``ledger.sqlite.encrypted``). Each file's key is derived from the one
cipher key by HKDF-SHA256 with a label naming its purpose
(:func:`derive_file_key`): one key to keep, and a file of one kind never opens
with the key of another.

The cipher key is the one the ledger uses: given as ``cipher_key`` (base64, as
:func:`~turnledger.ledger.store.open_store` takes it), else the environment
variable; an empty string means no key. :func:`cipher_key_of` returns the key a
store was opened with, so the files opened beside it use the same one.
"""

from __future__ import annotations

import base64
import binascii
import os
from typing import Final, Literal, Protocol, TypeAlias

from turnledger.ledger.codec import MsgspecMapper
from turnledger.ledger.errors import ConfigurationError
from turnledger.ledger.key_check import CIPHER_KEY_ENV, CipherKeyError

__all__ = [
    "FILE_KEY_BYTES",
    "FileKeyError",
    "FilePurpose",
    "MappedStore",
    "SQLCipherMissingError",
    "cipher_key_of",
    "decode_cipher_key",
    "derive_file_key",
    "file_key",
]

FilePurpose: TypeAlias = Literal["views", "memory", "keys", "erasure"]
"""What a file holds: the view store, a SQLite memory database, the memory key
store, the erasure key store (``ledger.subject_keys``)."""

FILE_KEY_BYTES: Final = 32
"""A file's SQLCipher key: 256 bits, passed raw (no passphrase stretching)."""

_LABEL_PREFIX: Final = b"turnledger "
_AES_KEY_SIZES: Final = (16, 24, 32)


class MappedStore(Protocol):
    """What :func:`cipher_key_of` reads of a store (``EventStore`` is one)."""

    @property
    def mapper(self) -> MsgspecMapper:
        """The mapper holding the store's cipher (``None`` without a key)."""
        ...


class FileKeyError(CipherKeyError):
    """A file beside the ledger does not fit the cipher key (wrong, missing, clear).

    Attributes:
        path: The file refused.
    """

    def __init__(self, message: str, *, path: str) -> None:
        self.path = path
        super().__init__(message)


class SQLCipherMissingError(ConfigurationError):
    """A cipher key is set but SQLCipher (the ``sqlcipher`` extra) is not installed."""


def derive_file_key(cipher_key: bytes, purpose: FilePurpose) -> bytes:
    """Return the SQLCipher key of a file kind, derived from the cipher key.

    HKDF-SHA256 (RFC 5869) without salt, its info the label ``turnledger
    <purpose>`` (``turnledger views``, ``turnledger memory``, ``turnledger
    keys``, ``turnledger erasure``), :data:`FILE_KEY_BYTES` long.

    Args:
        cipher_key: The raw cipher key (16, 24 or 32 bytes).
        purpose: What the file holds.
    """
    # Loaded only for a ledger with a key (a clear ledger's commands start without).
    from cryptography.hazmat.primitives import hashes  # noqa: PLC0415
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF  # noqa: PLC0415

    return HKDF(
        algorithm=hashes.SHA256(),
        length=FILE_KEY_BYTES,
        salt=None,
        info=_LABEL_PREFIX + purpose.encode(),
    ).derive(cipher_key)


def file_key(purpose: FilePurpose, cipher_key: str | None = None) -> bytes | None:
    """Return a file's key from the cipher key, or None without one.

    Args:
        purpose: What the file holds.
        cipher_key: The base64 cipher key; None reads ``TURNLEDGER_CIPHER_KEY``;
            an empty string means no key.

    Raises:
        ConfigurationError: The key is not base64 of 16, 24 or 32 bytes.
    """
    text = cipher_key if cipher_key is not None else os.environ.get(CIPHER_KEY_ENV)
    if not text:
        return None
    return derive_file_key(decode_cipher_key(text), purpose)


def decode_cipher_key(text: str) -> bytes:
    """Return the raw bytes of a base64 cipher key.

    Raises:
        ConfigurationError: It is not base64 of 16, 24 or 32 bytes.
    """
    try:
        raw = base64.b64decode(text.encode(), validate=False)
    except (binascii.Error, ValueError, UnicodeEncodeError) as e:
        msg = f"Expected a base64 AES key of 16, 24 or 32 bytes, found another ({e})"
        raise ConfigurationError(msg) from None
    if len(raw) not in _AES_KEY_SIZES:
        msg = (
            "Expected a base64 AES key of 16, 24 or 32 bytes, found one of"
            f" {len(raw)} bytes"
        )
        raise ConfigurationError(msg)
    return raw


def cipher_key_of(store: MappedStore) -> str:
    """Return the base64 cipher key a store was opened with ('' without one).

    The files opened beside a ledger take it, so they are keyed as the ledger
    is, whether the key came from the environment or from ``open_store``.
    """
    raw = getattr(store.mapper.cipher, "key", None)
    return base64.b64encode(raw).decode() if isinstance(raw, bytes) else ""
