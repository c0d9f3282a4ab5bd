"""The SQLite memory backend's reads by key and filter: get, list, count, export.

:class:`SQLiteReads` is the part of
:class:`~turnledger.projections.memory.sqlite.SQLiteMemory` that reads live rows
without ranking them: one key for the first agent that has it, the newest rows
of a scope (``list``, and the unscored recall of an empty query), a count, and an
oldest-first export. Every query applies the agent allowlist, session and time
window in SQL, as recall does; its errors leave typed like the store's own.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from datetime import datetime
from typing import Final

from turnledger.projections.memory.errors import typed_memory_errors
from turnledger.projections.memory.protocol import MemoryEntry
from turnledger.projections.memory.sqlite._schema import (
    COLUMNS,
    Database,
    entry_from_row,
)
from turnledger.projections.memory.sqlite._scope import (
    Scope,
    make_scope,
    newest_sql,
    scope_sql,
)

LIST_CEILING: Final = 10_000
"""The most rows one ``list`` returns (a limit of 0 means this)."""


@typed_memory_errors("sqlite")
class SQLiteReads:
    """Reads of live rows by key and filter (mixed into ``SQLiteMemory``)."""

    _db: Database

    def get(self, key: str, *, agents: Sequence[str]) -> MemoryEntry | None:
        """Return the live row with that key, the first agent in ``agents`` winning."""
        order = list(dict.fromkeys(agents))
        if not order:
            return None
        marks = ",".join("?" * len(order))
        with self._db.read() as conn:
            rows = conn.execute(
                f"SELECT {COLUMNS} FROM memories WHERE key = ? "
                f"AND agent IN ({marks}) AND superseded_by IS NULL",
                [key, *order],
            ).fetchall()
        if not rows:
            return None
        return entry_from_row(min(rows, key=lambda row: order.index(row[2])))

    def list(
        self,
        *,
        agents: Sequence[str],
        category: str | None = None,
        session: str | None = None,
        limit: int = 1000,
    ) -> list[MemoryEntry]:
        """Return live rows, newest first (strict session filter).

        ``limit`` 0 means :data:`LIST_CEILING`, and no limit exceeds it.

        Raises:
            ValueError: ``limit`` is negative.
        """
        if limit < 0:
            msg = f"Expected a list limit >= 0, found {limit}"
            raise ValueError(msg)
        scope = make_scope(agents, session=session, strict=True, category=category)
        if not scope.agents:
            return []
        return self._newest(scope, min(limit or LIST_CEILING, LIST_CEILING))

    def count(self, *, agents: Sequence[str]) -> int:
        """Return how many live rows ``agents`` have."""
        scope = make_scope(agents)
        if not scope.agents:
            return 0
        where, params = scope_sql(scope)
        with self._db.read() as conn:
            row = conn.execute(
                f"SELECT count(*) FROM memories AS m WHERE {where}", params
            ).fetchone()
        return int(row[0])

    def export(
        self,
        *,
        agents: Sequence[str],
        session: str | None = None,
        category: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> builtins.list[MemoryEntry]:
        """Return every live row matching the filters, oldest first."""
        scope = make_scope(
            agents,
            session=session,
            since=since,
            until=until,
            strict=True,
            category=category,
        )
        if not scope.agents:
            return []
        where, params = scope_sql(scope)
        with self._db.read() as conn:
            rows = conn.execute(
                f"SELECT {COLUMNS} FROM memories AS m WHERE {where} "
                "ORDER BY created_us, id",
                params,
            ).fetchall()
        return [entry_from_row(row) for row in rows]

    def _newest(self, scope: Scope, limit: int) -> builtins.list[MemoryEntry]:
        sql, params = newest_sql(scope, limit)
        with self._db.read() as conn:
            rows = conn.execute(sql, params).fetchall()
        return [entry_from_row(row) for row in rows]
