"""The append-only event store: the ledger's synchronous API, and opening it.

``EventStore`` validates and encodes events, hands them to a backend (SQLite or
PostgreSQL, both on eventsourcing's recorders) and decodes rows into
:class:`~ledger.envelope.Recorded` envelopes; ``open_store`` opens one from a
URL with its cipher key checked. The API has no update and no delete. Here:
writing, the pager ``iter_all`` and opening; pairing the backend's outcomes with
the appends lives in ``ledger.append_results``, the other reads in the store's
:class:`~ledger.store_read.StoreReader` (which decodes rows through
``ledger.row_decode``), the cipher key check in ``ledger.key_check``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, NamedTuple, Self
from uuid import UUID

from eventsourcing.utils import Environment

from turnledger.ledger.append_results import append_result, append_results
from turnledger.ledger.backend import AppendRequest, Backend, StoredRow
from turnledger.ledger.codec import MsgspecMapper
from turnledger.ledger.envelope import AppendResult, Recorded
from turnledger.ledger.errors import (
    ConcurrencyError,
    ConfigurationError,
    InvalidArgumentError,
    InvalidEventError,
    LedgerError,
    type_name,
)
from turnledger.ledger.events import Event
from turnledger.ledger.frame import now_us
from turnledger.ledger.ids import check_identifier
from turnledger.ledger.key_check import (
    CIPHER_KEY_ENV,
    CipherKeyError,
    check_cipher_key,
)
from turnledger.ledger.location import DEFAULT_PATH, sqlite_path
from turnledger.ledger.store_read import StoreReader

if TYPE_CHECKING:
    from eventsourcing.cryptography import AESCipher

    from turnledger.ledger.erasable import Sealer
from turnledger.ledger.subscription import Subscription

_new_request = tuple.__new__

DEFAULT_LOCK_TIMEOUT = 5
"""Seconds a write waits for another writer's lock by default."""

MAX_KEY = 512
"""The longest idempotency key accepted."""


class Append(NamedTuple):
    """One stream's append: events to write after ``expected_version``.

    ``idempotency_key``: see :meth:`EventStore.append`.
    """

    stream_id: UUID
    events: Sequence[Event]
    expected_version: int
    idempotency_key: str | None = None


