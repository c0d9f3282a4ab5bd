"""The turn's memory recall: fetched in a worker thread, recorded with the prompt.

The engine starts :meth:`Recaller.fetch` as a task while the turn's start
commits (recall reads memory only, so it has no side effect to order); a
recall failure is logged and becomes an empty recall, never a failed turn.
:meth:`Recaller.record` queues the ``memory.recalled`` event on the session's
pending list, so it commits with the first prompt in one append.
"""

from __future__ import annotations

import asyncio

from turnledger.ledger.events import MemoryRecalled, TurnOrigin
from turnledger.pipeline.engine.logger import engine_logger as _logger
from turnledger.pipeline.engine.session_cursor import SessionCursor
from turnledger.pipeline.memory import MemoryService, TurnRecall, query_shape
from turnledger.policies.scrubbing import scrub_text, summarize


class Recaller:
    """Recalls memory for a turn and queues the record of what it recalled.

    Args:
        memory: The memory service recalled from.
    """

    def __init__(self, memory: MemoryService) -> None:
        self._memory = memory

    async def fetch(
        self, agent: str, session_key: str, query: str, origin: TurnOrigin
    ) -> TurnRecall:
        """Recall in a worker thread; a failure is an empty recall, logged."""
        try:
            return await asyncio.to_thread(
                self._memory.recall_for_turn,
                agent,
                query,
                session=session_key,
                origin=origin,
            )
        except Exception as e:  # noqa: BLE001 - a recall failure never fails the turn
            _logger().warning(
                "memory.recall_failed", error=summarize(scrub_text(str(e)))
            )
            return TurnRecall(
                block="",
                refs=(),
                backend=self._memory.backend_ref(agent),
                query_summary=query_shape(query),
            )

    @staticmethod
    def record(session: SessionCursor, turn_id: str, recall: TurnRecall) -> None:
        """Queue the ``memory.recalled`` event to commit with the first prompt."""
        # Recorded with the first prompt (one commit): a recall has no side effect.
        session.pending.append(
            MemoryRecalled(
                turn_id=turn_id,
                backend=recall.backend,
                entries=recall.refs,
                query_summary=recall.query_summary,
                injected_chars=len(recall.block),
            )
        )
        _logger().info("memory.recalled", entries=len(recall.refs))
