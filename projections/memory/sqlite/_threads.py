"""Conversation threads in the SQLite memory store: each row's neighbours.

A thread is an agent's ``conversation`` rows of one session and namespace, in
rowid order (the order they were first stored); a row's neighbours are the
thread's rows just before and just after it among the caller's scope (a row
the caller may not see, or a superseded one, is stepped over, never lent to).
Each lookup is one seek of the ``memories_thread`` index. What lending does
with them is :mod:`policies.threads`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection
from typing import Final

from turnledger.policies.threads import THREAD_CATEGORY
from turnledger.projections.memory.sqlite._scope import Scope, scope_sql

_SAME_THREAD: Final = (
    "n.agent = m.agent AND n.session IS m.session AND n.namespace = m.namespace "
    f"AND n.category = '{THREAD_CATEGORY}'"
)


def thread_neighbours(
    db: sqlite3.Connection, rows: Collection[int], scope: Scope
) -> dict[int, tuple[int, ...]]:
    """Return each of ``rows``' neighbours in its thread, within ``scope``.

    Args:
        db: The memory database.
        rows: Rows of the scope (candidates); those of another category have
            no thread and are left out of the answer.
        scope: The rows the caller may see.
    """
    if not rows:
        return {}
    where, params = scope_sql(scope, "n")
    marks = ",".join("?" * len(rows))
    found = db.execute(
        f"SELECT m.rowid, (SELECT n.rowid FROM memories n WHERE {_SAME_THREAD} "
        f"AND n.rowid < m.rowid AND {where} ORDER BY n.rowid DESC LIMIT 1), "
        f"(SELECT n.rowid FROM memories n WHERE {_SAME_THREAD} "
        f"AND n.rowid > m.rowid AND {where} ORDER BY n.rowid LIMIT 1) "
        f"FROM memories m WHERE m.category = '{THREAD_CATEGORY}' "
        f"AND m.rowid IN ({marks})",
        [*params, *params, *rows],
    )
    return {
        int(row): tuple(int(n) for n in (before, after) if n is not None)
        for row, before, after in found
    }


def entry_ids(db: sqlite3.Connection, rows: Collection[int]) -> dict[int, str]:
    """Return the entry id of each of ``rows``."""
    if not rows:
        return {}
    marks = ",".join("?" * len(rows))
    found = db.execute(
        f"SELECT rowid, id FROM memories WHERE rowid IN ({marks})", [*rows]
    )
    return {int(row): str(entry_id) for row, entry_id in found}
