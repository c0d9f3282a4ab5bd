"""The SQLite memory schema, its connection settings and row conversions.

Tables: ``memories`` (one row per agent and key; an integer rowid so FTS5 can use
it as external content), ``memories_fts`` (FTS5 over key and content, kept in
step by triggers), ``memory_meta`` (schema version, embedding identity and
window size), ``embedding_cache`` and ``memory_tracking`` (the applied ledger
position). Times are integer microseconds since the epoch
(UTC), so comparisons are exact and a rebuild reproduces them.

With a cipher key the file is a SQLCipher database keyed with the key derived
for memory (``ledger.file_keys``): every table, the full-text index, the
vectors and the embedding cache are encrypted at rest, write-ahead log
included; a file that does not fit the key is refused at open
(``ledger.sqlite.encrypted``).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

from turnledger.ledger.file_keys import file_key
from turnledger.ledger.sqlite.encrypted import connect_file
from turnledger.ledger.sqlite.setup import set_wal
from turnledger.policies.threads import THREAD_CATEGORY
from turnledger.projections.base import LedgerHead, head_position
from turnledger.projections.memory.embedding import EmbeddingIdentity
from turnledger.projections.memory.protocol import MemoryEntry
from turnledger.projections.memory.sqlite._hybrid import Scored
from turnledger.projections.memory.sqlite.cache import CACHE_DDL

SCHEMA_VERSION: Final = 1
"""The layout version recorded in ``memory_meta``."""

PRAGMAS: Final = {
    "synchronous": "NORMAL",
    # Deleted rows are overwritten, not left in free pages (forget that forgets).
    "secure_delete": "ON",
    "temp_store": "MEMORY",
    "busy_timeout": "5000",
    "cache_size": "-32768",
    "mmap_size": "268435456",
}
"""Connection settings: a view store, so NORMAL durability (it is rebuildable).

WAL mode is set first, by ``ledger.sqlite.setup.set_wal`` (a busy answer while
another process switches a new file is tried again)."""

BUSY_SECONDS: Final = 5.0
"""How long opening waits for another process's lock (as ``busy_timeout``)."""

CLEAR_MEMORY_REMEDY: Final = (
    "encrypt it in place with turnledger encrypt-files, or move it (and its -wal,"
    " -shm) away and the memory is rebuilt from the ledger's memory events,"
    " encrypted (then memory reindex computes its vectors)"
)
"""What the refusal of a clear memory file with a cipher key set tells the user."""

DDL: Final = f"""
CREATE TABLE IF NOT EXISTS memories (
    rowid INTEGER PRIMARY KEY,
    id TEXT NOT NULL,
    agent TEXT NOT NULL,
    key TEXT NOT NULL,
    tokens INTEGER,
    content TEXT NOT NULL,
    category TEXT NOT NULL,
    session TEXT,
    namespace TEXT NOT NULL DEFAULT 'default',
    importance REAL,
    created_us INTEGER NOT NULL,
    updated_us INTEGER NOT NULL,
    superseded_by TEXT,
    embedding BLOB,
    UNIQUE (agent, key)
);
CREATE INDEX IF NOT EXISTS memories_recent
    ON memories (agent, updated_us DESC, id, superseded_by)
    WHERE superseded_by IS NULL;
CREATE INDEX IF NOT EXISTS memories_session
    ON memories (agent, session, updated_us DESC, id, category, superseded_by)
    WHERE superseded_by IS NULL;
CREATE INDEX IF NOT EXISTS memories_agent
    ON memories (agent) WHERE superseded_by IS NULL;
CREATE INDEX IF NOT EXISTS memories_thread
    ON memories (agent, session, namespace) WHERE superseded_by IS NULL
    AND category = '{THREAD_CATEGORY}';
CREATE INDEX IF NOT EXISTS memories_unembedded
    ON memories (superseded_by) WHERE embedding IS NULL;
CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5 (
    key, content,
    content = 'memories', content_rowid = 'rowid',
    tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TRIGGER IF NOT EXISTS memories_ai AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts (rowid, key, content)
    VALUES (new.rowid, new.key, new.content);
END;
CREATE TRIGGER IF NOT EXISTS memories_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, key, content)
    VALUES ('delete', old.rowid, old.key, old.content);
END;
CREATE TRIGGER IF NOT EXISTS memories_au AFTER UPDATE OF key, content ON memories
WHEN old.key IS NOT new.key OR old.content IS NOT new.content BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, key, content)
    VALUES ('delete', old.rowid, old.key, old.content);
    INSERT INTO memories_fts (rowid, key, content)
    VALUES (new.rowid, new.key, new.content);
END;
CREATE TABLE IF NOT EXISTS memory_meta (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS memory_tracking (
    name TEXT PRIMARY KEY,
    position INTEGER NOT NULL
) WITHOUT ROWID;
"""
"""Every table, index and trigger (idempotent). Two partial indexes cover
the newest-rows walks (recent queries, ``list``, the LIKE window): they carry
``superseded_by`` and ``category`` so no table row is read to filter; the
third lists the rows still waiting for their vector (in rowid order among the
live ones), so finding them never scans the table; ``memories_thread`` walks
a conversation thread (an agent's ``conversation`` rows of one session and
namespace, by rowid: :mod:`~policies.threads`) straight to a row's neighbours.
``embedding`` holds a row's
windows' float32 vectors end to end (one window for a short text); ``tokens``
its key and content's length in word tokens
(:func:`~policies.relevance.token_count`), which keyword ranking reads with the
row (a file made before the column gets it appended when opened, and its older
rows hold ``NULL``: their length is read from FTS5's ``docsize`` records
instead)."""

