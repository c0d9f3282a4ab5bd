"""Long-term memory for the shell: writes as events, reads from the projection.

A write appends a ``memory.stored`` / ``memory.forgotten`` event to the agent's
memory stream, then brings the agent's backend up to date; reads are scoped to
the agent and its configured peers. Backends come from the configuration (one
install-wide instance per backend reference; Markdown per agent).

The service is split by concern: :mod:`~turnledger.pipeline.memory.wiring`
(where files live, opening backends), :mod:`~turnledger.pipeline.memory.catchup`
(applying the ledger's memory events), :mod:`~turnledger.pipeline.memory.writes`
and :mod:`~turnledger.pipeline.memory.recall`; rebuilds are
:mod:`~turnledger.pipeline.cli.memory.rebuild`. This module is the public face.
"""

from __future__ import annotations

from turnledger.pipeline.memory.recall import (
    RERANK_OVERFETCH,
    MemoryReads,
    TurnRecall,
    query_shape,
    rerank,
)
from turnledger.pipeline.memory.wiring import (
    MemoryAccessError,
    StaleEntryError,
    ledger_digest,
    memory_home,
)
from turnledger.pipeline.memory.writes import MemoryWrites

__all__ = [
    "RERANK_OVERFETCH",
    "MemoryAccessError",
    "MemoryService",
    "StaleEntryError",
    "TurnRecall",
    "ledger_digest",
    "memory_home",
    "query_shape",
    "rerank",
]


class MemoryService(MemoryWrites, MemoryReads):
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
