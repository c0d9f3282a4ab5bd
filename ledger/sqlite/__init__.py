"""The SQLite backend, built on eventsourcing's SQLite application recorder.

What we take from the library: its connection pool and its connection set-up
(WAL) for reads, its table layout (``stored_events``: originator id, version, topic,
state; the rowid is the global position), its notification selection, and its
listen/notify subscription machinery. What we add (connections, triggers and the
error translation are in ``ledger.sqlite.setup``):

- one writer connection per backend, of our own, behind a lock (appends and
  seals; the pool's semaphore, writer lock and condition cost more per append
  than the insert);
- pragmas: ``synchronous`` (FULL by default: a turn is durable when acknowledged),
  the busy timeout (5 s by default: a locked ledger is a typed
  :class:`~ledger.errors.LedgerLockedError` after that wait);
- triggers that refuse, from any SQL client that leaves them in place: UPDATE,
  DELETE, ``INSERT OR REPLACE`` / ``REPLACE INTO`` (a rowid conflict, which would
  delete through the conflict without firing a DELETE trigger, or a stream version
  that is not the next one), UPSERT's ``DO UPDATE`` (an UPDATE), and a version gap.
  Whoever can write the file can still drop the triggers or rewrite the file's
  bytes: that is not prevented, it is *detected* by ``verify`` through the hash
  chain and the seals (``ledger.chain``);
- the hash chain on every row, idempotency keys and group commit
  (``ledger.sqlite.write``);
- a polling subscription (the library's SQLite recorder has none);
- driver errors translated into the ledger's typed errors on every path.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Final, TypeVar
from uuid import UUID

import msgspec
from eventsourcing.persistence import ListenNotifySubscription, Notification
from eventsourcing.sqlite import SQLiteApplicationRecorder

from turnledger.ledger.backend import AppendRequest, Conflict, Replayed, StoredRow
from turnledger.ledger.chain import CHAIN_FORMAT, HEADER_SIZE, AppendRecord, Seal
from turnledger.ledger.errors import (
    LedgerError,
    LedgerLockedError,
    StoreUnavailableError,
)
from turnledger.ledger.frame import FLAG_ENCRYPTED, FRAME_FORMAT
from turnledger.ledger.sqlite.setup import (
    CIPHER_TABLE,
    SEALED_TABLE,
    SEALS_TABLE,
    Datastore,
    Recorder,
    Synchronous,
    ledger_identity,
    sealed_frame,
    translate,
)
from turnledger.ledger.sqlite.write import (
    KEYS_TABLE,
    TABLE,
    WriteCache,
    blob,
    write_group,
)

__all__ = ["SQLiteBackend", "Synchronous", "translate"]

_COLUMNS: Final = "rowid, originator_id, originator_version, topic, state"
# Byte 0 of a frame is its format (1 or 2), byte 1 its flags (bit 0: encrypted);
# SQLite has no byte function: byte 1 is looked up in the set of flagged bytes.
_FLAGGED: Final = "".join(f"{b:02x}" for b in range(256) if b & FLAG_ENCRYPTED)
_FIRST_ENCRYPTED: Final = (
    f"SELECT {_COLUMNS} FROM (SELECT {_COLUMNS} FROM {TABLE} ORDER BY rowid "
    f"LIMIT ?) WHERE length(CAST(state AS BLOB)) >= {HEADER_SIZE} "
    "AND substr(CAST(state AS BLOB), 1, 1) IN "
    f"(x'{FRAME_FORMAT:02x}', x'{CHAIN_FORMAT:02x}') "
    f"AND instr(x'{_FLAGGED}', substr(CAST(state AS BLOB), 2, 1)) > 0 "
    "ORDER BY rowid LIMIT 1"
)
_SEALED_MARKS: Final = f"SELECT one, position FROM {SEALED_TABLE}"
_FIRST_SEALED: Final = (
    f"SELECT rowid FROM {TABLE} WHERE {sealed_frame('state')} ORDER BY rowid LIMIT 1"
)
_MARK: Final = f"INSERT OR IGNORE INTO {SEALED_TABLE} (one, position) VALUES (?, ?)"
_T = TypeVar("_T")


def _search_sealed(raw: sqlite3.Connection) -> int | None:
    """Search the whole ledger for a sealed row and record the answer (once)."""
    raw.execute("BEGIN IMMEDIATE")
    try:
        marks = dict(raw.execute(_SEALED_MARKS).fetchall())
        if not marks:  # another process may have searched meanwhile
            found = raw.execute(_FIRST_SEALED).fetchone()
            last = raw.execute(f"SELECT max(rowid) FROM {TABLE}").fetchone()
            if found is not None:
                raw.execute(_MARK, (1, found[0]))
            raw.execute(_MARK, (0, last[0] or 0))
        raw.execute("COMMIT")
    except BaseException:
        if raw.in_transaction:
            raw.execute("ROLLBACK")
        raise
    marks = dict(raw.execute(_SEALED_MARKS).fetchall())
    return int(marks[1]) if 1 in marks else None


class _PollingSubscription(ListenNotifySubscription[SQLiteApplicationRecorder]):
    """The library's listen/notify subscription, woken by a timer instead of NOTIFY."""

    def __init__(
        self,
        recorder: SQLiteApplicationRecorder,
        *,
        gt: int,
        topics: Sequence[str],
        interval: float,
    ) -> None:
        super().__init__(recorder=recorder, gt=gt, topics=topics)
        self._interval = interval
        self._stopped = threading.Event()
        self._ticker = threading.Thread(target=self._tick, daemon=True)
        self._ticker.start()

    def _tick(self) -> None:
        while not self._stopped.wait(self._interval):
            self._has_been_notified.set()

    def stop(self) -> None:
        self._stopped.set()
        super().stop()