STAGE_DDL: Final = """
CREATE TEMP TABLE IF NOT EXISTS memory_stage (
    seq INTEGER PRIMARY KEY,
    id TEXT, agent TEXT, key TEXT, content TEXT, category TEXT, session TEXT,
    namespace TEXT, importance REAL, at_us INTEGER, embedding BLOB, tokens INTEGER
);
"""
"""A per-connection staging table: a batch of writes becomes ONE upsert
statement, so FTS5 flushes once per batch rather than once per row."""

COLUMNS: Final = (
    "rowid, id, agent, key, content, category, session, namespace, importance, "
    "created_us, updated_us"
)
"""The columns :func:`entry_from_row` reads, in order."""

UPSERT_TAIL: Final = """
ON CONFLICT (agent, key) DO UPDATE SET
    content = excluded.content,
    tokens = excluded.tokens,
    category = excluded.category,
    session = excluded.session,
    namespace = excluded.namespace,
    importance = excluded.importance,
    updated_us = max(excluded.updated_us, memories.created_us),
    superseded_by = NULL,
    embedding = CASE
        WHEN excluded.embedding IS NULL AND memories.content = excluded.content
        THEN memories.embedding ELSE excluded.embedding END
"""
"""The upsert rule: id and creation time are kept (an update is never dated
before the creation); a re-store un-hides a superseded row; a vector survives a
failed re-embedding of unchanged content."""

TRACKING_NAME: Final = "memory"
"""The name of the tracking row."""

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_META_DIMS = "embedding_dims"
_META_MODEL = "embedding_model"
_META_PROVIDER = "embedding_provider"
_META_WINDOW = "embedding_window"


def connect(path: str | Path, cipher_key: str | None = None) -> sqlite3.Connection:
    """Open (and create) a memory database in autocommit mode.

    Args:
        path: A file path, or ``:memory:``.
        cipher_key: The base64 cipher key; None reads ``TURNLEDGER_CIPHER_KEY``,
            ``""`` means none (see ``ledger.file_keys``).

    Returns:
        The connection, in WAL mode, with :data:`PRAGMAS` applied and the
        schema created.
    """
    db = connect_file(
        path,
        key=file_key("memory", cipher_key),
        what="memory database",
        clear_remedy=CLEAR_MEMORY_REMEDY,
    )
    set_wal(db, BUSY_SECONDS)
    for name, value in PRAGMAS.items():
        db.execute(f"PRAGMA {name} = {value}")
    # One transaction: the schema and its version appear together, or not at all.
    db.executescript(
        f"BEGIN IMMEDIATE; {DDL} {CACHE_DDL} {STAGE_DDL}"
        "INSERT OR IGNORE INTO memory_meta (name, value) "
        f"VALUES ('schema_version', '{SCHEMA_VERSION}'); COMMIT;"
    )
    _add_tokens(db)
    return db


def _add_tokens(db: sqlite3.Connection) -> None:
    """Append the ``tokens`` column to a file made before it (once, under a lock)."""
    if _has_tokens(db):
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        if not _has_tokens(db):  # another process may have added it meanwhile
            db.execute("ALTER TABLE memories ADD COLUMN tokens INTEGER")
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def _has_tokens(db: sqlite3.Connection) -> bool:
    return any(row[1] == "tokens" for row in db.execute("PRAGMA table_info(memories)"))


