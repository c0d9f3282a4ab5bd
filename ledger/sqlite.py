"""The SQLite backend, built on eventsourcing's SQLite application recorder.

What we take from the library: its connection pool (one writer connection per
process, WAL), its table layout (``stored_events``: originator id, version, topic,
state; the rowid is the global position), its notification selection, and its
listen/notify subscription machinery. What we add:

- pragmas: ``synchronous`` (FULL by default: a turn is durable when acknowledged),
  busy timeout;
- triggers that make the table append-only and stream versions contiguous, so even a
  raw SQL client cannot rewrite history or leave a gap;
- group commit: several streams' appends in one ``BEGIN IMMEDIATE`` transaction,
  one fsync for all; heads are checked first and the rows go in with one
  ``executemany``, and should a row still be refused, the group is redone with a
  savepoint per append, so a conflict fails only its own append;
- a polling subscription (the library's SQLite recorder has none).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from typing import Final, Literal
from uuid import UUID

from eventsourcing.persistence import (
    InterfaceError,
    ListenNotifySubscription,
    Notification,
)
from eventsourcing.sqlite import (
    SQLITE3_DEFAULT_LOCK_TIMEOUT,
    SQLiteApplicationRecorder,
    SQLiteConnection,
    SQLiteConnectionPool,
    SQLiteDatastore,
)

from turnledger.ledger.backend import AppendRequest, Conflict, StoredRow
from turnledger.ledger.errors import StoreUnavailableError

Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]
"""SQLite's ``synchronous`` levels."""

TABLE: Final = "stored_events"

_APPEND_ONLY_TRIGGERS: Final = (
    (
        f"CREATE TRIGGER IF NOT EXISTS {TABLE}_no_update BEFORE UPDATE ON {TABLE} "
        "BEGIN SELECT RAISE(ABORT, 'turnledger: the ledger is append-only'); END"
    ),
    (
        f"CREATE TRIGGER IF NOT EXISTS {TABLE}_no_delete BEFORE DELETE ON {TABLE} "
        "BEGIN SELECT RAISE(ABORT, 'turnledger: the ledger is append-only'); END"
    ),
    (
        f"CREATE TRIGGER IF NOT EXISTS {TABLE}_contiguous BEFORE INSERT ON {TABLE} "
        "WHEN NEW.originator_version <> 1 + coalesce((SELECT max(originator_version) "
        f"FROM {TABLE} WHERE originator_id = NEW.originator_id), 0) "
        "BEGIN SELECT RAISE(ABORT, 'turnledger: stream versions must be contiguous'); "
        "END"
    ),
)

_INSERT: Final = f"INSERT INTO {TABLE} VALUES (?,?,?,?)"
_HEAD: Final = f"SELECT max(originator_version) FROM {TABLE} WHERE originator_id=?"
_MAX_ROWID: Final = f"SELECT max(rowid) FROM {TABLE}"
_COLUMNS: Final = "rowid, originator_id, originator_version, topic, state"

STATEMENT_CACHE_SIZE: Final = 64
"""Prepared statements each connection keeps (sqlite3's own default is 128)."""


class _Pool(SQLiteConnectionPool):
    """The library's pool, with our pragmas applied to every new connection."""

    def __init__(self, *, db_name: str, lock_timeout: int, synchronous: str) -> None:
        self.synchronous = synchronous
        super().__init__(db_name=db_name, lock_timeout=lock_timeout)

    def _create_connection(self) -> SQLiteConnection:
        # The library's own steps (eventsourcing 9.5.6 SQLiteConnectionPool), except
        # the statement cache: it passes ``cached_statements=True``, which sqlite3
        # reads as a cache of ONE statement, so every statement of an append (and
        # the INSERT with its triggers) was compiled again on each use.
        try:
            raw = sqlite3.connect(
                database=self.db_name,
                uri=True,
                check_same_thread=False,
                isolation_level=None,  # autocommit: we issue BEGIN/COMMIT ourselves
                cached_statements=STATEMENT_CACHE_SIZE,
                timeout=self.lock_timeout or SQLITE3_DEFAULT_LOCK_TIMEOUT,
            )
        except (sqlite3.Error, TypeError) as e:
            raise InterfaceError(e) from e
        if not self.is_sqlite_memory_mode and not self.is_journal_mode_wal:
            mode = raw.execute("PRAGMA journal_mode").fetchone()[0]
            if str(mode).lower() != "wal":
                raw.execute("PRAGMA journal_mode=WAL")
                self.journal_mode_was_changed_to_wal = True
            self.is_journal_mode_wal = True
        raw.row_factory = sqlite3.Row
        raw.execute(f"PRAGMA synchronous={self.synchronous}")
        raw.execute(f"PRAGMA busy_timeout={(self.lock_timeout or 5) * 1000}")
        return SQLiteConnection(sqlite_conn=raw, max_age=self.max_age)


