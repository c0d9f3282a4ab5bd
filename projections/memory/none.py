"""The ``none`` backend: memory is disabled for the agent.

It keeps nothing, and says so: every write answers :class:`Unsupported` (the
reference silently reported success), every read is empty, and ``apply`` only
advances the position it keeps in memory.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from datetime import datetime
from typing import Final

from turnledger.ledger.envelope import Recorded
from turnledger.projections.memory.protocol import (
    Capabilities,
    MemoryEntry,
    NewMemory,
    Unsupported,
)

DISABLED_REASON: Final = "memory is disabled for this agent (backend none)"
"""Why every write is refused."""

NONE_CAPABILITIES: Final = Capabilities(
    keyword=False,
    vectors=False,
    sessions=False,
    categories=False,
    time_filter=False,
    purge_session=False,
    persistent=False,
    stores=False,
)
"""It stores nothing, so it can do nothing else either."""


class NoneMemory:
    """A memory backend that keeps nothing."""

    name = "none"

    def __init__(self) -> None:
        self.capabilities = NONE_CAPABILITIES
        self._position = 0

    def store(self, entry: NewMemory) -> Unsupported:
        """Refuse: nothing is kept."""
        del entry
        return _refuse("store")

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
        """Return nothing."""
        del query, agents, limit, session, since, until
        return []

    def get(self, key: str, *, agents: Sequence[str]) -> MemoryEntry | None:
        """Return nothing."""
        del key, agents
        return None

    def list(
        self,
        *,
        agents: Sequence[str],
        category: str | None = None,
        session: str | None = None,
        limit: int = 1000,
    ) -> list[MemoryEntry]:
        """Return nothing."""
        del agents, category, session, limit
        return []

    def forget(self, key: str, *, agent: str) -> Unsupported:
        """Refuse: there is nothing to forget."""
        del key, agent
        return _refuse("forget")

    def supersede(self, key: str, *, agent: str, superseded_by: str) -> Unsupported:
        """Refuse: there is nothing to hide."""
        del key, agent, superseded_by
        return _refuse("supersede")

    def purge_session(self, session: str, *, agent: str) -> Unsupported:
        """Refuse: there is nothing to purge."""
        del session, agent
        return _refuse("purge_session")

    def count(self, *, agents: Sequence[str]) -> int:
        """Return 0."""
        del agents
        return 0

    def export(
        self,
        *,
        agents: Sequence[str],
        session: str | None = None,
        category: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> builtins.list[MemoryEntry]:
        """Return nothing."""
        del agents, session, category, since, until
        return []

    def health(self) -> bool:
        """Return True: doing nothing always works."""
        return True

    def applied_position(self) -> int:
        """Return the last position passed to :meth:`apply` (0: none)."""
        return self._position

    def apply(self, events: Sequence[Recorded], position: int) -> None:
        """Advance the position; the events have no effect."""
        del events
        self._position = max(self._position, position)

    def close(self) -> None:
        """Nothing to release."""


def _refuse(operation: str) -> Unsupported:
    return Unsupported(operation=operation, backend="none", reason=DISABLED_REASON)