class EventStore:
    """An append-only store of typed events in streams, with a global order.

    Writes are its own; reads go to its :class:`~ledger.store_read.StoreReader`.

    Args:
        backend: Where rows live.
        cipher_key: A base64 AES key (16, 24 or 32 bytes) to encrypt payloads at
            rest; envelope fields (stream, version, position, type, time) stay
            readable. ``None`` stores payloads in clear.
    """

    def __init__(self, backend: Backend, *, cipher_key: str | None = None) -> None:
        self.backend = backend
        self.mapper = MsgspecMapper(cipher=_cipher(cipher_key))
        self._reader = StoreReader(backend, self.mapper)
        self.sealer: Sealer | None = None
        """Seals erasable subjects' events (``ledger.erasable``; set at open)."""

    @property
    def kind(self) -> str:
        """The backend's kind: ``sqlite`` or ``postgresql``."""
        return self.backend.kind

    def encode(
        self,
        stream_id: UUID,
        events: Sequence[Event],
        first_version: int,
        at_us: int,
        idempotency_key: str | None = None,
    ) -> AppendRequest:
        """Validate and encode events as the rows of one append.

        Raises:
            InvalidArgumentError: An argument is ``None`` or of the wrong type
                (:func:`check_append`).
            InvalidIdError: An event's identifier holds a control character.
            InvalidEventError: An event fails its schema, or the idempotency key
                is empty or longer than 512 characters; nothing is written.
        """
        events = check_append(stream_id, events, first_version - 1, idempotency_key)
        if idempotency_key is not None and not 0 < len(idempotency_key) <= MAX_KEY:
            msg = (
                f"Expected an idempotency key of 1 to {MAX_KEY} characters, "
                f"found {len(idempotency_key)}"
            )
            raise InvalidEventError(msg)
        seal = None if self.sealer is None else self.sealer.plan(stream_id, events)
        rows = self.mapper.encode_rows(events, first_version, at_us, seal)
        for event in events:  # each one a registered event: encode_rows checked
            for field, value in event.identifiers():
                check_identifier(field, value)
        # Built without the NamedTuple's Python-level __new__ (every append).
        return _new_request(
            AppendRequest, (stream_id, first_version - 1, rows, idempotency_key)
        )

    def encode_appends(self, appends: Sequence[Append]) -> list[AppendRequest]:
        """Encode several appends at one recorded time (see :meth:`encode`).

        Raises:
            InvalidArgumentError: ``appends`` is not a list or tuple of
                :class:`Append`, or an append's argument is of the wrong type.
        """
        if not isinstance(appends, (list, tuple)):
            found = type_name(appends)
            msg = f"appends: expected a list or tuple of Append, found {found}"
            raise InvalidArgumentError(msg)
        for i, a in enumerate(appends):
            if not isinstance(a, Append):
                msg = f"appends[{i}]: expected an Append, found {type_name(a)}"
                raise InvalidArgumentError(msg)
            check_version(a.expected_version)
        at_us = now_us()
        return [
            self.encode(
                a.stream_id, a.events, a.expected_version + 1, at_us, a.idempotency_key
            )
            for a in appends
        ]

    def append(
        self,
        stream_id: UUID,
        events: Sequence[Event],
        *,
        expected_version: int,
        idempotency_key: str | None = None,
    ) -> AppendResult:
        """Append events to a stream in one transaction (one fsync).

        Args:
            stream_id: The stream.
            events: The events, in order (e.g. one turn step).
            expected_version: The stream's current head version (0 for a new stream).
            idempotency_key: Makes the append safe to retry (the engine passes
                ``f"{turn_id}:{step}"``). The key is looked up inside the write
                transaction: if an earlier append (in any process, before any
                crash) committed with it, that append's result is returned, the
                events given now are ignored, nothing is written and no version
                conflict is raised. Keys are kept forever, in the ledger's
                database, committed atomically with their rows.

        Returns:
            The versions and positions written (or first written, under the key).

        Raises:
            ConcurrencyError: The stream is not at ``expected_version``; nothing
                was written.
            InvalidEventError: An event fails validation; nothing was written.
                Its subclasses: :class:`~ledger.errors.InvalidArgumentError` (an
                argument is ``None`` or of the wrong type, see
                :func:`check_append`), :class:`~ledger.errors.InvalidIdError`
                (an identifier holds a control character).
            IdempotencyKeyError: The key was first used on another stream.
            StoreUnavailableError: The database failed (its subclasses name a
                lock held past the busy timeout, a full disk, a read-only file).
        """
        check_version(expected_version)
        request = self.encode(
            stream_id, events, expected_version + 1, now_us(), idempotency_key
        )
        # One append: the same steps as ``append_batch``, without its lists.
        outcome = self.backend.insert_batch([request])[0] if request.rows else None
        result = append_result(request, outcome)
        if isinstance(result, LedgerError):
            raise result
        return result

    def append_batch(
        self, appends: Sequence[Append]
    ) -> list[AppendResult | ConcurrencyError]:
        """Append to several streams in ONE transaction, each append atomic alone.

        A version conflict fails only its own append (a savepoint each); the others
        commit together with a single fsync.

        Raises:
            InvalidEventError: An event fails validation; nothing was written.
        """
        requests = self.encode_appends(appends)
        return self.write_requests(requests)

    def append_atomic(self, appends: Sequence[Append]) -> list[AppendResult]:
        """Append to several streams in ONE transaction: all of it, or nothing.

        Raises:
            ConcurrencyError: One stream was not at its expected version; nothing
                of the batch was written.
            InvalidEventError: An event fails validation; nothing was written.
        """
        requests = self.encode_appends(appends)
        results = self.write_requests(requests, atomic=True)
        for result in results:
            if isinstance(result, LedgerError):
                raise result
        return [r for r in results if isinstance(r, AppendResult)]

    def write_requests(
        self, requests: Sequence[AppendRequest], *, atomic: bool = False
    ) -> list[AppendResult | ConcurrencyError]:
        """Write already-encoded appends in one transaction (see :meth:`encode`).

        With ``atomic``, one conflict rolls the whole transaction back.

        A key first used on another stream fails only its own append, with an
        :class:`~ledger.errors.IdempotencyKeyError` in its place (typed as the
        ``ConcurrencyError`` slot's sibling: both are ``LedgerError``).
        """
        live = [r for r in requests if r.rows]
        outcomes = self.backend.insert_batch(live, atomic=atomic) if live else []
        return append_results(requests, outcomes)

    def iter_all(
        self,
        *,
        after: int = 0,
        page_size: int = 500,
        types: Sequence[type[Event] | str] = (),
        until: int | None = None,
    ) -> Iterator[Recorded]:
        """Iterate over the global log from ``after``, reading in pages."""
        if until is None:
            until = self.max_position()
        while True:
            page = self.read_all(after=after, limit=page_size, types=types, until=until)
            yield from page
            if len(page) < page_size:
                return
            after = page[-1].position

    def read_stream(
        self,
        stream_id: UUID,
        *,
        after: int = 0,
        until: int | None = None,
        limit: int | None = None,
        types: Sequence[type[Event] | str] = (),
    ) -> list[Recorded]:
        """Return a stream's events with versions in ``(after, until]``, in order.

        With ``types`` (classes or tags), only events of those types: the others
        are neither read out nor decoded (a fold that ignores them reads less).

        Raises:
            InvalidArgumentError: ``stream_id`` is not a UUID.
        """
        check_stream_id(stream_id)
        return self._reader.read_stream(
            stream_id, after=after, until=until, limit=limit, types=types
        )

    def read_all(
        self,
        *,
        after: int = 0,
        limit: int = 500,
        types: Sequence[type[Event] | str] = (),
        until: int | None = None,
    ) -> list[Recorded]:
        """Return one page of the global log: positions after ``after``, in order.

        Args:
            after: The last position already seen (0 for the start).
            limit: The page size.
            types: Only events of these types (classes or tags); all when empty.
            until: Stop at this position (inclusive).
        """
        return self._reader.read_all(after=after, limit=limit, types=types, until=until)

    def iter_rows(self, *, after: int = 0, page_size: int = 500) -> Iterator[StoredRow]:
        """Iterate over raw rows (undecoded) in position order; ``verify`` uses it."""
        return self._reader.iter_rows(after=after, page_size=page_size)

    def stream_version(self, stream_id: UUID) -> int:
        """Return a stream's head version (0 when the stream is empty).

        Raises:
            InvalidArgumentError: ``stream_id`` is not a UUID.
        """
        check_stream_id(stream_id)
        return self.backend.stream_version(stream_id)

    def max_position(self) -> int:
        """Return the last position written (0 when the ledger is empty)."""
        return self.backend.max_position()

    def stream_ids(self) -> list[UUID]:
        """Return the id of every stream, sorted."""
        return self.backend.stream_ids()

    def count(self) -> int:
        """Return the number of events."""
        return self.backend.count_rows()

    def subscribe(
        self, *, after: int = 0, types: Sequence[type[Event] | str] = ()
    ) -> Subscription:
        """Follow the ledger: events after ``after`` now, then as they are recorded.

        SQLite polls; PostgreSQL listens (LISTEN/NOTIFY) with a periodic wake-up.
        """
        return self._reader.subscribe(after=after, types=types)

    def decode_rows(self, rows: Sequence[StoredRow]) -> list[Recorded]:
        """Decode rows in order (the replay hot path; see :mod:`ledger.row_decode`)."""
        return self._reader.decode_rows(rows)

    def decode(self, row: StoredRow) -> Recorded:
        """Decode one raw row into its envelope and event.

        Raises:
            CorruptRecordError: The row does not decode; the message names its
                position and what was expected.
            UnknownEventTypeError: The row's type is not known to this code.
        """
        return self._reader.decode(row)

    def close(self) -> None:
        """Release the backend's connections (and the erasure key store's)."""
        if self.sealer is not None:
            self.sealer.keys.close()
        self.backend.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        _exc_type: type[BaseException] | None,
        _exc: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        self.close()


