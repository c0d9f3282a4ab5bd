"""The backend-agnostic long-term memory contract.

Long-term memory is a projection of the memory events in the ledger
(``memory.stored``, ``memory.forgotten``, ``memory.superseded``): a backend is the
view those events are applied to. Every read names the agents it may see and every
backend filters by them INSIDE its query, before ranking and limiting, so a crowd of
disallowed matches can never hide an allowed one. Session-less ``core`` and
``daily`` facts are visible from every session; another session's rows never are.

What a backend cannot do it says: capabilities are declared, and an unsupported
operation returns :class:`Unsupported` (a value, never a silent no-op).
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from datetime import datetime
from typing import Final, Protocol

import msgspec

from turnledger.ledger.envelope import Recorded

DURABLE_GLOBAL_CATEGORIES: Final = frozenset({"core", "daily"})
"""Categories whose session-less rows are visible from every session."""

RECENT_QUERIES: Final = frozenset({"", "*"})
"""Queries (after stripping) that mean "the most recent entries", unscored."""


class MemoryEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One long-term memory row as a backend returns it.

    Attributes:
        id: The entry id (stable across rebuilds: it comes from the event).
        key: The caller's key (unique per agent).
        content: The text (``[forgotten]`` when its key was shredded).
        category: ``core``, ``daily``, ``conversation`` or a custom name.
        agent: The agent that owns the row.
        session: The sanitized session scope; ``None`` is global.
        namespace: An isolation tag inside an agent.
        importance: 0..1, when known.
        created_at: When the key was first stored (UTC).
        updated_at: When it was last stored (UTC).
        score: Relevance on [0, 1]; ``None`` when the row was not scored.
    """

    id: str
    key: str
    content: str
    category: str
    agent: str
    session: str | None = None
    namespace: str = "default"
    importance: float | None = None
    created_at: datetime
    updated_at: datetime
    score: float | None = None


class NewMemory(msgspec.Struct, frozen=True, kw_only=True):
    """A write, as a ``memory.stored`` event carries it.

    ``at`` is the event's recorded time, so a rebuild reproduces the same
    timestamps; ``entry_id`` is the id the event assigned.
    """

    agent: str
    key: str
    content: str
    category: str = "core"
    session: str | None = None
    namespace: str = "default"
    importance: float | None = None
    entry_id: str
    at: datetime


class Capabilities(msgspec.Struct, frozen=True, kw_only=True):
    """What a backend can do.

    Attributes:
        append_only: Writes are never removed (forget answers Unsupported).
        keyword: Keyword (full-text) recall.
        vectors: Vector (embedding) recall.
        sessions: Rows keep their session scope.
        categories: Rows keep their category.
        time_filter: ``since``/``until`` are applied.
        purge_session: A session's rows can be purged.
        persistent: Data outlives the process.
        stores: Writes are kept at all (``none`` keeps nothing).
        redacts: An append-only store whose ``forget`` rewrites the key's
            records as forgotten (Markdown), so nothing of it stays readable.
    """

    append_only: bool = False
    keyword: bool = True
    vectors: bool = False
    sessions: bool = True
    categories: bool = True
    time_filter: bool = True
    purge_session: bool = True
    persistent: bool = True
    stores: bool = True
    redacts: bool = False


class Unsupported(msgspec.Struct, frozen=True, kw_only=True):
    """An explicit answer that a backend does not do an operation.

    Attributes:
        operation: What was asked (``forget``, ``purge_session``, ``store``...).
        backend: The backend's name.
        reason: Why, in a sentence (e.g. ``markdown memory is append-only``).
    """

    operation: str
    backend: str
    reason: str


class MemoryBackend(Protocol):
    """A long-term memory store: the view the memory events are applied to."""

    @property
    def name(self) -> str:
        """The backend kind (``sqlite``, ``markdown``...)."""
        ...

    @property
    def capabilities(self) -> Capabilities:
        """What the backend can do."""
        ...

    def store(self, entry: NewMemory) -> MemoryEntry | Unsupported:
        """Upsert the entry per (agent, key); the id and creation time are kept."""
        ...

    def recall(
        self,
        query: str,
        *,
        agents: Sequence[str],
        limit: int = 5,
        session: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[MemoryEntry]:
        """Return the best matches among ``agents``' rows, best first.

        A recent query (empty or ``*``) returns the newest rows, unscored. With a
        session, rows of other sessions are excluded; session-less core/daily rows
        are kept. Filters apply inside the query, before ranking and limiting.
        """
        ...

    def get(self, key: str, *, agents: Sequence[str]) -> MemoryEntry | None:
        """Return the row with that key, the first agent in ``agents`` winning."""
        ...

    def list(
        self,
        *,
        agents: Sequence[str],
        category: str | None = None,
        session: str | None = None,
        limit: int = 1000,
    ) -> list[MemoryEntry]:
        """Return rows, newest first (strict session filter)."""
        ...

    def forget(self, key: str, *, agent: str) -> bool | Unsupported:
        """Delete ``agent``'s row with that key; False when there was none."""
        ...

    def supersede(
        self, key: str, *, agent: str, superseded_by: str
    ) -> bool | Unsupported:
        """Hide ``agent``'s row with that key behind a newer one."""
        ...

    def purge_session(self, session: str, *, agent: str) -> int | Unsupported:
        """Delete ``agent``'s rows of a session; return how many."""
        ...

    def count(self, *, agents: Sequence[str]) -> int:
        """Return how many live rows ``agents`` have."""
        ...

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
        ...

    def health(self) -> bool:
        """Return whether the backend can serve requests."""
        ...

    def applied_position(self) -> int:
        """Return the last ledger position applied to this store (0: none)."""
        ...

    def apply(self, events: Sequence[Recorded], position: int) -> None:
        """Apply memory events and record ``position``, exactly once.

        Backends with transactions write the effects and the position together;
        the others apply idempotently and skip events at or below their position.
        """
        ...

    def close(self) -> None:
        """Release resources."""
        ...


def is_recent_query(query: str) -> bool:
    """Return whether a query asks for recent entries rather than matches."""
    return query.strip() in RECENT_QUERIES


def visible_in_session(
    row_session: str | None, category: str, session: str | None
) -> bool:
    """Return whether a row may be recalled from ``session``.

    No session: every row. A session: its own rows, plus session-less durable
    facts (core/daily), on every recall path.
    """
    if session is None or row_session == session:
        return True
    return row_session is None and category in DURABLE_GLOBAL_CATEGORIES
