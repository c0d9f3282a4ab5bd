"""Long-term memory for the shell: writes as events, reads from the projection.

A write appends a ``memory.stored`` / ``memory.forgotten`` event to the agent's
memory stream, then brings the agent's backend up to date; reads are scoped to
the agent and its configured peers. Backends come from the configuration (one
install-wide instance per backend reference; Markdown per agent).

:class:`MemoryService` (:mod:`~turnledger.pipeline.memory.service`) is one face
over composed parts, each in its own module: :mod:`~turnledger.pipeline.memory
.wiring` (where files live, opening backends), :mod:`~turnledger.pipeline.memory
.catchup` (applying the ledger's memory events), :mod:`~turnledger.pipeline
.memory.writes` and :mod:`~turnledger.pipeline.memory.reads`; rebuilding a store
from the ledger is :mod:`~turnledger.pipeline.memory.rebuild`. This module is the
public face.
"""

from __future__ import annotations

from turnledger.pipeline.memory.reads import (
    RERANK_OVERFETCH,
    TurnRecall,
    query_shape,
    rerank,
)
from turnledger.pipeline.memory.rebuild import (
    InPlaceRefusedError,
    RebuildError,
    forgotten_count,
    rebuild_in_place,
    rebuild_into,
)
from turnledger.pipeline.memory.service import MemoryService
from turnledger.pipeline.memory.wiring import (
    MemoryAccessError,
    StaleEntryError,
    ledger_digest,
    memory_home,
)

__all__ = [
    "RERANK_OVERFETCH",
    "InPlaceRefusedError",
    "MemoryAccessError",
    "MemoryService",
    "RebuildError",
    "StaleEntryError",
    "TurnRecall",
    "forgotten_count",
    "ledger_digest",
    "memory_home",
    "query_shape",
    "rebuild_in_place",
    "rebuild_into",
    "rerank",
]
