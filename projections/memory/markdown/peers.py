"""Markdown memory across agents: one's own files plus its peers', read-only (§3).

ZeroClaw's Markdown branch concatenated own-then-peer recall results and cut at
the limit without re-sorting, so a weak own row beat a strong peer row [quirk].
Here every selected store is recalled with the caller's filters and the results
are merged by score with :func:`~policies.scoping.merge_agent_recall`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TypeAlias

import msgspec

from turnledger.ledger.envelope import Recorded
from turnledger.policies.recall_scope import RecallCandidate, bound_recall_limit
from turnledger.policies.scoping import AgentScope, merge_agent_recall
from turnledger.projections.memory.markdown import (
    AppendOnlyRefusals,
    MarkdownMemory,
    newest_first,
)
from turnledger.projections.memory.protocol import (
    MemoryEntry,
    NewMemory,
    Unsupported,
    is_recent_query,
)

_Entries: TypeAlias = list[MemoryEntry]


def _candidate(entry: MemoryEntry) -> RecallCandidate:
    return RecallCandidate(
        id=entry.id,
        key=entry.key,
        content=entry.content,
        category=entry.category,
        score=entry.score,
        session=entry.session,
        agent=entry.agent,
    )


class MarkdownPeers(AppendOnlyRefusals):
    """An agent's own Markdown memory plus its peers' (read-only), one handle.

    Writes and the ledger go to the own store. Reads cover the stores whose
    agent is in ``agents``; recall merges them by score (peer keys prefixed
    ``"[alias] "``), fixing the reference's own-then-peers concatenation.

    Args:
        own: The bound agent's store.
        peers: The peers' stores by alias (``read_memory_from``).

    Raises:
        ValueError: A peer is the own agent or is keyed by another alias.
    """

    def __init__(
        self, own: MarkdownMemory, peers: Mapping[str, MarkdownMemory]
    ) -> None:
        for alias, peer in peers.items():
            if alias == own.agent or peer.agent != alias:
                msg = (
                    f"Expected peers keyed by their own alias and other than"
                    f" {own.agent!r}, found {alias!r} -> {peer.agent!r}"
                )
                raise ValueError(msg)
        self.own = own
        self._stores: dict[str, MarkdownMemory] = {own.agent: own, **peers}
        self._scope = AgentScope(
            agent=own.agent, backend="markdown.default", allowed=tuple(self._stores)
        )

    def _selected(self, agents: Iterable[str]) -> list[MarkdownMemory]:
        wanted = frozenset(agents)
        return [store for alias, store in self._stores.items() if alias in wanted]

    def store(self, entry: NewMemory) -> MemoryEntry | Unsupported:
        """Write to the own store (a peer's write is refused there)."""
        return self.own.store(entry)

    def forget(self, key: str, *, agent: str) -> bool | Unsupported:
        """Redact in the own store (a peer's entry is never touched)."""
        return self.own.forget(key, agent=agent)

    def recall(
        self,
        query: str,
        *,
        agents: Sequence[str],
        limit: int = 5,
        session: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> _Entries:
        """Recall from each selected store, then merge by score.

        A recent query merges newest first. Peers' keys are prefixed
        ``"[alias] "``, as :func:`~policies.scoping.merge_agent_recall` does.
        """
        limit = bound_recall_limit(limit)
        per_agent = [
            (
                store.agent,
                store.recall(
                    query,
                    agents=[store.agent],
                    limit=limit,
                    session=session,
                    since=since,
                    until=until,
                ),
            )
            for store in self._selected(agents)
        ]
        if is_recent_query(query):
            newest = sorted(
                (e for _, found in per_agent for e in found), key=newest_first
            )
            return [self._prefixed(entry) for entry in newest[:limit]]
        by_id = {(e.agent, e.id): e for _, found in per_agent for e in found}
        merged = merge_agent_recall(
            self._scope,
            [(agent, [_candidate(e) for e in found]) for agent, found in per_agent],
            limit=limit,
        )
        return [
            msgspec.structs.replace(
                by_id[(c.agent or "", c.id)], key=c.key, score=c.score
            )
            for c in merged
        ]

    def _prefixed(self, entry: MemoryEntry) -> MemoryEntry:
        if entry.agent == self.own.agent:
            return entry
        return msgspec.structs.replace(entry, key=f"[{entry.agent}] {entry.key}")

    def get(self, key: str, *, agents: Sequence[str]) -> MemoryEntry | None:
        """Return the key's row from the first agent in ``agents`` that has it."""
        for agent in agents:
            store = self._stores.get(agent)
            if store is not None and (found := store.get(key, agents=[agent])):
                return found
        return None

    def list(
        self,
        *,
        agents: Sequence[str],
        category: str | None = None,
        session: str | None = None,
        limit: int = 1000,
    ) -> _Entries:
        """Return the selected stores' rows, newest first."""
        rows = [
            row
            for store in self._selected(agents)
            for row in store.list(
                agents=[store.agent], category=category, session=session, limit=limit
            )
        ]
        return sorted(rows, key=newest_first)[:limit]

    def count(self, *, agents: Sequence[str]) -> int:
        """Return how many keys the selected stores hold."""
        return sum(
            store.count(agents=[store.agent]) for store in self._selected(agents)
        )

    def export(
        self,
        *,
        agents: Sequence[str],
        session: str | None = None,
        category: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> _Entries:
        """Return the selected stores' rows matching the filters, oldest first."""
        rows = [
            row
            for store in self._selected(agents)
            for row in store.export(
                agents=[store.agent],
                session=session,
                category=category,
                since=since,
                until=until,
            )
        ]
        return sorted(rows, key=lambda row: (row.created_at, row.agent, row.key))

    def health(self) -> bool:
        """Return whether every store's workspace exists."""
        return all(store.health() for store in self._stores.values())

    def applied_position(self) -> int:
        """Return the own store's position."""
        return self.own.applied_position()

    def apply(self, events: Sequence[Recorded], position: int) -> None:
        """Apply the ledger to the own store (peers apply their own)."""
        self.own.apply(events, position)

    def close(self) -> None:
        """Close every store."""
        for store in self._stores.values():
            store.close()