class _Datastore(SQLiteDatastore):
    """The library's datastore with our pool."""

    def __init__(self, db_name: str, *, lock_timeout: int, synchronous: str) -> None:
        super().__init__(db_name, lock_timeout=lock_timeout)
        self.pool.close()
        self.pool = _Pool(
            db_name=db_name, lock_timeout=lock_timeout, synchronous=synchronous
        )


class _Recorder(SQLiteApplicationRecorder):
    """The library's application recorder plus the ledger's triggers."""

    def construct_create_table_statements(self) -> list[str]:
        return [*super().construct_create_table_statements(), *_APPEND_ONLY_TRIGGERS]


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
        lock_timeout: Seconds to wait for another process's write lock.
        poll_interval: Seconds between polls of a subscription.
    """

    kind = "sqlite"

    def __init__(
        self,
        path: str,
        *,
        synchronous: Synchronous = "FULL",
        lock_timeout: int = 30,
        poll_interval: float = 0.02,
    ) -> None:
        self.path = path
        self.poll_interval = poll_interval
        try:
            self._datastore = _Datastore(
                path, lock_timeout=lock_timeout, synchronous=synchronous
            )
            self._recorder = _Recorder(self._datastore)
            self._recorder.create_table()
        except Exception as e:
            msg = f"Cannot open the SQLite ledger at {path!r}: {e}"
            raise StoreUnavailableError(msg) from e

    def insert_batch(
        self, requests: Sequence[AppendRequest], *, atomic: bool = False
    ) -> list[tuple[int, ...] | Conflict]:
        """Write appends in one transaction with a savepoint each (one fsync).

        With ``atomic``, any conflict rolls back the whole transaction.
        """
        pool = self._datastore.pool
        connection = pool.get_connection(is_writer=True)
        try:
            raw = connection._sqlite_conn  # noqa: SLF001 - the library keeps it private
            return _write_group(raw, requests, atomic=atomic)
        finally:
            pool.put_connection(connection)

    def select_stream(
        self, stream_id: UUID, *, gt: int, lte: int | None, limit: int | None
    ) -> list[StoredRow]:
        """Return a stream's rows with versions in ``(gt, lte]``."""
        sql = f"SELECT rowid, originator_version, topic, state FROM {TABLE} "
        sql += "WHERE originator_id=? AND originator_version>?"
        params: list[object] = [stream_id.hex, gt]
        if lte is not None:
            sql += " AND originator_version<=?"
            params.append(lte)
        sql += " ORDER BY originator_version"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        with self._datastore.transaction(commit=False) as cursor:
            cursor.execute(sql, params)
            rows = cursor.fetchall()
        return [StoredRow(r[0], stream_id, r[1], r[2], r[3]) for r in rows]

    def select_all(
        self, *, gt: int, limit: int, topics: Sequence[str], lte: int | None
    ) -> list[StoredRow]:
        """Return rows with positions in ``(gt, lte]`` in order."""
        notifications = self._recorder.select_notifications(
            start=gt, limit=limit, stop=lte, topics=topics, inclusive_of_start=False
        )
        return [_row(n) for n in notifications]

    def stream_version(self, stream_id: UUID) -> int:
        """Return a stream's head version (0 when empty)."""
        with self._datastore.transaction(commit=False) as cursor:
            cursor.execute(_HEAD, (stream_id.hex,))
            return int(cursor.fetchone()[0] or 0)

    def max_position(self) -> int:
        """Return the highest position written (0 when empty)."""
        return int(self._recorder.max_notification_id() or 0)

    def stream_ids(self) -> list[UUID]:
        """Return every stream id, sorted."""
        with self._datastore.transaction(commit=False) as cursor:
            cursor.execute(f"SELECT DISTINCT originator_id FROM {TABLE}")
            return sorted(UUID(r[0]) for r in cursor.fetchall())

    def count_rows(self) -> int:
        """Return the number of rows."""
        with self._datastore.transaction(commit=False) as cursor:
            cursor.execute(f"SELECT count(*) FROM {TABLE}")
            return int(cursor.fetchone()[0])

    def subscribe(self, *, gt: int, topics: Sequence[str]) -> _PollingSubscription:
        """Subscribe to rows after ``gt`` (polled every ``poll_interval`` seconds)."""
        return _PollingSubscription(
            self._recorder, gt=gt, topics=topics, interval=self.poll_interval
        )

    def close(self) -> None:
        """Close every pooled connection."""
        self._datastore.close()


class _RowRefusedError(Exception):
    """The batched insert hit a key or trigger error; redo the group with savepoints."""


def _write_group(
    raw: sqlite3.Connection, requests: Sequence[AppendRequest], *, atomic: bool
) -> list[tuple[int, ...] | Conflict]:
    try:
        return _write_group_batched(raw, requests, atomic=atomic)
    except _RowRefusedError:
        return _write_group_savepoints(raw, requests, atomic=atomic)


