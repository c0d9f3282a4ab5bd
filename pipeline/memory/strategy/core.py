"""The default strategy's core facts: gate, de-duplicate, supersede, store.

A consolidation answer's ``memory_update`` becomes a core fact here
(:class:`CoreFactRecorder`): it passes the policy gate, de-duplication against
the agent's own live core facts (reject, or merge into the survivor's key with
a compare-and-set, decided again when another writer changed the survivor) and
conflict handling; the new entry ``core_{id}`` is stored and each conflicting
fact gets a ``memory.superseded`` event (:func:`record_superseded`) naming
the new key. Conflict scores are the backend's recall scores or token Jaccard,
as :mod:`pipeline.memory.strategy` explains.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from turnledger.ledger.events import MemorySource, MemorySuperseded
from turnledger.ledger.ids import memory_stream_id
from turnledger.pipeline.appending import append_decided
from turnledger.pipeline.memory import MemoryService, StaleEntryError
from turnledger.pipeline.memory.strategy._store import store_entry
from turnledger.pipeline.memory.strategy.types import CoreOutcome, StrategySettings
from turnledger.policies.consolidation import (
    gate_memory_text,
)
from turnledger.policies.fact_dedup import (
    ExistingFact,
    conflict_decision,
    dedup_decision,
    token_jaccard,
)
from turnledger.policies.memory_entries import (
    CORE_CATEGORY,
    core_key,
    importance_for,
)
from turnledger.projections.memory.protocol import MemoryEntry

_CONFLICT_RECALL_LIMIT = 10
_STALE_REDECISIONS = 8


def record_superseded(
    memory: MemoryService,
    agent: str,
    key: str,
    *,
    superseded_by: str,
    source: MemorySource = "consolidation",
    reason: str = "",
) -> None:
    """Append a ``memory.superseded`` event to the agent's memory stream.

    The agent's backend is brought up to date afterwards, so the superseded
    entry is hidden from the next read. Written through
    :func:`~turnledger.pipeline.appending.append_decided`: before every attempt
    the entry must still be live (another writer may have forgotten or
    superseded it meanwhile); when it is not, nothing is written.

    Args:
        memory: The memory service (its ledger is written).
        agent: The agent owning the entry.
        key: The superseded entry's key.
        superseded_by: The key of the entry that replaces it.
        source: What wrote it.
        reason: Why, in a sentence.
    """
    event = MemorySuperseded(
        agent=agent, key=key, superseded_by=superseded_by, source=source, reason=reason
    )

    def decide(_head: int) -> list[MemorySuperseded] | None:
        live = memory.backend(agent).get(key, agents=[agent])
        return None if live is None else [event]

    append_decided(memory.store, memory_stream_id(agent), decide)
    memory.backend(agent)


class CoreResult(msgspec.Struct, frozen=True, kw_only=True):
    """What happened to one core update (see :class:`CoreFactRecorder`)."""

    core: CoreOutcome = "none"
    key: str | None = None
    duplicate_of: str | None = None
    superseded: tuple[str, ...] = ()
    detail: str = ""


def _fact(entry: MemoryEntry, score: float | None = None) -> ExistingFact:
    return ExistingFact(
        key=entry.key,
        content=entry.content,
        category=entry.category,
        score=score,
    )


class CoreFactRecorder:
    """Records a consolidation's durable fact into the agent's core memory.

    Args:
        memory: The memory service every write goes through.
        settings: The dedup and conflict settings (already validated).
        new_id: Mints entry ids for keys.
    """

    def __init__(
        self,
        memory: MemoryService,
        settings: StrategySettings,
        new_id: Callable[[], str],
    ) -> None:
        self.memory = memory
        self.settings = settings
        self._new_id = new_id

    def _own_core(self, agent: str) -> dict[str, MemoryEntry]:
        backend = self.memory.backend(agent)
        rows = backend.export(agents=[agent], category=CORE_CATEGORY)
        return {row.key: row for row in rows}

    def record(self, agent: str, update: str | None) -> CoreResult:
        """Record the core update; decide again when a merge's survivor changed.

        Another process may rewrite the survivor between the read and the write:
        the merge is a compare-and-set, and a stale one is decided again on the
        new state (up to :data:`_STALE_REDECISIONS` times, then the error).
        """
        for _ in range(_STALE_REDECISIONS - 1):
            try:
                return self._record_core(agent, update)
            except StaleEntryError:
                continue
        return self._record_core(agent, update)

    def _record_core(self, agent: str, update: str | None) -> CoreResult:
        if update is None:
            return CoreResult()
        gate = gate_memory_text(update)
        if not gate.allowed:
            return CoreResult(
                core="gated", detail=f"memory update refused: {gate.reason}"
            )
        existing = self._own_core(agent)
        dedup = dedup_decision(
            gate.content,
            [_fact(entry) for entry in existing.values()],
            self.settings.dedup_threshold,
            self.settings.dedup_mode,
        )
        if dedup.action == "reject":
            return CoreResult(
                core="duplicate",
                duplicate_of=dedup.duplicate_of,
                detail=f"memory update duplicates {dedup.duplicate_of}",
            )
        if dedup.action == "merge" and dedup.duplicate_of and dedup.merged_content:
            return self._merge(
                agent, existing[dedup.duplicate_of], dedup.merged_content
            )
        return self._insert(agent, gate.content, existing)

    def _merge(self, agent: str, survivor: MemoryEntry, content: str) -> CoreResult:
        importance = survivor.importance
        if importance is None:
            importance = importance_for(content, CORE_CATEGORY)
        store_entry(
            self.memory,
            agent,
            survivor.key,
            content,
            category=CORE_CATEGORY,
            importance=importance,
            session=survivor.session,
            if_content=survivor.content,  # a compare-and-set: no lost merge
        )
        return CoreResult(core="merged", key=survivor.key, duplicate_of=survivor.key)

    def _insert(
        self, agent: str, content: str, existing: dict[str, MemoryEntry]
    ) -> CoreResult:
        key = core_key(self._new_id())
        scored = self._scored(agent, content, existing)
        losers = conflict_decision(
            key, content, scored, self.settings.conflict_threshold
        )
        importance = importance_for(content, CORE_CATEGORY)
        if not store_entry(
            self.memory,
            agent,
            key,
            content,
            category=CORE_CATEGORY,
            importance=importance,
        ):
            return CoreResult(detail="the backend stores nothing")
        for loser in losers:
            record_superseded(
                self.memory,
                agent,
                loser,
                superseded_by=key,
                reason=f"conflicts with the newer fact {key}",
            )
        return CoreResult(core="stored", key=key, superseded=losers)

    def _uses_recall_scores(self, agent: str) -> bool:
        mode = self.settings.conflict_scores
        if mode != "auto":
            return mode == "recall"
        embedded = self.memory.config.embedding.provider != "none"
        return embedded and self.memory.backend(agent).capabilities.vectors

    def _scored(
        self, agent: str, content: str, existing: dict[str, MemoryEntry]
    ) -> list[ExistingFact]:
        if not self._uses_recall_scores(agent):
            return [
                _fact(entry, token_jaccard(content, entry.content))
                for entry in existing.values()
            ]
        found = self.memory.recall(
            agent, content, limit=_CONFLICT_RECALL_LIMIT, agents=[agent]
        )
        return [_fact(entry, entry.score) for entry in found if entry.key in existing]