def check_stream_id(stream_id: object) -> None:
    """Refuse a stream id that is not a :class:`~uuid.UUID`.

    Raises:
        InvalidArgumentError: It is ``None``, text or anything else.
    """
    if not isinstance(stream_id, UUID):
        msg = f"stream_id: expected a UUID, found {type_name(stream_id)}"
        raise InvalidArgumentError(msg)


def check_version(expected_version: object) -> None:
    """Refuse an expected version that is not an ``int`` (``bool`` is not one).

    Raises:
        InvalidArgumentError: It is ``None``, a ``bool`` or not an ``int``.
    """
    if isinstance(expected_version, bool) or not isinstance(expected_version, int):
        found = type_name(expected_version)
        msg = f"expected_version: expected an int >= 0, found {found}"
        raise InvalidArgumentError(msg)


def check_append(
    stream_id: object,
    events: object,
    expected_version: object,
    idempotency_key: object,
) -> Sequence[Event]:
    """Check the types of an append's arguments; return its events as a sequence.

    Args:
        stream_id: Must be a :class:`~uuid.UUID`.
        events: Must be a list or tuple of events, or another iterable of them
            (read once, into a tuple); never ``None``, text, bytes or one event.
        expected_version: Must be an ``int`` >= 0 (not a ``bool``).
        idempotency_key: Must be ``None`` or a ``str``.

    Returns:
        ``events``, as given when a list or tuple, else as a tuple.

    Raises:
        InvalidArgumentError: An argument breaks these rules; the message names
            it, what was expected and what was found.
    """
    check_stream_id(stream_id)
    check_version(expected_version)
    if expected_version < 0:  # type: ignore[operator]
        msg = f"expected_version: expected an int >= 0, found {expected_version}"
        raise InvalidArgumentError(msg)
    if idempotency_key is not None and not isinstance(idempotency_key, str):
        found = type_name(idempotency_key)
        msg = f"idempotency_key: expected a str or None, found {found}"
        raise InvalidArgumentError(msg)
    if isinstance(events, (list, tuple)):
        return events
    if (
        events is None
        or isinstance(events, (str, bytes, bytearray, Event))
        or (not isinstance(events, Iterable))
    ):
        msg = (
            "events: expected a list or tuple of ledger events, "
            f"found {type_name(events)}"
        )
        raise InvalidArgumentError(msg)
    return tuple(events)