def bind_ledger(
    db: sqlite3.Connection, ledger_id: str | None, head: LedgerHead
) -> bool:
    """Tie the database to a ledger; return whether it was emptied.

    In one transaction: a database recording another ledger's id (copied
    from another ledger, or kept beside a ledger deleted and created again),
    or tracking a position past ``head`` (read after the tracked positions,
    inside the transaction: :data:`~projections.base.LedgerHead`), loses every
    memory row and its tracking position (the embedding cache, keyed by
    content, stays); then ``ledger_id`` is recorded (None: only the position
    check applies). The caller catches up from the ledger's memory events.
    """
    db.execute("BEGIN IMMEDIATE")
    try:
        row = db.execute(
            "SELECT value FROM memory_meta WHERE name = 'ledger_id'"
        ).fetchone()
        (tracked,) = db.execute(
            "SELECT coalesce(max(position), 0) FROM memory_tracking"
        ).fetchone()
        stale = int(tracked) > head_position(head) or (
            row is not None and ledger_id is not None and str(row[0]) != ledger_id
        )
        if stale:
            db.execute("DELETE FROM memories")
            db.execute("DELETE FROM memory_tracking")
        if ledger_id is not None:
            db.execute(
                "INSERT OR REPLACE INTO memory_meta (name, value) "
                "VALUES ('ledger_id', ?)",
                (ledger_id,),
            )
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    return stale


def stored_identity(db: sqlite3.Connection) -> EmbeddingIdentity | None:
    """Return the embedding identity the stored vectors have, if any."""
    meta = dict(db.execute("SELECT name, value FROM memory_meta").fetchall())
    if _META_PROVIDER not in meta:
        return None
    return EmbeddingIdentity(
        str(meta[_META_PROVIDER]), str(meta[_META_MODEL]), int(meta[_META_DIMS])
    )


def stamp_identity(db: sqlite3.Connection, identity: EmbeddingIdentity) -> None:
    """Record the embedding identity of the stored vectors."""
    db.executemany(
        "INSERT OR REPLACE INTO memory_meta (name, value) VALUES (?, ?)",
        [
            (_META_PROVIDER, identity.provider),
            (_META_MODEL, identity.model),
            (_META_DIMS, str(identity.dims)),
        ],
    )


def stored_window(db: sqlite3.Connection) -> int | None:
    """Return the window size the stored vectors were split with (None: unknown)."""
    row = db.execute(
        "SELECT value FROM memory_meta WHERE name = ?", (_META_WINDOW,)
    ).fetchone()
    return None if row is None else int(row[0])


def stamp_window(db: sqlite3.Connection, window: int) -> None:
    """Record the window size the stored vectors are split with."""
    db.execute(
        "INSERT OR REPLACE INTO memory_meta (name, value) VALUES (?, ?)",
        (_META_WINDOW, str(window)),
    )


def to_us(moment: datetime) -> int:
    """Return a time as integer microseconds since the epoch (naive = UTC)."""
    at = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment
    return (at - _EPOCH) // timedelta(microseconds=1)


def from_us(micros: int) -> datetime:
    """Return microseconds since the epoch as an aware UTC time."""
    return _EPOCH + timedelta(microseconds=micros)


def entry_from_row(row: Sequence[Any], score: float | None = None) -> MemoryEntry:
    """Build an entry from a row selected as :data:`COLUMNS`."""
    return MemoryEntry(
        id=row[1],
        agent=row[2],
        key=row[3],
        content=row[4],
        category=row[5],
        session=row[6],
        namespace=row[7],
        importance=row[8],
        created_at=from_us(row[9]),
        updated_at=from_us(row[10]),
        score=score,
    )


class Database:
    """One connection, its lock and explicit write transactions.

    Args:
        path: A file path, or ``:memory:``.
        on_rollback: Called after a transaction rolls back (caches that may
            hold rolled-back rows drop them).
        cipher_key: The base64 cipher key (see :func:`connect`).
    """

    def __init__(
        self,
        path: str | Path,
        on_rollback: Callable[[], None] | None = None,
        *,
        cipher_key: str | None = None,
    ) -> None:
        self.conn = connect(path, cipher_key)
        self.lock = threading.RLock()
        self._on_rollback = on_rollback

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """Hold the lock and yield the connection (autocommit reads)."""
        with self.lock:
            yield self.conn

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """Run the block in one ``BEGIN IMMEDIATE`` transaction, under the lock.

        The writer lock is taken up front, so a read-then-write cannot deadlock;
        any exception rolls everything back.
        """
        with self.lock:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
                self.conn.execute("COMMIT")
            except BaseException:
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                if self._on_rollback is not None:
                    self._on_rollback()
                raise

    def close(self) -> None:
        """Close the connection."""
        with self.lock:
            self.conn.close()


def hydrate(conn: sqlite3.Connection, fused: Sequence[Scored]) -> list[MemoryEntry]:
    """Return the live rows of ``fused``, in its order, with its scores."""
    marks = ",".join("?" * len(fused))
    rows = {
        row[0]: row
        for row in conn.execute(
            f"SELECT {COLUMNS} FROM memories "
            f"WHERE rowid IN ({marks}) AND superseded_by IS NULL",
            [s.rowid for s in fused],
        )
    }
    return [entry_from_row(rows[s.rowid], s.score) for s in fused if s.rowid in rows]
