"""The append-only event store: the ledger's synchronous API.

``EventStore`` validates and encodes events, hands them to a backend (SQLite or
PostgreSQL, both on eventsourcing's recorders) and decodes rows into
:class:`~ledger.envelope.Recorded` envelopes. The API has no update and no delete.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from types import TracebackType
from typing import NamedTuple, Self
from uuid import UUID

import msgspec
from eventsourcing.cryptography import AESCipher
from eventsourcing.persistence import Notification
from eventsourcing.utils import Environment

from turnledger.ledger.backend import (
    AppendRequest,
    Backend,
    Conflict,
    Replayed,
    RowSubscription,
    StoredRow,
)
from turnledger.ledger.chain import BODY_OFFSET
from turnledger.ledger.codec import (
    HEADER_SIZE,
    MsgspecMapper,
    datetime_from_us,
    now_us,
    type_for_tag,
)
from turnledger.ledger.envelope import AppendResult, Recorded
from turnledger.ledger.errors import (
    ConcurrencyError,
    ConfigurationError,
    IdempotencyKeyError,
    InvalidEventError,
    LedgerError,
    StoreUnavailableError,
)
from turnledger.ledger.events import Event, LedgerEvent

DEFAULT_PATH = "./turnledger.db"
"""Where the ledger lives when no URL is given."""

CIPHER_KEY_ENV = "TURNLEDGER_CIPHER_KEY"
"""The environment variable holding the base64 AES key for encryption at rest."""

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

    Args:
        backend: Where rows live.
        cipher_key: A base64 AES key (16, 24 or 32 bytes) to encrypt payloads at
            rest; envelope fields (stream, version, position, type, time) stay
            readable. ``None`` stores payloads in clear.
    """

    def __init__(self, backend: Backend, *, cipher_key: str | None = None) -> None:
        self.backend = backend
        self.mapper = MsgspecMapper(cipher=_cipher(cipher_key))

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
            InvalidEventError: An event fails its schema, or the idempotency key
                is empty or longer than 512 characters; nothing is written.
        """
        if idempotency_key is not None and not 0 < len(idempotency_key) <= MAX_KEY:
            msg = (
                f"Expected an idempotency key of 1 to {MAX_KEY} characters, "
                f"found {len(idempotency_key)}"
            )
            raise InvalidEventError(msg)
        rows = self.mapper.encode_rows(events, first_version, at_us)
        return AppendRequest(stream_id, first_version - 1, rows, idempotency_key)

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
            IdempotencyKeyError: The key was first used on another stream.
            StoreUnavailableError: The database failed (its subclasses name a
                lock held past the busy timeout, a full disk, a read-only file).
        """
        result = self.append_batch(
            [Append(stream_id, events, expected_version, idempotency_key)]
        )[0]
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
        at_us = now_us()
        requests = [
            self.encode(
                a.stream_id, a.events, a.expected_version + 1, at_us, a.idempotency_key
            )
            for a in appends
        ]
        return self.write_requests(requests)

    def append_atomic(self, appends: Sequence[Append]) -> list[AppendResult]:
        """Append to several streams in ONE transaction: all of it, or nothing.

        Raises:
            ConcurrencyError: One stream was not at its expected version; nothing
                of the batch was written.
            InvalidEventError: An event fails validation; nothing was written.
        """
        at_us = now_us()
        requests = [
            self.encode(
                a.stream_id, a.events, a.expected_version + 1, at_us, a.idempotency_key
            )
            for a in appends
        ]
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
        outcomes = iter(self.backend.insert_batch(live, atomic=atomic) if live else [])
        results: list[AppendResult | ConcurrencyError] = []
        for request in requests:
            if not request.rows:
                results.append(_empty(request))
                continue
            outcome = next(outcomes)
            if isinstance(outcome, Replayed):
                results.append(_replayed(request, outcome))  # type: ignore[arg-type]
            elif isinstance(outcome, Conflict):
                results.append(
                    ConcurrencyError(
                        request.stream_id, request.expected_version, outcome.found
                    )
                )
            else:
                results.append(
                    AppendResult(
                        stream_id=request.stream_id,
                        first_version=request.expected_version + 1,
                        last_version=request.expected_version + len(request.rows),
                        positions=outcome,
                    )
                )
        return results

    def read_stream(
        self,
        stream_id: UUID,
        *,
        after: int = 0,
        until: int | None = None,
        limit: int | None = None,
    ) -> list[Recorded]:
        """Return a stream's events with versions in ``(after, until]``, in order."""
        rows = self.backend.select_stream(stream_id, gt=after, lte=until, limit=limit)
        return self.decode_rows(rows)

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
        rows = self.backend.select_all(
            gt=after, limit=limit, topics=_topics(types), lte=until
        )
        return self.decode_rows(rows)

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

    def iter_rows(self, *, after: int = 0, page_size: int = 500) -> Iterator[StoredRow]:
        """Iterate over raw rows (undecoded) in position order; ``verify`` uses it."""
        until = self.max_position()
        while True:
            page = self.backend.select_all(
                gt=after, limit=page_size, topics=(), lte=until
            )
            yield from page
            if len(page) < page_size:
                return
            after = page[-1].position

    def stream_version(self, stream_id: UUID) -> int:
        """Return a stream's head version (0 when the stream is empty)."""
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
        return Subscription(
            self.backend.subscribe(gt=after, topics=_topics(types)), self
        )

    def decode_rows(self, rows: Sequence[StoredRow]) -> list[Recorded]:
        """Decode rows in order (the replay hot path).

        Clear frames of current schema versions take a fast path (one typed
        decode over a view of the body, recorded times shared within an
        append); anything else, and every error, goes through :meth:`decode`.
        """
        if self.mapper.cipher is not None:
            return [self.decode(row) for row in rows]
        fast = self.mapper.fast_decoders()
        out: list[Recorded] = []
        append = out.append
        last_at = b""
        recorded_at = datetime_from_us(0)
        for row in rows:
            state = row.state
            decoder = fast.get(row.topic)
            if (
                decoder is None
                or len(state) < BODY_OFFSET
                or not state.startswith(decoder[0])
            ):
                append(self.decode(row))
                continue
            at = state[4:HEADER_SIZE]
            if at != last_at:
                try:
                    recorded_at = datetime_from_us(
                        int.from_bytes(at, "big", signed=True)
                    )
                except OverflowError:
                    append(self.decode(row))  # raises the typed, located error
                    continue
                last_at = at
            try:
                event = decoder[1].decode(state[BODY_OFFSET:])
            except (msgspec.DecodeError, msgspec.ValidationError):
                append(self.decode(row))  # raises the typed, located error
                continue
            append(
                Recorded(
                    stream_id=row.stream_id,
                    version=row.version,
                    position=row.position,
                    recorded_at=recorded_at,
                    event=event,
                )
            )
        return out

    def decode(self, row: StoredRow) -> Recorded:
        """Decode one raw row into its envelope and event.

        Raises:
            CorruptRecordError: The row does not decode; the message names its
                position and what was expected.
            UnknownEventTypeError: The row's type is not known to this code.
        """
        recorded_at, event = self.mapper.decode_frame(
            row.topic, row.state, lambda: _where(row)
        )
        return Recorded(
            stream_id=row.stream_id,
            version=row.version,
            position=row.position,
            recorded_at=recorded_at,
            event=_as_ledger_event(event),
        )

    def close(self) -> None:
        """Release the backend's connections."""
        self.backend.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class Subscription:
    """A blocking iterator of newly recorded events; ``stop()`` ends it."""

    def __init__(self, rows: RowSubscription, store: EventStore) -> None:
        self._rows = rows
        self._store = store

    def __iter__(self) -> Self:
        return self

    def __next__(self) -> Recorded:
        try:
            notification: Notification = next(self._rows)
        except (StopIteration, LedgerError):
            raise
        except Exception as e:
            msg = f"The ledger subscription failed: {e}"
            raise StoreUnavailableError(msg) from e
        stream = notification.originator_id
        state = notification.state
        row = StoredRow(
            notification.id,
            stream if isinstance(stream, UUID) else UUID(stream),
            notification.originator_version,
            notification.topic,
            state.encode("utf-8", "surrogateescape")
            if isinstance(state, str)
            else bytes(state),
        )
        return self._store.decode(row)

    def stop(self) -> None:
        """Stop following; a blocked iteration ends."""
        self._rows.stop()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def open_store(
    url: str | None = None,
    *,
    synchronous: str = "FULL",
    cipher_key: str | None = None,
    lock_timeout: int = DEFAULT_LOCK_TIMEOUT,
    check_key: bool = True,
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

    Raises:
        ConfigurationError: The URL or an option is invalid.
        StoreUnavailableError: The database cannot be opened.
        CipherKeyError: The key is wrong for this ledger, or missing while its
            events are encrypted (``ledger.key_check``); nothing was written.
    """
    url = url or DEFAULT_PATH
    key = cipher_key if cipher_key is not None else os.environ.get(CIPHER_KEY_ENV)
    if url.startswith(("postgresql://", "postgres://")):
        from turnledger.ledger.postgres import PostgresBackend  # noqa: PLC0415 - optional extra

        return _checked(
            EventStore(PostgresBackend(url, lock_timeout=lock_timeout), cipher_key=key),
            check_key=check_key,
        )
    from turnledger.ledger.sqlite import SQLiteBackend  # noqa: PLC0415 - keep import cheap

    level = synchronous.upper()
    if level not in ("OFF", "NORMAL", "FULL", "EXTRA"):
        msg = f"Expected synchronous OFF, NORMAL, FULL or EXTRA, found {synchronous!r}"
        raise ConfigurationError(msg)
    path = url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else url
    if "://" in path or path in ("", ":memory:"):
        msg = f"Expected a SQLite file path or a postgresql:// URL, found {url!r}"
        raise ConfigurationError(msg)
    backend = SQLiteBackend(path, synchronous=level, lock_timeout=lock_timeout)  # type: ignore[arg-type]
    return _checked(EventStore(backend, cipher_key=key), check_key=check_key)


def _checked(store: EventStore, *, check_key: bool) -> EventStore:
    """Refuse a wrong or missing cipher key before the store is handed out."""
    if not check_key:
        return store
    from turnledger.ledger.key_check import check_cipher_key  # noqa: PLC0415 - it imports this module

    try:
        check_cipher_key(store)
    except BaseException:
        store.close()
        raise
    return store


def _cipher(key: str | None) -> AESCipher | None:
    if not key:
        return None
    try:
        return AESCipher(Environment(env={AESCipher.CIPHER_KEY: key}))
    except (ValueError, OSError) as e:
        msg = f"Expected a base64 AES key of 16, 24 or 32 bytes, found another ({e})"
        raise ConfigurationError(msg) from e


def _topics(types: Sequence[type[Event] | str]) -> list[str]:
    tags = []
    for t in types:
        tag = t if isinstance(t, str) else type_for_tag_of(t)
        type_for_tag(tag)  # refuse unknown tags with a typed error
        tags.append(tag)
    return tags


def type_for_tag_of(event_type: type[Event]) -> str:
    """Return the tag of an event class (refusing unregistered classes)."""
    from turnledger.ledger.events import tag_of  # noqa: PLC0415

    return tag_of(event_type)


def _empty(request: AppendRequest) -> AppendResult:
    return AppendResult(
        stream_id=request.stream_id,
        first_version=request.expected_version + 1,
        last_version=request.expected_version,
        positions=(),
    )


def _replayed(
    request: AppendRequest, outcome: Replayed
) -> AppendResult | IdempotencyKeyError:
    if outcome.stream_id != request.stream_id:
        return IdempotencyKeyError(
            request.idempotency_key or "", outcome.stream_id, request.stream_id
        )
    return AppendResult(
        stream_id=outcome.stream_id,
        first_version=outcome.first_version,
        last_version=outcome.last_version,
        positions=outcome.positions,
    )


def _where(row: StoredRow) -> str:
    return f"position {row.position} (stream {row.stream_id} version {row.version})"


def _as_ledger_event(event: Event) -> LedgerEvent:
    return event  # type: ignore[return-value]