class SQLiteBackend:
    """The ledger's SQLite storage.

    Args:
        path: The database file (``:memory:`` is refused: a ledger must persist).
        synchronous: SQLite's durability level for commits (default FULL).
        lock_timeout: Seconds to wait for another process's write lock (the busy
            timeout); then :class:`~ledger.errors.LedgerLockedError`.
        poll_interval: Seconds between polls of a subscription.

    Attributes:
        ledger_id: The ledger's random id, written when its tables are first
            created (or at the first open of a ledger made before ids existed);
            derived files record it to tell this ledger from another.
    """

    kind = "sqlite"

    def __init__(
        self,
        path: str,
        *,
        synchronous: Synchronous = "FULL",
        lock_timeout: int = 5,
        poll_interval: float = 0.02,
    ) -> None:
        self.path = path
        self.poll_interval = poll_interval
        self.lock_timeout = lock_timeout
        self._cache = WriteCache()
        # One writer connection of our own, behind a lock: the library's pool
        # (semaphore, writer lock, condition) cost more per append than SQLite.
        self._write_lock = threading.Lock()
        self._write_conn: sqlite3.Connection | None = None
        self._closed = False
        started = time.monotonic()
        try:
            self._datastore = Datastore(
                path, lock_timeout=lock_timeout, synchronous=synchronous
            )
            self._pool = self._datastore.pool
            self._recorder = Recorder(self._datastore)
            self._recorder.create_table()
            self._write_conn = self._connect_writer()  # ready for the first append
            self.ledger_id = ledger_identity(self._write_conn)
            self._identity = _identity(path)
        except Exception as e:
            error = translate(e, path, time.monotonic() - started)
            if isinstance(error, StoreUnavailableError) and not isinstance(
                error, LedgerLockedError
            ):
                msg = f"Cannot open the SQLite ledger at {path!r}: {e}"
                raise StoreUnavailableError(msg) from e
            raise error from e

    def _guard(self, action: Callable[[], _T]) -> _T:
        started = time.monotonic()
        try:
            return action()
        except LedgerError:
            raise
        except Exception as e:
            raise translate(e, self.path, time.monotonic() - started) from e

    def insert_batch(
        self, requests: Sequence[AppendRequest], *, atomic: bool = False
    ) -> list[tuple[int, ...] | Conflict | Replayed]:
        """Write appends in one transaction with a savepoint each (one fsync).

        With ``atomic``, any conflict rolls back the whole transaction.

        Raises:
            LedgerLockedError: Another writer held the lock past the busy timeout.
            LedgerFullError: The disk or the size limit is full.
            LedgerReadOnlyError: The file refuses writes.
            StoreUnavailableError: The file vanished or another driver error.
        """
        if _identity(self.path) != self._identity:
            msg = (
                f"Expected the SQLite ledger file at {self.path!r}, found it gone "
                "or replaced since it was opened; nothing was written"
            )
            raise StoreUnavailableError(msg)
        # The writer lock taken here rather than through ``_writer`` (the same
        # steps): this is every append's path, a context manager costs more.
        lock = self._write_lock
        started = time.monotonic()
        if not lock.acquire(timeout=max(1, self.lock_timeout)):
            waited = round(time.monotonic() - started)
            msg = f"the ledger is locked by another writer (waited {waited} s)"
            raise LedgerLockedError(msg)
        try:
            started = time.monotonic()
            raw = self._write_conn
            if raw is None:
                raw = self._write_conn = self._guard(self._connect_writer)
            return write_group(raw, requests, atomic=atomic, cache=self._cache)
        except LedgerError:
            raise
        except Exception as e:
            raise translate(e, self.path, time.monotonic() - started) from e
        finally:
            lock.release()

    @contextlib.contextmanager
    def _writer(self) -> Iterator[sqlite3.Connection]:
        """The writer connection, held alone (another thread waits its turn).

        Raises:
            LedgerLockedError: Another thread of this process kept it past the
                lock timeout.
            StoreUnavailableError: The store is closed or the file cannot open.
        """
        started = time.monotonic()
        if not self._write_lock.acquire(timeout=max(1, self.lock_timeout)):
            waited = round(time.monotonic() - started)
            msg = f"the ledger is locked by another writer (waited {waited} s)"
            raise LedgerLockedError(msg)
        try:
            raw = self._write_conn
            if raw is None:
                raw = self._write_conn = self._guard(self._connect_writer)
            yield raw
        finally:
            self._write_lock.release()

    def _connect_writer(self) -> sqlite3.Connection:
        if self._closed:
            msg = f"SQLite ledger at {self.path!r}: the store is closed"
            raise StoreUnavailableError(msg)
        raw = self._pool.connect_raw()
        raw.row_factory = None  # plain tuples: the write path reads by index
        raw.execute(f"SELECT max(rowid) FROM {TABLE}").fetchone()  # loads the schema
        return raw

    def _query(self, sql: str, params: Sequence[object] = ()) -> list[sqlite3.Row]:
        def run() -> list[sqlite3.Row]:
            with self._datastore.transaction(commit=False) as cursor:
                cursor.execute(sql, params)
                return list(cursor.fetchall())

        return self._guard(run)

    def select_stream(
        self,
        stream_id: UUID,
        *,
        gt: int,
        lte: int | None,
        limit: int | None,
        topics: Sequence[str] = (),
    ) -> list[StoredRow]:
        """Return a stream's rows with versions in ``(gt, lte]`` (of ``topics``)."""
        sql = f"SELECT rowid, originator_version, topic, state FROM {TABLE} "
        sql += "WHERE originator_id=? AND originator_version>?"
        params: list[object] = [stream_id.hex, gt]
        if lte is not None:
            sql += " AND originator_version<=?"
            params.append(lte)
        if topics:
            sql += f" AND topic IN ({','.join('?' * len(topics))})"
            params.extend(topics)
        sql += " ORDER BY originator_version"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)

        def run() -> list[StoredRow]:
            with self._datastore.transaction(commit=False) as cursor:
                raw = cursor.sqlite_cursor  # plain tuples: no Row objects
                raw.row_factory = None
                raw.execute(sql, params)
                found = raw.fetchall()
            # The replay hot path: one tuple per row, built without a Python call.
            make = tuple.__new__
            return [
                make(
                    StoredRow,
                    (p, stream_id, v, t, s if type(s) is bytes else blob(s)),
                )
                for p, v, t, s in found
            ]

        return self._guard(run)

    def select_all(
        self, *, gt: int, limit: int, topics: Sequence[str], lte: int | None
    ) -> list[StoredRow]:
        """Return rows with positions in ``(gt, lte]`` in order."""
        notifications = self._guard(
            lambda: self._recorder.select_notifications(
                start=gt, limit=limit, stop=lte, topics=topics, inclusive_of_start=False
            )
        )
        return [_row(n) for n in notifications]

    def stream_version(self, stream_id: UUID) -> int:
        """Return a stream's head version (0 when empty)."""
        sql = f"SELECT max(originator_version) FROM {TABLE} WHERE originator_id=?"
        return int(self._query(sql, (stream_id.hex,))[0][0] or 0)

    def max_position(self) -> int:
        """Return the highest position written (0 when empty)."""
        return int(self._guard(self._recorder.max_notification_id) or 0)

    def stream_ids(self) -> list[UUID]:
        """Return every stream id, sorted."""
        rows = self._query(f"SELECT DISTINCT originator_id FROM {TABLE}")
        return sorted(UUID(r[0]) for r in rows)

    def count_rows(self) -> int:
        """Return the number of rows."""
        return int(self._query(f"SELECT count(*) FROM {TABLE}")[0][0])

    def first_encrypted(self, scan_rows: int) -> StoredRow | None:
        """Return the first encrypted row among the first ``scan_rows``."""
        rows = self._query(_FIRST_ENCRYPTED, (scan_rows,))
        return _row_of(rows[0]) if rows else None

    def first_sealed(self) -> int | None:
        """Return the position of the first sealed row (``None``: none).

        The marker table answers (a trigger writes it with the first sealed
        row); a ledger from before it is searched once, whole, and the answer
        recorded (a read-only file: searched, nothing recorded).
        """
        marks = {int(r[0]): int(r[1]) for r in self._query(_SEALED_MARKS)}
        if 1 in marks:
            return int(marks[1])
        if 0 in marks:
            return None

        def search() -> int | None:
            with self._writer() as raw:
                try:
                    marked = _search_sealed(raw)
                except sqlite3.OperationalError as e:
                    if "readonly" not in str(e).lower():
                        raise
                    found = raw.execute(_FIRST_SEALED).fetchone()  # not recorded
                    return None if found is None else int(found[0])
                self._cache.forget()
                return marked

        return self._guard(search)

    def insert_seal(self, body: bytes, mac: str, *, after: int) -> int:
        """Record a seal if the newest seal's id is still ``after``; return its id."""

        def run() -> int:
            with self._writer() as raw:
                raw.execute("BEGIN IMMEDIATE")
                try:
                    newest = raw.execute(f"SELECT max(id) FROM {SEALS_TABLE}")
                    if int(newest.fetchone()[0] or 0) != after:
                        raw.execute("ROLLBACK")
                        return 0
                    cursor = raw.execute(
                        f"INSERT INTO {SEALS_TABLE} (body, mac) VALUES (?, ?)",
                        (body, mac),
                    )
                    raw.execute("COMMIT")
                except BaseException:
                    if raw.in_transaction:
                        raw.execute("ROLLBACK")
                    raise
                finally:
                    self._cache.forget()
                return int(cursor.lastrowid or 0)

        return self._guard(run)

    def latest_seal(self) -> Seal | None:
        """Return the newest seal, if any."""
        rows = self._query(
            f"SELECT id, body, mac FROM {SEALS_TABLE} ORDER BY id DESC LIMIT 1"
        )
        return _seal(rows[0]) if rows else None

    def seals(self) -> list[Seal]:
        """Return every seal, oldest first."""
        rows = self._query(f"SELECT id, body, mac FROM {SEALS_TABLE} ORDER BY id")
        return [_seal(row) for row in rows]

    def seal_sequence(self) -> int:
        """Return the highest seal id ever issued (``sqlite_sequence``)."""
        rows = self._query(
            "SELECT seq FROM sqlite_sequence WHERE name = ?", (SEALS_TABLE,)
        )
        return int(rows[0][0] or 0) if rows else 0

    def append_records(self) -> list[AppendRecord]:
        """Return every idempotency record."""
        rows = self._query(
            f"SELECT key, stream, first_version, last_version, positions "
            f"FROM {KEYS_TABLE}"
        )
        return [
            AppendRecord(
                str(r[0]),
                UUID(str(r[1])),
                int(r[2]),
                int(r[3]),
                tuple(msgspec.json.decode(r[4], type=list[int])),
            )
            for r in rows
        ]

    def beyond_sequence(self) -> list[StoredRow]:
        """SQLite positions are rowids, issued by no sequence: none."""
        return []

    def cipher_fingerprint(self, fingerprint: str | None) -> str | None:
        """Return the recorded key fingerprint, recording ``fingerprint`` if none."""
        select = f"SELECT fingerprint FROM {CIPHER_TABLE} WHERE one = 1"

        def run() -> str | None:
            with self._writer() as raw:
                found = raw.execute(select).fetchone()
                if found is None and fingerprint is not None:
                    try:
                        raw.execute(
                            f"INSERT OR IGNORE INTO {CIPHER_TABLE} (one, fingerprint) "
                            "VALUES (1, ?)",
                            (fingerprint,),
                        )
                    except sqlite3.OperationalError as e:
                        if "readonly" not in str(e).lower():
                            raise
                        return None
                    self._cache.forget()
                    found = raw.execute(select).fetchone()
                return None if found is None else str(found[0])

        return self._guard(run)

    def subscribe(self, *, gt: int, topics: Sequence[str]) -> _PollingSubscription:
        """Subscribe to rows after ``gt`` (polled every ``poll_interval`` seconds)."""
        return self._guard(
            lambda: _PollingSubscription(
                self._recorder, gt=gt, topics=topics, interval=self.poll_interval
            )
        )

    def close(self) -> None:
        """Close the writer connection and every pooled connection."""
        with self._write_lock:
            self._closed = True
            if self._write_conn is not None:
                self._write_conn.close()
                self._write_conn = None
        self._datastore.close()


def _identity(path: str) -> tuple[int, int] | None:
    try:
        found = os.stat(path)  # noqa: PTH116 - on every append: no Path object
    except OSError:
        return None
    return found.st_dev, found.st_ino


def _row_of(found: sqlite3.Row) -> StoredRow:
    return StoredRow(
        int(found[0]), UUID(found[1]), int(found[2]), str(found[3]), blob(found[4])
    )


def _seal(row: sqlite3.Row) -> Seal:
    return Seal(int(row[0]), blob(row[1]), str(row[2]))


def _row(n: Notification) -> StoredRow:
    stream = (
        n.originator_id if isinstance(n.originator_id, UUID) else UUID(n.originator_id)
    )
    return StoredRow(n.id, stream, n.originator_version, n.topic, blob(n.state))
