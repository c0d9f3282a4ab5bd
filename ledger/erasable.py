"""Crypto-shredding of the ledger's payloads: which events are sealed, and how.

With erasure on (``[privacy] erasable = true``, or a cipher key set), the store
seals the body of every event of an erasable subject under that subject's own
data key (:mod:`ledger.subject_keys`) before it is chained and written:

- every event of a **session** stream, under the session's key (created with
  its ``session.opened`` or ``session.forked``; a session erased and then
  continued gets a new one);
- every ``memory.stored`` event, under a key of its own listed with its agent,
  memory key and the session key that wrote it;
- every ``knowledge.captured`` triple, under a key of its own listed with its
  agent.

A sealed body is ``key id (16 bytes) | nonce (12) | AES-GCM ciphertext`` (the
key id is the associated data); the frame's header says so (``FLAG_SEALED``)
and stays clear, and with a cipher key the sealed body is encrypted again under
it. The hash chain links the stored bytes, so ``verify`` passes after a key is
destroyed. Reading a row whose key was destroyed gives an
:class:`~ledger.events.erasure.Erased` placeholder naming its type, never an
error. Sessions recorded before erasure was on, the memory stream's forget and
supersede events (they name keys, no content) and the erasure receipts stay in
clear.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final, Protocol
from uuid import UUID

from turnledger.ledger.chain import BODY_OFFSET, CHAIN_FORMAT
from turnledger.ledger.errors import CorruptRecordError
from turnledger.ledger.events import (
    Event,
    KnowledgeCaptured,
    MemoryStored,
    SessionForked,
    SessionOpened,
)
from turnledger.ledger.frame import FLAG_ENCRYPTED, FLAG_SEALED, HEADER_SIZE
from turnledger.ledger.frame_decode import Opener
from turnledger.ledger.subject_keys import (
    KEY_ID_BYTES,
    ErasureKeysError,
    SubjectKeyStore,
    keys_path,
    open_postgres_keys,
    open_sqlite_keys,
    raw_cipher_key,
)

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    from turnledger.ledger.backend import Backend, StoredRow
    from turnledger.ledger.codec import MsgspecMapper

Seal = Callable[[Event, bytes], bytes | None]
"""Seals one encoded event body, or returns ``None`` to leave it as it is."""

_NONCE: Final = 12
_ENTRIES: Final = (MemoryStored, KnowledgeCaptured)
_HEAD: Final = KEY_ID_BYTES + _NONCE


def _invalid_tag() -> type[Exception]:
    from cryptography.exceptions import InvalidTag  # noqa: PLC0415

    return InvalidTag


def _aead(secret: bytes) -> AESGCM:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM  # noqa: PLC0415

    return AESGCM(secret)


def _sealed(key_id: bytes, aead: AESGCM, body: bytes) -> bytes:
    nonce = os.urandom(_NONCE)
    return key_id + nonce + aead.encrypt(nonce, body, key_id)


class Sealer:
    """Seals the events of erasable subjects, and opens them while keys live.

    Args:
        keys: The ledger's erasure key store.
        sealing: Seal new events (erasure on); ``False`` only opens what was
            sealed before.
    """

    def __init__(self, keys: SubjectKeyStore, *, sealing: bool) -> None:
        self.keys = keys
        self.sealing = sealing

    def plan(self, stream_id: UUID, events: Sequence[Event]) -> Seal | None:
        """Return how the events of one append to ``stream_id`` are sealed.

        ``None`` when none is (erasure off, or a stream of no erasable subject).
        """
        if not self.sealing:
            return None
        session = self._session_key(stream_id, events)
        if session is None and not any(isinstance(e, _ENTRIES) for e in events):
            return None

        aead = None if session is None else _aead(session[1])

        def seal(event: Event, body: bytes) -> bytes | None:
            if isinstance(event, KnowledgeCaptured):
                # Listed by agent only: nothing selects a triple by its text.
                key_id, secret = self.keys.create(
                    "knowledge", stream_id, agent=event.agent, subject=""
                )
                return _sealed(key_id, _aead(secret), body)
            if isinstance(event, MemoryStored):
                key_id, secret = self.keys.create(
                    "memory",
                    stream_id,
                    agent=event.agent,
                    subject=event.key,
                    session=event.session or "",
                )
                return _sealed(key_id, _aead(secret), body)
            if session is None or aead is None:
                return None
            return _sealed(session[0], aead, body)

        return seal

    def _session_key(
        self, stream_id: UUID, events: Sequence[Event]
    ) -> tuple[bytes, bytes] | None:
        found = self.keys.session_key(stream_id)
        if found is not None:
            return found
        opened = next(
            (e for e in events if isinstance(e, SessionOpened | SessionForked)), None
        )
        if opened is not None:
            return self.keys.create(
                "session",
                stream_id,
                agent=opened.agent,
                subject=opened.session_key,
            )
        agent = self.keys.tombstone(stream_id)
        if agent is None:
            return None  # not a session, or one recorded before erasure was on
        return self.keys.create("session", stream_id, agent=agent, subject="")

    def open(self, body: bytes, where: Callable[[], str]) -> bytes | None:
        """Return a sealed body's plain bytes, or ``None`` once its key is destroyed.

        The key store is checked for destroyed keys at each call (one row read
        alone); :meth:`opener` does it once for a whole read call.

        Raises:
            CorruptRecordError: The body is too short, or does not decrypt with
                its key (tampered with).
        """
        return self.opener()(body, where)

    def opener(self) -> Opener:
        """Return :meth:`open` for one read call (rows of one ``read_stream``).

        The key store is checked for keys destroyed by another connection once,
        now (:meth:`~ledger.subject_keys.SubjectKeyStore.reader`): a read that
        starts after an erasure committed reads its rows as erased. Each data
        key is looked up, and its AES-GCM context made, once per call.
        """
        lookup = self.keys.reader()
        opened: dict[bytes, AESGCM | None] = {}

        def open_body(body: bytes, where: Callable[[], str]) -> bytes | None:
            if len(body) < _HEAD:
                msg = (
                    f"Corrupt record at {where()}: expected a sealed body of at"
                    f" least {_HEAD} bytes, found {len(body)}"
                )
                raise CorruptRecordError(msg)
            key_id = body[:KEY_ID_BYTES]
            if key_id in opened:
                aead = opened[key_id]
            else:
                secret = lookup(key_id)
                aead = opened[key_id] = None if secret is None else _aead(secret)
            if aead is None:
                return None
            try:
                return aead.decrypt(body[KEY_ID_BYTES:_HEAD], body[_HEAD:], key_id)
            except _invalid_tag():
                msg = (
                    f"Corrupt record at {where()}: the sealed body does not"
                    f" decrypt with its data key {key_id.hex()}"
                )
                raise CorruptRecordError(msg) from None

        return open_body


class _Keyed(Protocol):
    """What :func:`attach` reads and sets of a store (``EventStore`` is one)."""

    @property
    def backend(self) -> Backend:
        """Where the rows live."""
        ...

    @property
    def mapper(self) -> MsgspecMapper:
        """The mapper whose ``opener`` is set."""
        ...

    sealer: Sealer | None


def attach(
    store: _Keyed,
    *,
    location: str,
    cipher_key: str | None,
    erasable: bool | None,
) -> None:
    """Open the ledger's erasure key store and give the store its sealer.

    Args:
        store: The store just opened.
        location: The SQLite ledger file, or the PostgreSQL URL.
        cipher_key: The store's cipher key (base64), which wraps the data keys.
        erasable: Seal new events of erasable subjects; ``None``: when a cipher
            key is set.

    Raises:
        ErasureKeysError: The ledger holds sealed events and its key store is
            missing, or the key store is another ledger's.
    """
    sealing = bool(cipher_key) if erasable is None else erasable
    postgres = location.startswith(("postgresql://", "postgres://"))
    where = "the ledger's erasure key tables" if postgres else keys_path(location)

    def before_create() -> bool:
        # The ledger's marker says whether it holds a sealed row (a ledger
        # from before the marker is searched once, whole).
        found = store.backend.first_sealed()
        if found is not None:
            raise _missing(where, found)
        return sealing

    opener = open_postgres_keys if postgres else open_sqlite_keys
    keys = opener(
        location if postgres else where,
        ledger_id=store.backend.ledger_id,
        wrap_key=raw_cipher_key(cipher_key),
        before_create=before_create,
    )
    if keys is None:
        return  # erasure off, nothing sealed: no key store needed
    sealer = Sealer(keys, sealing=sealing)
    store.sealer = sealer
    store.mapper.opener = sealer.open
    store.mapper.openers = sealer.opener


def _missing(where: str, position: int) -> ErasureKeysError:
    return ErasureKeysError(
        f"Expected the erasure key store {where!r} of this ledger, found none:"
        f" its events are sealed under erasable subjects' keys (first at position"
        f" {position}); nothing was written"
    )


def sealed_key_id(mapper: MsgspecMapper, row: StoredRow) -> bytes | None:
    """Return the id of the data key a row is sealed under (``None``: not sealed).

    Raises:
        CorruptRecordError: The row is encrypted and does not decrypt.
    """
    state = row.state
    if len(state) < HEADER_SIZE or not state[1] & FLAG_SEALED:
        return None
    body = state[BODY_OFFSET if state[0] == CHAIN_FORMAT else HEADER_SIZE :]
    if state[1] & FLAG_ENCRYPTED:
        if mapper.cipher is None:
            msg = f"Encrypted record at position {row.position}: no cipher key"
            raise CorruptRecordError(msg)
        body = mapper.cipher.decrypt(body)
    return body[:KEY_ID_BYTES]