def _commit(
    raw: sqlite3.Connection,
    results: list[tuple[int, ...] | Conflict],
    last_position: int,
    *,
    atomic: bool,
) -> list[tuple[int, ...] | Conflict]:
    if atomic and any(isinstance(r, Conflict) for r in results):
        # All or nothing: one conflict abandons the whole group.
        raw.execute("ROLLBACK")
        return [r if isinstance(r, Conflict) else () for r in results]
    _check_positions(raw, last_position)
    raw.execute("COMMIT")
    return results


def _write_group_batched(
    raw: sqlite3.Connection, requests: Sequence[AppendRequest], *, atomic: bool
) -> list[tuple[int, ...] | Conflict]:
    # The common case in ONE executemany: every head is checked first (we hold the
    # write lock, and the heads of streams appended earlier in the group are
    # tracked), then all accepted rows go in together. Few statements, and so few
    # GIL hand-offs for the writer thread. If any row is refused (which the head
    # checks make impossible for rows built by ``EventStore.encode``) the whole
    # transaction is rolled back and the group is redone one savepoint per append,
    # so the outcome is always the savepoint path's.
    results: list[tuple[int, ...] | Conflict] = []
    raw.execute("BEGIN IMMEDIATE")
    try:
        next_position = int(raw.execute(_MAX_ROWID).fetchone()[0] or 0) + 1
        heads: dict[str, int] = {}
        rows: list[tuple[str, int, str, bytes]] = []
        for request in requests:
            stream_hex = request.stream_id.hex
            head = heads.get(stream_hex)
            if head is None:
                head = int(raw.execute(_HEAD, (stream_hex,)).fetchone()[0] or 0)
            if head != request.expected_version:
                heads[stream_hex] = head
                results.append(Conflict(head))
                continue
            count = len(request.rows)
            rows.extend(
                (stream_hex, row.originator_version, row.topic, row.state)
                for row in request.rows
            )
            results.append(tuple(range(next_position, next_position + count)))
            next_position += count
            # Valid whenever the insert succeeds: the contiguity trigger then
            # accepted exactly versions head+1 .. head+count.
            heads[stream_hex] = head + count
        try:
            raw.executemany(_INSERT, rows)
        except sqlite3.IntegrityError as e:
            raise _RowRefusedError from e
        return _commit(raw, results, next_position - 1, atomic=atomic)
    except BaseException:
        if raw.in_transaction:
            raw.execute("ROLLBACK")
        raise


def _write_group_savepoints(
    raw: sqlite3.Connection, requests: Sequence[AppendRequest], *, atomic: bool
) -> list[tuple[int, ...] | Conflict]:
    results: list[tuple[int, ...] | Conflict] = []
    raw.execute("BEGIN IMMEDIATE")
    try:
        next_position = int(raw.execute(_MAX_ROWID).fetchone()[0] or 0) + 1
        for request in requests:
            outcome = _write_one(raw, request, next_position)
            if not isinstance(outcome, Conflict):
                next_position += len(outcome)
            results.append(outcome)
        return _commit(raw, results, next_position - 1, atomic=atomic)
    except BaseException:
        if raw.in_transaction:
            raw.execute("ROLLBACK")
        raise


def _check_positions(raw: sqlite3.Connection, expected_last: int) -> None:
    # No deletes and a single writer: rowids are max+1 in order. Check it.
    last = int(raw.execute(_MAX_ROWID).fetchone()[0] or 0)
    if last != expected_last:
        msg = f"turnledger: expected the last position {expected_last}, found {last}"
        raise sqlite3.IntegrityError(msg)


def _write_one(
    raw: sqlite3.Connection, request: AppendRequest, first_position: int
) -> tuple[int, ...] | Conflict:
    stream_hex = request.stream_id.hex
    head = int(raw.execute(_HEAD, (stream_hex,)).fetchone()[0] or 0)
    if head != request.expected_version:
        return Conflict(head)
    raw.execute("SAVEPOINT turnledger_append")
    try:
        raw.executemany(
            _INSERT,
            [
                (stream_hex, row.originator_version, row.topic, row.state)
                for row in request.rows
            ],
        )
    except sqlite3.IntegrityError:
        # A key or contiguity trigger refused a row: only this append fails.
        raw.execute("ROLLBACK TO turnledger_append")
        raw.execute("RELEASE turnledger_append")
        return Conflict(int(raw.execute(_HEAD, (stream_hex,)).fetchone()[0] or 0))
    raw.execute("RELEASE turnledger_append")
    return tuple(range(first_position, first_position + len(request.rows)))


def _row(n: Notification) -> StoredRow:
    stream = (
        n.originator_id if isinstance(n.originator_id, UUID) else UUID(n.originator_id)
    )
    return StoredRow(n.id, stream, n.originator_version, n.topic, n.state)