def open_store(
    url: str | None = None,
    *,
    synchronous: str = "FULL",
    cipher_key: str | None = None,
    lock_timeout: int = DEFAULT_LOCK_TIMEOUT,
    check_key: bool = True,
    erasable: bool | None = None,
) -> EventStore:
    """Open (creating if needed) the ledger at ``url``, its cipher key checked.

    Args:
        url: A file path or ``sqlite:///path`` for SQLite (default
            ``./turnledger.db``), or a ``postgresql://`` URL.
        synchronous: SQLite durability for commits: ``FULL`` (default), ``NORMAL``,
            ``OFF`` or ``EXTRA``.
        cipher_key: The base64 AES key for encryption at rest; defaults to the
            ``TURNLEDGER_CIPHER_KEY`` environment variable; none means clear text.
        lock_timeout: Seconds a write waits for another writer's lock (SQLite's
            busy timeout; PostgreSQL's lock timeout), then
            :class:`~ledger.errors.LedgerLockedError`.
        check_key: Run :func:`~ledger.key_check.check_cipher_key` before
            returning (default); ``False`` opens a ledger with a wrong key
            anyway, whose encrypted events then read as a
            :class:`~ledger.errors.CorruptRecordError` ("does not decrypt").
        erasable: Seal every event of an erasable subject under its own data
            key, which ``turnledger erase`` destroys (``ledger.erasable``);
            ``None`` (the default): when a cipher key is set. The erasure key
            store is opened whenever it exists, to read what was sealed.

    Raises:
        ConfigurationError: The URL or an option is invalid.
        StoreUnavailableError: The database cannot be opened.
        CipherKeyError: The key is wrong for this ledger, or missing while its
            events are encrypted (``ledger.key_check``); nothing was written.
        ErasureKeysError: The ledger's events are sealed and its erasure key
            store is missing, or the key store is another ledger's.
    """
    url = url or DEFAULT_PATH
    key = cipher_key if cipher_key is not None else os.environ.get(CIPHER_KEY_ENV)
    if url.startswith(("postgresql://", "postgres://")):
        from turnledger.ledger.postgres import PostgresBackend  # noqa: PLC0415 - optional extra

        return _checked(
            EventStore(PostgresBackend(url, lock_timeout=lock_timeout), cipher_key=key),
            check_key=check_key,
            key=key,
            erasure=(url, erasable),
        )
    from turnledger.ledger.sqlite import SQLiteBackend  # noqa: PLC0415 - keep import cheap

    level = synchronous.upper()
    if level not in ("OFF", "NORMAL", "FULL", "EXTRA"):
        msg = f"Expected synchronous OFF, NORMAL, FULL or EXTRA, found {synchronous!r}"
        raise ConfigurationError(msg)
    path = sqlite_path(url)
    if path is None or path in ("", ":memory:"):
        msg = f"Expected a SQLite file path or a postgresql:// URL, found {url!r}"
        raise ConfigurationError(msg)
    backend = SQLiteBackend(path, synchronous=level, lock_timeout=lock_timeout)  # type: ignore[arg-type]
    return _checked(
        EventStore(backend, cipher_key=key),
        check_key=check_key,
        key=key,
        erasure=(path, erasable),
    )


