"""The default memory strategy's one write: store an entry, say if it was kept.

Consolidation (:mod:`pipeline.memory.strategy`) and governance
(:mod:`pipeline.memory.strategy.governance`) both store entries through
:meth:`~pipeline.memory.MemoryService.store_entry`; a backend that
stores nothing answers :class:`~projections.memory.protocol.Unsupported`,
which this helper turns into ``False``.
"""

from __future__ import annotations

from turnledger.ledger.events import MemorySource
from turnledger.pipeline.memory import MemoryService
from turnledger.projections.memory.protocol import Unsupported


def store_entry(
    memory: MemoryService,
    agent: str,
    key: str,
    content: str,
    *,
    category: str,
    importance: float | None,
    session: str | None = None,
    source: MemorySource = "consolidation",
    if_content: str | None = None,
) -> bool:
    """Store one entry through the memory service; ``False`` if unsupported."""
    written = memory.store_entry(
        agent,
        key,
        content,
        category=category,
        session=session,
        source=source,
        importance=importance,
        if_content=if_content,
    )
    return not isinstance(written, Unsupported)
