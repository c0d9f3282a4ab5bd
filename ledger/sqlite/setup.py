"""The SQLite backend's set-up: its connections, its triggers, its typed errors.

The library's connection pool and datastore with our pragmas on every connection
(``synchronous``, the busy timeout, a real statement cache), the library's
application recorder plus the ledger's append-only triggers (see
``ledger.sqlite``), and the translation of driver errors into the ledger's typed
errors.
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Callable
from typing import Final, Literal

from eventsourcing.persistence import InterfaceError, PersistenceError
from eventsourcing.sqlite import (
    SQLITE3_DEFAULT_LOCK_TIMEOUT,
    SQLiteApplicationRecorder,
    SQLiteConnection,
    SQLiteConnectionPool,
    SQLiteDatastore,
)

from turnledger.ledger.errors import (
    LedgerError,
    LedgerFullError,
    LedgerLockedError,
    LedgerReadOnlyError,
    StoreUnavailableError,
)
from turnledger.ledger.frame import FLAG_SEALED
from turnledger.ledger.sqlite.write import KEYS_TABLE, TABLE

Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]
"""SQLite's ``synchronous`` levels."""

SEALS_TABLE: Final = "turnledger_seals"
CIPHER_TABLE: Final = "turnledger_cipher"
"""One row: the fingerprint of the ledger's cipher key (``ledger.key_check``)."""
IDENTITY_TABLE: Final = "turnledger_identity"
"""One row: the ledger's random id, written once (derived files record it)."""
SEALED_TABLE: Final = "turnledger_sealed"
"""Whether the ledger holds sealed rows (``ledger.erasable``), written once each:
row ``one = 1`` names the first sealed row's position (the trigger below writes
it in the transaction that inserts that row); row ``one = 0``, the position up
to which a ledger from before the trigger was searched (``first_sealed``)."""
SEALED_BYTES: Final = bytes(b for b in range(256) if b & FLAG_SEALED).hex()
"""Every flags byte with :data:`~ledger.frame.FLAG_SEALED` set, as hex (SQLite
has no byte function: byte 1 of a frame is looked up in this set)."""
_REFUSE: Final = (
    "BEGIN SELECT RAISE(ABORT, 'turnledger: the ledger is append-only'); END"
)


def sealed_frame(state: str) -> str:
    """The SQL condition that the frame ``state`` (a column) is sealed."""
    value = f"CAST({state} AS BLOB)"
    return (
        f"(length({value}) > 1 AND instr(x'{SEALED_BYTES}', substr({value}, 2, 1)) > 0)"
    )


def _no_change(table: str) -> tuple[str, str]:
    return (
        f"CREATE TRIGGER IF NOT EXISTS {table}_no_update BEFORE UPDATE ON {table} "
        + _REFUSE,
        f"CREATE TRIGGER IF NOT EXISTS {table}_no_delete BEFORE DELETE ON {table} "
        + _REFUSE,
    )


_APPEND_ONLY_TRIGGERS: Final = (
    *_no_change(TABLE),
    (
        f"CREATE TRIGGER IF NOT EXISTS {TABLE}_contiguous BEFORE INSERT ON {TABLE} "
        "WHEN NEW.originator_version <> 1 + coalesce((SELECT max(originator_version) "
        f"FROM {TABLE} WHERE originator_id = NEW.originator_id), 0) "
        "BEGIN SELECT RAISE(ABORT, 'turnledger: stream versions must be contiguous'); "
        "END"
    ),
    (
        # REPLACE on a taken rowid deletes the old row without a DELETE trigger
        # (recursive_triggers is off by default): refuse a taken rowid up front.
        f"CREATE TRIGGER IF NOT EXISTS {TABLE}_no_replace BEFORE INSERT ON {TABLE} "
        f"WHEN EXISTS (SELECT 1 FROM {TABLE} WHERE rowid = NEW.rowid) "
        "BEGIN SELECT RAISE(ABORT, 'turnledger: the ledger is append-only "
        "(a position is never replaced)'); END"
    ),
    (
        f"CREATE TABLE IF NOT EXISTS {KEYS_TABLE} (key TEXT PRIMARY KEY, "
        "stream TEXT NOT NULL, first_version INTEGER NOT NULL, "
        "last_version INTEGER NOT NULL, positions TEXT NOT NULL)"
    ),
    *_no_change(KEYS_TABLE),
    (
        f"CREATE TABLE IF NOT EXISTS {SEALS_TABLE} (id INTEGER PRIMARY KEY "
        "AUTOINCREMENT, body BLOB NOT NULL, mac TEXT NOT NULL)"
    ),
    *_no_change(SEALS_TABLE),
    (
        f"CREATE TABLE IF NOT EXISTS {IDENTITY_TABLE} (one INTEGER PRIMARY KEY "
        "CHECK (one = 1), id TEXT NOT NULL)"
    ),
    *_no_change(IDENTITY_TABLE),
    (
        f"CREATE TABLE IF NOT EXISTS {CIPHER_TABLE} (one INTEGER PRIMARY KEY "
        "CHECK (one = 1), fingerprint TEXT NOT NULL)"
    ),
    *_no_change(CIPHER_TABLE),
    (
        f"CREATE TABLE IF NOT EXISTS {SEALED_TABLE} (one INTEGER PRIMARY KEY "
        "CHECK (one IN (0, 1)), position INTEGER NOT NULL)"
    ),
    *_no_change(SEALED_TABLE),
    (
        f"CREATE TRIGGER IF NOT EXISTS {TABLE}_sealed AFTER INSERT ON {TABLE} "
        f"WHEN {sealed_frame('NEW.state')} "
        f"BEGIN INSERT OR IGNORE INTO {SEALED_TABLE} (one, position) "
        "VALUES (1, NEW.rowid); END"
    ),
)

