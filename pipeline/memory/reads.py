"""Memory reads: scoped recall, get, list, export, stats and a turn's recall.

Reads are scoped to the agent and its configured peers; a turn's recall follows
the recall policy (origin, sessions), the ``[recall]`` rerank stages and the
selector's floor and budgets.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final

import msgspec

from turnledger.ledger.events import RecallRef
from turnledger.pipeline.config import Config
from turnledger.pipeline.config.sections import recall_tuning
from turnledger.pipeline.memory.catchup import MemoryCatchUp
from turnledger.pipeline.memory.wiring import MemoryWiring
from turnledger.policies.paths import sanitize_session_key
from turnledger.policies.recall import make_recall_selector
from turnledger.policies.recall_scope import (
    RecallCandidate,
    bound_recall_limit,
    resolve_inject_policy,
)
from turnledger.policies.recall_tuning import RecallTuning, make_recall_tuner
from turnledger.policies.relevance import content_terms
from turnledger.policies.retention import MemoryItem
from turnledger.policies.scoping import recall_agents
from turnledger.policies.types import TurnOrigin
from turnledger.projections.memory.protocol import MemoryEntry

RERANK_OVERFETCH: Final = 3
"""How many more candidates a recall asks for when a rerank stage is on."""


def rerank(
    found: Sequence[MemoryEntry], tuning: RecallTuning, now: datetime
) -> list[MemoryEntry]:
    """Apply the ``[recall]`` decay / importance / MMR stages to recalled entries.

    Returns:
        The entries in the tuned order, each with its tuned score.
    """
    tune = make_recall_tuner(tuning)
    by_key = {e.key: e for e in found}
    items = [
        MemoryItem(
            key=e.key,
            content=e.content,
            category=e.category,
            created_at=e.created_at,
            updated_at=e.updated_at,
            score=e.score,
            importance=e.importance,
        )
        for e in by_key.values()
    ]
    return [
        msgspec.structs.replace(by_key[item.key], score=item.score)
        for item in tune(items, now)
    ]


def query_shape(query: str) -> str:
    """Describe a recall query without its words (the observer shows this).

    Returns:
        e.g. ``"42 chars, 3 content terms"``: never the user's text.
    """
    return f"{len(query)} chars, {len(content_terms(query))} content terms"


class TurnRecall(msgspec.Struct, frozen=True, kw_only=True):
    """What recall gave a turn: the block to inject and references to record."""

    block: str
    refs: tuple[RecallRef, ...]
    backend: str
    query_summary: str


class MemoryReads:
    """Recall and the other reads, scoped to the agent and its peers.

    Args:
        config: The configuration (each agent's scope, ``[recall]``).
        wiring: Which backend each agent's memory lives in.
        catch_up: The agents' backends caught up with the ledger.
    """

    def __init__(
        self, config: Config, wiring: MemoryWiring, catch_up: MemoryCatchUp
    ) -> None:
        self._config = config
        self._wiring = wiring
        self._catch_up = catch_up

    def _agents(self, agent: str, requested: Sequence[str] | None) -> list[str]:
        return list(recall_agents(self._config.scope(agent), requested))

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
    ) -> list[MemoryEntry]:
        """Recall among the agent's allowlist (narrowed by ``agents``), best first.

        ``since``/``until`` keep rows created in that window (inclusive).
        """
        allowed = self._agents(agent, agents)
        if not allowed:
            return []
        scoped_session = sanitize_session_key(session) if session else None
        return self._catch_up.backend(agent).recall(
            query,
            agents=allowed,
            limit=limit,
            session=scoped_session,
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
    ) -> list[MemoryEntry]:
        """Return the agent's own live entries matching the filters, oldest first."""
        scoped = sanitize_session_key(session) if session else None
        return self._catch_up.backend(agent).export(
            agents=[agent], session=scoped, category=category, since=since, until=until
        )

    def get(self, agent: str, key: str) -> MemoryEntry | None:
        """Return the entry with that key (own first, then peers)."""
        return self._catch_up.backend(agent).get(key, agents=self._agents(agent, None))

    def list(
        self, agent: str, *, category: str | None = None, session: str | None = None
    ) -> list[MemoryEntry]:
        """Return the agent's (and peers') entries, newest first."""
        return self._catch_up.backend(agent).list(
            agents=self._agents(agent, None), category=category, session=session
        )

    def stats(self, agent: str) -> dict[str, Any]:
        """Counts of an agent's memory, by category."""
        entries = self.list(agent)
        by_category: dict[str, int] = {}
        for entry in entries:
            by_category[entry.category] = by_category.get(entry.category, 0) + 1
        backend = self._catch_up.backend(agent)
        return {
            "agent": agent,
            "backend": self._wiring.backend_ref(agent),
            "entries": backend.count(agents=[agent]),
            "visible": len(entries),
            "by_category": dict(sorted(by_category.items())),
            "applied_position": backend.applied_position(),
        }

    def context_block(
        self,
        agent: str,
        query: str,
        *,
        session: str | None = None,
        origin: TurnOrigin = "interactive",
    ) -> str:
        """Return exactly the ``[Memory context]`` block a turn would get, or ""."""
        return self.recall_for_turn(agent, query, session=session, origin=origin).block

    def recall_for_turn(
        self,
        agent: str,
        query: str,
        *,
        session: str | None = None,
        origin: TurnOrigin = "interactive",
    ) -> TurnRecall:
        """Recall for a turn per the recall policy: the block and its references."""
        policy = resolve_inject_policy(origin, sessions=[session] if session else [])
        ref = self._wiring.backend_ref(agent)
        summary = query_shape(query)
        if not policy.inject:
            return TurnRecall(block="", refs=(), backend=ref, query_summary=summary)
        settings = self._config.recall
        tuning = recall_tuning(settings)
        reranks = tuning.decay or tuning.importance_blend or tuning.mmr
        limit = bound_recall_limit(settings.limit)
        found = self.recall(
            agent,
            query,
            session=policy.sessions[0] if policy.sessions else None,
            limit=bound_recall_limit(
                settings.limit, candidate_multiplier=RERANK_OVERFETCH if reranks else 1
            ),
        )
        if reranks:
            found = rerank(found, tuning, datetime.now(UTC))[:limit]
        select = make_recall_selector(
            min_relevance_score=settings.min_relevance,
            max_entries=settings.max_entries,
            entry_max_chars=settings.entry_max_chars,
            max_total_chars=settings.max_total_chars,
        )
        candidates = [
            RecallCandidate(
                id=e.id,
                key=e.key,
                content=e.content,
                category=e.category,
                score=e.score,
                session=e.session,
                agent=e.agent,
            )
            for e in found
        ]
        selection = select(candidates, policy)
        by_id = {e.id: e for e in found}
        refs = tuple(
            RecallRef(
                key=r.key,
                entry_id=r.id,
                score=by_id[r.id].score if r.id in by_id else None,
                agent=by_id[r.id].agent if r.id in by_id else "",
            )
            for r in selection.entries
        )
        return TurnRecall(
            block=selection.block, refs=refs, backend=ref, query_summary=summary
        )
