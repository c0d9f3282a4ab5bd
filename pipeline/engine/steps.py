"""The turn engine's model-call and end-of-turn steps (mixed into the engine).

:class:`TurnSteps` holds the steps of a turn that talk to the provider and close
the turn: assemble and record the prompt (through the session cursor's
:class:`~turnledger.pipeline.engine.prompt_cache.PromptCache`), call the model (the
reactive trim and one retry on a context overflow), record a provider failure,
then autosave through the gate, record the answer and the completion, run the
memory strategy and the hygiene schedule. The engine
(:class:`turnledger.pipeline.engine.TurnEngine`) composes them with the session
handling and the tool loop.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import structlog

from turnledger.ledger.events import (
    AssistantMessage,
    TurnCompleted,
    TurnFailed,
    TurnOrigin,
)
from turnledger.pipeline.config import Config
from turnledger.pipeline.engine.budget_guard import BudgetGuard
from turnledger.pipeline.engine.model_calls import ModelCallFailedError, call_model
from turnledger.pipeline.engine.prompting import trim_event
from turnledger.pipeline.engine.session_cursor import SessionCursor, SessionCursors
from turnledger.pipeline.engine.tool_runner import ToolRunner
from turnledger.pipeline.memory import MemoryService
from turnledger.pipeline.memory.hygiene import HygieneSchedule
from turnledger.pipeline.memory.strategy.types import MemoryStrategy
from turnledger.pipeline.providers.base import ChatResponse, Provider, ProviderError
from turnledger.policies.autosave import autosave_key, decide_autosave
from turnledger.policies.messages import Message
from turnledger.policies.scrubbing import scrub_text, summarize
from turnledger.policies.trimming import REASON_CONTEXT_OVERFLOW, trim_after_overflow

_log = structlog.get_logger("turnledger.engine")
_bound: list[tuple[tuple[int, ...], Any]] = []


def engine_logger() -> Any:
    """The engine's logger, bound once per structlog configuration.

    structlog's lazy proxy builds a logger on every call; this binds one and
    keeps it while the configuration (processors, wrapper class, logger
    factory, context class) is the same objects, so a later ``configure``
    (the CLI's ``-v``, a test's ``capture_logs``) is still honoured.
    """
    config = structlog.get_config()
    key = tuple(
        id(config[name])
        for name in ("processors", "wrapper_class", "logger_factory", "context_class")
    )
    if not _bound or _bound[0][0] != key:
        _bound[:] = [(key, _log.bind())]
    return _bound[0][1]


_logger = engine_logger


class TurnSteps:
    """The provider and end-of-turn steps; the engine provides the attributes."""

    sessions: SessionCursors
    provider: Provider
    config: Config
    tools: ToolRunner
    budget: BudgetGuard
    memory: MemoryService
    strategy: MemoryStrategy | None
    hygiene: HygieneSchedule
    system_prompt: str

    # -- prompt and provider -----------------------------------------------------

    async def _call(
        self, session: SessionCursor, turn_id: str, iteration: int, block: str
    ) -> ChatResponse | None:
        prompt = session.prompts.assemble(
            session.state,
            turn_id=turn_id,
            iteration=iteration,
            system=self.system_prompt,
            memory_block=block,
            runtime=self.config.runtime,
        )
        await self.sessions.append(
            session, prompt.events, step_key=f"{turn_id}:prompt-{iteration}"
        )
        messages = list(prompt.messages)
        try:
            return await self._complete(session, turn_id, iteration, messages)
        except ProviderError as e:
            if e.kind != "context_overflow":
                await self._provider_failed(session, turn_id, e)
                return None
        # Reactive recovery: trim to 2/3 of the current estimate, retry once.
        recovery = trim_after_overflow(messages)
        if recovery.decision.trimmed:
            await self.sessions.append(
                session,
                [
                    trim_event(
                        session.state,
                        turn_id,
                        recovery.decision.messages,
                        REASON_CONTEXT_OVERFLOW,
                        recovery.decision,
                    )
                ],
                step_key=f"{turn_id}:trim-{iteration}",
            )
        try:
            retried = list(recovery.decision.messages)
            return await self._complete(session, turn_id, iteration, retried, attempt=1)
        except ProviderError as e:
            await self._provider_failed(session, turn_id, e)
            return None

    async def _complete(
        self,
        session: SessionCursor,
        turn_id: str,
        iteration: int,
        messages: list[Message],
        *,
        attempt: int = 0,
    ) -> ChatResponse:
        try:
            call = await call_model(
                self.provider,
                messages,
                self.tools.specs,
                pricing=self.config.pricing,
                turn_id=turn_id,
                iteration=iteration,
            )
        except ModelCallFailedError as failed:
            await self.sessions.append(
                session,
                [failed.event],
                step_key=f"{turn_id}:model-{iteration}.{attempt}",
            )
            raise failed.error from None
        # Recorded together with the assistant message it produced (one commit).
        session.pending.append(call.event)
        self.budget.add(call.event.cost_usd)
        _logger().info(
            "model.called", iteration=iteration, calls=len(call.response.tool_calls)
        )
        return call.response

    async def _provider_failed(
        self, session: SessionCursor, turn_id: str, error: ProviderError
    ) -> None:
        await self.sessions.append(
            session,
            [
                TurnFailed(
                    turn_id=turn_id,
                    kind="provider_error",
                    error=summarize(scrub_text(f"{error.kind}: {error}")),
                )
            ],
            step_key=f"{turn_id}:failed",
        )
        _logger().warning("turn.provider_error", kind=error.kind)

    # -- end of turn -------------------------------------------------------------

    async def _consolidate(
        self, session: SessionCursor, user: str, answer: str
    ) -> None:
        """Run the memory strategy after a completed turn; never fails the turn."""
        if self.strategy is None:
            return
        try:
            report = await self.strategy.consolidate_turn(
                session.agent, session.key, user, answer
            )
            _logger().info("memory.consolidated", outcome=report.outcome)
        except Exception as e:  # noqa: BLE001 - consolidation never fails a turn
            _logger().warning(
                "memory.consolidation_failed", error=summarize(scrub_text(str(e)))
            )

    async def _hygiene(self, agent: str) -> None:
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

    async def _finish(
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
        settings = self.config.agent(session.agent)
        enabled = settings.autosave and self.config.memory.autosave
        decision = decide_autosave(
            user_input,
            origin=origin,
            key=autosave_key(turn_id, channel=session.key),
            session=session.key,
            enabled=enabled,
        )
        if decision.save:
            await asyncio.to_thread(
                self.memory.store_entry,
                session.agent,
                decision.key,
                decision.content,
                category=decision.category,
                session=decision.session,
                source="autosave",
            )
        await self.sessions.append(
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