STATEMENT_CACHE_SIZE: Final = 64
"""Prepared statements each connection keeps (sqlite3's own default is 128)."""


class Pool(SQLiteConnectionPool):
    """The library's pool, with our pragmas applied to every new connection."""

    def __init__(self, *, db_name: str, lock_timeout: int, synchronous: str) -> None:
        self.synchronous = synchronous
        super().__init__(db_name=db_name, lock_timeout=lock_timeout)

    def _create_connection(self) -> SQLiteConnection:
        return SQLiteConnection(sqlite_conn=self.connect_raw(), max_age=self.max_age)

    def connect_raw(self) -> sqlite3.Connection:
        """Return a new sqlite3 connection set up as every pooled one."""
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
            if set_wal(raw, float(self.lock_timeout or 5)):
                self.journal_mode_was_changed_to_wal = True
            self.is_journal_mode_wal = True
        raw.row_factory = sqlite3.Row
        # A TEXT value where a BLOB belongs (written behind our back) must still
        # read, so that verify can name the row instead of failing the read.
        raw.text_factory = lenient_text
        raw.execute(f"PRAGMA synchronous={self.synchronous}")
        raw.execute(f"PRAGMA busy_timeout={(self.lock_timeout or 5) * 1000}")
        return raw


_BUSY: Final = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})


def set_wal(
    raw: sqlite3.Connection,
    timeout: float,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """Put the database in WAL mode; return whether this call changed it.

    While another process switches a new file to WAL at the same moment, SQLite
    answers ``PRAGMA journal_mode=WAL`` "database is locked" at once, without
    its busy handler (4 processes opening one new ledger: about one round in
    ten failed so). So a busy answer is tried again, with short sleeps, until
    ``timeout`` seconds have passed; then it is raised as before.
    """
    deadline = time.monotonic() + timeout
    delay = 0.001
    while True:
        try:
            mode = raw.execute("PRAGMA journal_mode").fetchone()[0]
            if str(mode).lower() == "wal":
                return False
            raw.execute("PRAGMA journal_mode=WAL")
        except sqlite3.OperationalError as e:
            if e.sqlite_errorcode & 0xFF not in _BUSY or time.monotonic() >= deadline:
                raise
            sleep(delay)
            delay = min(2 * delay, 0.05)
        else:
            return True


class Datastore(SQLiteDatastore):
    """The library's datastore with our pool."""

    def __init__(self, db_name: str, *, lock_timeout: int, synchronous: str) -> None:
        super().__init__(db_name, lock_timeout=lock_timeout)
        self.pool.close()
        self.pool: Pool = Pool(
            db_name=db_name, lock_timeout=lock_timeout, synchronous=synchronous
        )


class Recorder(SQLiteApplicationRecorder):
    """The library's application recorder plus the ledger's triggers."""

    def construct_create_table_statements(self) -> list[str]:
        """The library's table, then the ledger's tables and triggers."""
        return [*super().construct_create_table_statements(), *_APPEND_ONLY_TRIGGERS]


def ledger_identity(raw: sqlite3.Connection) -> str | None:
    """Return the ledger's id, writing a new random one if it has none yet.

    Written once: ``INSERT OR IGNORE`` on the one-row table (the first writer
    of several processes opening a new ledger wins; the others read its id).
    A ledger made before ids existed, opened from a read-only file, has none:
    None.
    """
    row = raw.execute(f"SELECT id FROM {IDENTITY_TABLE} WHERE one = 1").fetchone()
    if row is None:
        try:
            raw.execute(
                f"INSERT OR IGNORE INTO {IDENTITY_TABLE} (one, id) VALUES (1, ?)",
                (uuid.uuid4().hex,),
            )
        except sqlite3.OperationalError as e:
            if "readonly" not in str(e).lower():
                raise
            return None
        row = raw.execute(f"SELECT id FROM {IDENTITY_TABLE} WHERE one = 1").fetchone()
    return str(row[0])


def lenient_text(data: bytes) -> str:
    """Decode TEXT from SQLite, keeping bytes that are not UTF-8 (surrogateescape)."""
    return data.decode("utf-8", "surrogateescape")


def translate(error: BaseException, path: str, waited: float) -> LedgerError:
    """Return the typed ledger error for a SQLite driver error.

    Args:
        error: What the driver (or the library around it) raised.
        path: The ledger file.
        waited: Seconds the failed call took (the real wait when locked).
    """
    if isinstance(error, LedgerError):
        return error
    cause: BaseException = error
    while isinstance(cause, PersistenceError) and cause.__cause__ is not None:
        cause = cause.__cause__
    text = str(cause) or str(error)
    lowered = text.lower()
    if "locked" in lowered or "busy" in lowered:
        return LedgerLockedError(
            f"the ledger is locked by another writer (waited {round(waited)} s)"
        )
    if "full" in lowered:
        return LedgerFullError(
            f"The SQLite ledger at {path!r} is full (disk or size limit): "
            f"{text}; nothing was written"
        )
    if "readonly" in lowered or "read-only" in lowered:
        return LedgerReadOnlyError(
            f"The SQLite ledger at {path!r} refuses writes (read-only): {text}; "
            "nothing was written"
        )
    return StoreUnavailableError(f"SQLite ledger at {path!r}: {text}")
