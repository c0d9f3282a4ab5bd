"""The memory service: one face over the wiring, catch-up, writes and reads.

:class:`MemoryService` builds its four parts and hands each one exactly the
others it uses; every method is answered by one part:
:class:`~turnledger.pipeline.memory.wiring.MemoryWiring` (where an agent's
memory lives, opening backends and the key store),
:class:`~turnledger.pipeline.memory.catchup.MemoryCatchUp` (a backend brought
up to date with the ledger), :class:`~turnledger.pipeline.memory.writes
.MemoryWrites` (stores and forgets, each an event first) and
:class:`~turnledger.pipeline.memory.reads.MemoryReads` (scoped reads, a turn's
recall).
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from turnledger.ledger.events import MemorySource
from turnledger.ledger.store import EventStore
from turnledger.pipeline.config import Config
from turnledger.pipeline.memory.catchup import MemoryCatchUp
from turnledger.pipeline.memory.reads import MemoryReads, TurnRecall
from turnledger.pipeline.memory.wiring import MemoryWiring
from turnledger.pipeline.memory.writes import MemoryWrites
from turnledger.policies.types import TurnOrigin
from turnledger.projections.memory.protocol import (
    MemoryBackend,
    MemoryEntry,
    Unsupported,
)
from turnledger.projections.memory.shred import KeyStore


class MemoryService:
    """Scoped long-term memory over the ledger.

    Args:
        store: The ledger.
        config: The configuration (agents, storage, embedding, recall).
        ledger_url: Where the ledger is: default files are put beside a
            SQLite ledger; for any other ledger in its own home,
            ``<data_dir>/memory/<scheme>-<12 hex digits of SHA-256 over the
            URL without user, password or connection tuning>``.
        shredding: Seal memory contents with per-entry keys (forget destroys
            them); ``None`` (the default) takes ``[memory] shredding``, so every
            writer (engine, autosave, tools, consolidation, import, CLI) honours it.
        keys_path: The key store file (default: ``<ledger stem>.keys.db`` beside
            the ledger or in its home; see
            :class:`~turnledger.pipeline.memory.wiring.MemoryWiring`); a
            rebuild elsewhere passes the live one to decrypt.
        only_agents: Apply only these agents' events (a rebuild of one agent);
            ``None``: every agent mapped to the backend.
    """

    def __init__(
        self,
        store: EventStore,
        config: Config,
        *,
        ledger_url: str,
        shredding: bool | None = None,
        keys_path: str | Path | None = None,
        only_agents: frozenset[str] | None = None,
    ) -> None:
        self.store = store
        self.config = config
        self._wiring = MemoryWiring(
            config,
            ledger_url=ledger_url,
            shredding=shredding,
            keys_path=keys_path,
            store=store,
        )
        self._catch_up = MemoryCatchUp(store, self._wiring, only_agents=only_agents)
        self._writes = MemoryWrites(store, config, self._wiring, self._catch_up)
        self._reads = MemoryReads(config, self._wiring, self._catch_up)

    # Wiring: where an agent's memory lives.

    @property
    def shredding(self) -> bool:
        """Whether contents are sealed with per-entry keys before they are stored."""
        return self._wiring.shredding

    @property
    def keys_path(self) -> Path:
        """The key store file (it may not exist yet)."""
        return self._wiring.keys_path

    @property
    def base(self) -> Path:
        """The folder default memory files go in (beside the ledger or its home)."""
        return self._wiring.base

    def keys(self) -> KeyStore:
        """The key store of sealed contents (opened on first use)."""
        return self._wiring.keys()

    def backend_ref(self, agent: str) -> str:
        """The ``kind.alias`` of the backend an agent's memory lives in."""
        return self._wiring.backend_ref(agent)

    def workspace(self, agent: str) -> Path:
        """The agent's workspace (its Markdown memory lives there)."""
        return self._wiring.workspace(agent)

    def sqlite_path(self, ref: str) -> Path:
        """The file of a ``sqlite.<alias>`` backend (configured or default)."""
        return self._wiring.sqlite_path(ref)

    def close(self) -> None:
        """Close every backend and the key store (a later use opens them again)."""
        self._wiring.close()

    # Catch-up: a backend brought up to date with the ledger.

    def backend(self, agent: str) -> MemoryBackend:
        """The agent's backend, brought up to date with the ledger.

        A Markdown agent's ``read_memory_from`` peers are caught up too.
        """
        return self._catch_up.backend(agent)

    # Writes: every write an event first.

    def store_entry(
        self,
        agent: str,
        key: str,
        content: str,
        *,
        category: str = "core",
        session: str | None = None,
        source: MemorySource = "cli",
        importance: float | None = None,
        namespace: str = "default",
        if_content: str | None = None,
    ) -> MemoryEntry | Unsupported:
        """Record a memory write and apply it; returns the stored entry.

        With ``if_content`` the write is a compare-and-set (see
        :meth:`MemoryWrites.store_entry
        <turnledger.pipeline.memory.writes.MemoryWrites.store_entry>`).

        Raises:
            MemoryAccessError: ``importance`` is outside [0, 1] or ``namespace``
                is empty.
            StaleEntryError: ``if_content`` no longer matches; nothing written.
        """
        return self._writes.store_entry(
            agent,
            key,
            content,
            category=category,
            session=session,
            source=source,
            importance=importance,
            namespace=namespace,
            if_content=if_content,
        )

    def forget(
        self, agent: str, key: str, *, source: MemorySource = "cli"
    ) -> bool | Unsupported:
        """Forget the agent's own entry (peers' entries are refused).

        Returns False when there is no such entry, Unsupported when the backend is
        append-only; with shredding the entry's keys are destroyed too.

        Raises:
            MemoryAccessError: The entry belongs to another agent.
        """
        return self._writes.forget(agent, key, source=source)

    def forget_matching(
        self,
        agent: str,
        *,
        subject: str | None = None,
        session: str | None = None,
        before: datetime | None = None,
    ) -> builtins.list[str] | Unsupported:
        """Forget every own entry matching all the filters given (erasure).

        Returns:
            The forgotten keys, oldest first; Unsupported from an append-only
            backend.
        """
        return self._writes.forget_matching(
            agent, subject=subject, session=session, before=before
        )

    # Reads: scoped to the agent and its peers.

    def recall(
        self,
        agent: str,
        query: str,
        *,
        session: str | None = None,
        limit: int = 5,
        agents: Sequence[str] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> builtins.list[MemoryEntry]:
        """Recall among the agent's allowlist (narrowed by ``agents``), best first.

        ``since``/``until`` keep rows created in that window (inclusive).
        """
        return self._reads.recall(
            agent,
            query,
            session=session,
            limit=limit,
            agents=agents,
            since=since,
            until=until,
        )

    def export(
        self,
        agent: str,
        *,
        session: str | None = None,
        category: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> builtins.list[MemoryEntry]:
        """Return the agent's own live entries matching the filters, oldest first."""
        return self._reads.export(
            agent, session=session, category=category, since=since, until=until
        )

    def get(self, agent: str, key: str) -> MemoryEntry | None:
        """Return the entry with that key (own first, then peers)."""
        return self._reads.get(agent, key)

    def list(
        self, agent: str, *, category: str | None = None, session: str | None = None
    ) -> builtins.list[MemoryEntry]:
        """Return the agent's (and peers') entries, newest first."""
        return self._reads.list(agent, category=category, session=session)

    def stats(self, agent: str) -> dict[str, Any]:
        """Counts of an agent's memory, by category."""
        return self._reads.stats(agent)

    def context_block(
        self,
        agent: str,
        query: str,
        *,
        session: str | None = None,
        origin: TurnOrigin = "interactive",
    ) -> str:
        """Return exactly the ``[Memory context]`` block a turn would get, or ""."""
        return self._reads.context_block(agent, query, session=session, origin=origin)

    def recall_for_turn(
        self,
        agent: str,
        query: str,
        *,
        session: str | None = None,
        origin: TurnOrigin = "interactive",
    ) -> TurnRecall:
        """Recall for a turn per the recall policy: the block and its references."""
        return self._reads.recall_for_turn(agent, query, session=session, origin=origin)
