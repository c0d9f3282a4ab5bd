"""The write statements of the SQLite memory (run inside the caller's transaction).

Every function returns the rowids it touched, so the in-memory vectors can
follow the table exactly.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any, Final

from turnledger.policies.relevance import token_count
from turnledger.projections.memory.protocol import NewMemory
from turnledger.projections.memory.sqlite._schema import (
    COLUMNS,
    TRACKING_NAME,
    UPSERT_TAIL,
    to_us,
)

Write = tuple[NewMemory, bytes | None]
"""An entry and its float32 vector (``None``: no vector)."""

_INSERT: Final = (
    "INSERT INTO memories (id, agent, key, content, category, session, namespace, "
    "importance, created_us, updated_us, embedding, tokens) "
)


def upsert(
    db: sqlite3.Connection, entry: NewMemory, blob: bytes | None
) -> tuple[Any, ...]:
    """Upsert one entry; return its row as :data:`COLUMNS`."""
    row: tuple[Any, ...] = db.execute(
        f"{_INSERT} VALUES (?,?,?,?,?,?,?,?,?,?,?,?) {UPSERT_TAIL} RETURNING {COLUMNS}",
        _values(entry, blob),
    ).fetchone()
    return row


def upsert_many(db: sqlite3.Connection, batch: Sequence[Write]) -> list[int]:
    """Upsert entries in order; return the rowids written.

    The batch goes through a staging table into ONE upsert statement: FTS5
    flushes its pending terms at every statement boundary inside a trigger, so
    one statement per row would write one tiny index segment per row.
    """
    if len(batch) <= 1:
        return [int(upsert(db, entry, blob)[0]) for entry, blob in batch]
    db.execute("DELETE FROM temp.memory_stage")
    db.executemany(
        "INSERT INTO temp.memory_stage (id, agent, key, content, category, "
        "session, namespace, importance, at_us, embedding, tokens) "
        "VALUES (?,?,?,?,?,?,?,?,?,?,?)",
        [(*values[:9], *values[10:]) for values in (_values(*w) for w in batch)],
    )
    rows = db.execute(
        f"{_INSERT} SELECT id, agent, key, content, category, session, namespace, "
        "importance, at_us, at_us, embedding, tokens FROM temp.memory_stage "
        f"WHERE true ORDER BY seq {UPSERT_TAIL} RETURNING rowid"
    ).fetchall()
    return [int(r) for (r,) in rows]


def forget(db: sqlite3.Connection, agent: str, key: str) -> list[int]:
    """Delete an agent's row by key; return the rowids deleted."""
    return _rowids(
        db,
        "DELETE FROM memories WHERE agent = ? AND key = ? RETURNING rowid",
        (agent, key),
    )


def supersede(db: sqlite3.Connection, agent: str, key: str, newer: str) -> list[int]:
    """Hide an agent's row by key; return the rowids hidden."""
    return _rowids(
        db,
        "UPDATE memories SET superseded_by = ? WHERE agent = ? AND key = ? "
        "RETURNING rowid",
        (newer, agent, key),
    )


def purge_session(db: sqlite3.Connection, agent: str, session: str) -> list[int]:
    """Delete an agent's rows of a session; return the rowids deleted."""
    return _rowids(
        db,
        "DELETE FROM memories WHERE agent = ? AND session = ? RETURNING rowid",
        (agent, session),
    )


def position(db: sqlite3.Connection) -> int:
    """Return the applied ledger position (0: none)."""
    row = db.execute(
        "SELECT position FROM memory_tracking WHERE name = ?", (TRACKING_NAME,)
    ).fetchone()
    return 0 if row is None else int(row[0])


def save_position(db: sqlite3.Connection, reached: int) -> None:
    """Record the applied ledger position (it never moves back)."""
    db.execute(
        "INSERT INTO memory_tracking (name, position) VALUES (?, ?) "
        "ON CONFLICT (name) DO UPDATE SET position = max(position, excluded.position)",
        (TRACKING_NAME, reached),
    )


def _rowids(db: sqlite3.Connection, sql: str, params: Sequence[Any]) -> list[int]:
    return [int(r) for (r,) in db.execute(sql, params).fetchall()]


def _values(entry: NewMemory, blob: bytes | None) -> tuple[Any, ...]:
    at = to_us(entry.at)
    return (
        entry.entry_id,
        entry.agent,
        entry.key,
        entry.content,
        entry.category,
        entry.session,
        entry.namespace,
        entry.importance,
        at,
        at,
        blob,
        token_count(entry.key, entry.content),
    )
