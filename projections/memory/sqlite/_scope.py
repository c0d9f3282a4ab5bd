"""Read scopes as SQL: the agent, session and time predicates every query carries.

Every read path (keyword, recent, LIKE fallback, list, export) puts these
predicates INSIDE its query, so rows outside the scope never take a place in a
ranking window or a limit. Superseded rows are never in scope.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final, NamedTuple

from turnledger.projections.memory.protocol import DURABLE_GLOBAL_CATEGORIES
from turnledger.projections.memory.sqlite._schema import COLUMNS, to_us

_DURABLE: Final = ", ".join(f"'{c}'" for c in sorted(DURABLE_GLOBAL_CATEGORIES))
_MAX_UNION_AGENTS: Final = 100  # beyond this, one IN query (SQLite caps UNION terms)


class Scope(NamedTuple):
    """Which rows a read may see.

    Attributes:
        agents: The agents whose rows are visible (never empty here).
        session: ``None``: every session; otherwise that session's rows, plus
            session-less core/daily rows unless ``strict``.
        since_us: Inclusive lower bound on creation time (µs), if any.
        until_us: Inclusive upper bound on creation time (µs), if any.
        strict: Whether the session filter excludes session-less rows.
        category: Only rows of this category, if given.
    """

    agents: tuple[str, ...]
    session: str | None = None
    since_us: int | None = None
    until_us: int | None = None
    strict: bool = False
    category: str | None = None


def make_scope(
    agents: Sequence[str],
    *,
    session: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    strict: bool = False,
    category: str | None = None,
) -> Scope:
    """Build a scope from the protocol's arguments (agents de-duplicated)."""
    return Scope(
        agents=tuple(dict.fromkeys(agents)),
        session=session,
        since_us=None if since is None else to_us(since),
        until_us=None if until is None else to_us(until),
        strict=strict,
        category=category,
    )


def scope_sql(scope: Scope, alias: str = "m") -> tuple[str, list[Any]]:
    """Return the WHERE clause (and its parameters) selecting the scope's rows."""
    marks = ",".join("?" * len(scope.agents))
    clauses = [f"{alias}.agent IN ({marks})", f"{alias}.superseded_by IS NULL"]
    params: list[Any] = list(scope.agents)
    if scope.session is not None:
        if scope.strict:
            clauses.append(f"{alias}.session = ?")
        else:
            clauses.append(
                f"({alias}.session = ? OR ({alias}.session IS NULL"
                f" AND {alias}.category IN ({_DURABLE})))"
            )
        params.append(scope.session)
    _common(scope, alias, clauses, params)
    return " AND ".join(clauses), params


def _common(scope: Scope, alias: str, clauses: list[str], params: list[Any]) -> None:
    if scope.category is not None:
        clauses.append(f"{alias}.category = ?")
        params.append(scope.category)
    if scope.since_us is not None:
        # updated >= created >= since: the redundant bound lets an index on
        # updated_us stop early.
        clauses.append(f"{alias}.created_us >= ? AND {alias}.updated_us >= ?")
        params += [scope.since_us, scope.since_us]
    if scope.until_us is not None:
        clauses.append(f"{alias}.created_us <= ?")
        params.append(scope.until_us)


_BY_UPDATE: Final = ("m.updated_us DESC, m.id", "updated_us DESC, id")
_BY_ROWID: Final = ("m.rowid DESC", "rowid DESC")


def newest_sql(
    scope: Scope, limit: int, columns: str = COLUMNS, *, by_rowid: bool = False
) -> tuple[str, list[Any]]:
    """Return a query for the scope's newest rows (``updated_us`` desc, id asc).

    One sub-query per agent (and session part) walks an index newest first and
    stops at ``limit``, so the cost does not grow with the agents' row counts.

    Args:
        scope: The rows to consider.
        limit: How many rows at most.
        columns: The columns to select (must include ``updated_us`` and ``id``;
            with ``by_rowid``, ``rowid``).
        by_rowid: Newest by insertion (``rowid`` desc: the ``memories_agent``
            index) instead of by update time.

    Returns:
        The SQL and its parameters.
    """
    inner, outer = _BY_ROWID if by_rowid else _BY_UPDATE
    if len(scope.agents) > _MAX_UNION_AGENTS:
        where, params = scope_sql(scope)
        sql = (
            f"SELECT {columns} FROM memories AS m WHERE {where} "
            f"ORDER BY {inner} LIMIT ?"
        )
        return sql, [*params, limit]
    parts: list[str] = []
    params = []
    for agent in scope.agents:
        for clause, extra in _session_parts(scope):
            clauses = ["m.agent = ?", "m.superseded_by IS NULL", *clause]
            part_params: list[Any] = [agent, *extra]
            _common(scope, "m", clauses, part_params)
            parts.append(
                f"SELECT * FROM (SELECT {columns} FROM memories AS m "
                f"WHERE {' AND '.join(clauses)} "
                f"ORDER BY {inner} LIMIT ?)"
            )
            params += [*part_params, limit]
    sql = " UNION ALL ".join(parts) + f" ORDER BY {outer} LIMIT ?"
    return sql, [*params, limit]


def _session_parts(scope: Scope) -> list[tuple[list[str], list[Any]]]:
    if scope.session is None:
        return [([], [])]
    own: tuple[list[str], list[Any]] = (["m.session = ?"], [scope.session])
    if scope.strict:
        return [own]
    durable: tuple[list[str], list[Any]] = (
        [f"m.session IS NULL AND m.category IN ({_DURABLE})"],
        [],
    )
    return [own, durable]
