"""The end of a completed turn: autosave, the answer and completion, memory upkeep.

:class:`TurnFinisher` runs once the model answers without tool calls: the
autosave gate (:func:`turnledger.policies.autosave.decide_autosave`) decides
whether the user's input is stored as memory, then the answer and
``turn.completed`` are recorded in one append; after that the memory strategy
consolidates the turn and the hygiene schedule governs the agent's memory when
it is due. Neither of these two ever fails the turn.
"""

from __future__ import annotations

import asyncio
import time

from turnledger.ledger.events import AssistantMessage, TurnCompleted, TurnOrigin
from turnledger.pipeline.config import Config
from turnledger.pipeline.engine.logger import engine_logger as _logger
from turnledger.pipeline.engine.session_cursor import SessionCursor, SessionCursors
from turnledger.pipeline.memory import MemoryService
from turnledger.pipeline.memory.hygiene import HygieneSchedule
from turnledger.pipeline.memory.strategy.types import MemoryStrategy
from turnledger.policies.autosave import autosave_key, decide_autosave
from turnledger.policies.scrubbing import scrub_text, summarize


class TurnFinisher:
    """Closes a completed turn and runs the memory upkeep that follows it.

    Args:
        sessions: The session cursors it appends through.
        memory: The memory service autosaved inputs are stored in.
        config: The autosave switches (``[memory] autosave`` and each agent's).
        strategy: The memory strategy run after a completed turn
            (consolidation); ``None`` runs none.
        hygiene: The schedule that governs each agent's memory.

    Attributes:
        hygiene: The hygiene schedule consulted after each completed turn.
    """

    def __init__(
        self,
        *,
        sessions: SessionCursors,
        memory: MemoryService,
        config: Config,
        strategy: MemoryStrategy | None,
        hygiene: HygieneSchedule,
    ) -> None:
        self._sessions = sessions
        self._memory = memory
        self._config = config
        self._strategy = strategy
        self.hygiene = hygiene

    async def complete(
        self,
        session: SessionCursor,
        turn_id: str,
        user_input: str,
        origin: TurnOrigin,
        *,
        answer: AssistantMessage,
        started: float,
    ) -> None:
        """Record the answer and the completion, then consolidate and govern.

        ``started`` is the turn's :func:`time.perf_counter` at its start (the
        completion records the duration).
        """
        await self._record(
            session, turn_id, user_input, origin, answer=answer, started=started
        )
        await self._consolidate(session, user_input, answer.text)
        await self._govern(session.agent)

    async def _record(
        self,
        session: SessionCursor,
        turn_id: str,
        user_input: str,
        origin: TurnOrigin,
        *,
        answer: AssistantMessage,
        started: float,
    ) -> None:
        """Autosave through the gate, then record the answer and the completion."""
        iteration = answer.iteration
        settings = self._config.agent(session.agent)
        enabled = settings.autosave and self._config.memory.autosave
        decision = decide_autosave(
            user_input,
            origin=origin,
            key=autosave_key(turn_id, channel=session.key),
            session=session.key,
            enabled=enabled,
        )
        if decision.save:
            await asyncio.to_thread(
                self._memory.store_entry,
                session.agent,
                decision.key,
                decision.content,
                category=decision.category,
                session=decision.session,
                source="autosave",
            )
        await self._sessions.append(
            session,
            [
                answer,
                TurnCompleted(
                    turn_id=turn_id,
                    iterations=iteration + 1,
                    duration_ms=(time.perf_counter() - started) * 1000,
                ),
            ],
            step_key=f"{turn_id}:completed",
        )
        _logger().info(
            "turn.completed", iterations=iteration + 1, autosaved=decision.save
        )

    async def _consolidate(
        self, session: SessionCursor, user: str, answer: str
    ) -> None:
        """Run the memory strategy after a completed turn; never fails the turn."""
        if self._strategy is None:
            return
        try:
            report = await self._strategy.consolidate_turn(
                session.agent, session.key, user, answer
            )
            _logger().info("memory.consolidated", outcome=report.outcome)
        except Exception as e:  # noqa: BLE001 - consolidation never fails a turn
            _logger().warning(
                "memory.consolidation_failed", error=summarize(scrub_text(str(e)))
            )

    async def _govern(self, agent: str) -> None:
        """Govern the agent's memory when ``[memory] hygiene_hours`` says it is due."""
        if not self.hygiene.due(agent):  # pure check: no thread hop when not due
            return
        try:
            report = await asyncio.to_thread(self.hygiene.run_if_due, agent)
        except Exception as e:  # noqa: BLE001 - hygiene never fails a turn
            _logger().warning(
                "memory.hygiene_failed", error=summarize(scrub_text(str(e)))
            )
            return
        if report is not None:
            _logger().info("memory.hygiene", recorded=report.recorded)