def _checked(
    store: EventStore,
    *,
    check_key: bool,
    key: str | None,
    erasure: tuple[str, bool | None],
) -> EventStore:
    """Open the erasure key store, then refuse a wrong or missing cipher key.

    Both happen before the store is handed out.
    """
    from turnledger.ledger.erasable import attach  # noqa: PLC0415 - loads crypto

    try:
        try:
            attach(store, location=erasure[0], cipher_key=key, erasable=erasure[1])
        except CipherKeyError:
            # The key store does not open with this key: when the ledger's own
            # check refuses the key too, its message is the one. Unchecked, the
            # store opens anyway, and its sealed events do not read.
            if check_key:
                check_cipher_key(store)
                raise
        if check_key:
            check_cipher_key(store)
    except BaseException:
        store.close()
        raise
    return store


def _cipher(key: str | None) -> AESCipher | None:
    if not key:
        return None
    # AES-GCM (the cryptography package) is loaded only for a ledger with a key:
    # a command that reads a clear ledger starts without it.
    from eventsourcing.cryptography import AESCipher  # noqa: PLC0415

    try:
        return AESCipher(Environment(env={AESCipher.CIPHER_KEY: key}))
    except (ValueError, OSError) as e:
        msg = f"Expected a base64 AES key of 16, 24 or 32 bytes, found another ({e})"
        raise ConfigurationError(msg) from e
