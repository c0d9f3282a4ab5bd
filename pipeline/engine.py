"""The turn engine: runs agent turns and records every step in the ledger.

A turn: open or resume the session (repairing a turn a crash interrupted) ->
record turn started (input, attachments as references) -> recall and inject per
the recall policy (references recorded; a recall failure never fails the turn)
-> assemble the prompt from the session-history projection, bounded, trimmed
and pairing-repaired by the policies (its fingerprint recorded, never the
prompt) -> call the provider (usage and cost recorded) -> record the assistant
message BEFORE any tool runs -> run the tools (bounded concurrency), bound and
promote their results, record them -> repeat until a final answer or the
iteration limit -> autosave through the gate -> turn completed. Each step is one
atomic append, keyed ``f"{turn_id}:{step}"`` (``started``, ``prompt-N``,
``assistant-N``, ``results-N``, ``trim-N``, ``model-N.A``, ``failed``,
``completed``; a repair is ``{interrupted turn}:repaired``): an append retried
after a lost acknowledgement writes nothing twice (see
:meth:`~turnledger.pipeline.session_cursor.SessionCursors.append`). A
context-overflow error triggers the reactive 2/3 trim and one retry, recorded
as a trim.

The pieces live beside this loop: prompt assembly in
:mod:`turnledger.pipeline.prompting`, the model call in
:mod:`turnledger.pipeline.model_calls`, tool execution in
:mod:`turnledger.pipeline.tool_runner`, crash repair as the pure policy
:func:`turnledger.policies.repair.repair_interrupted_turn`, and the session
cursor (snapshot + tail, cached between turns) in
:mod:`turnledger.pipeline.session_cursor`.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import msgspec
import structlog

from turnledger.ledger.aio import AsyncLedger
from turnledger.ledger.errors import ConcurrencyError
from turnledger.ledger.events import (
    AssistantMessage,
    Event,
    MediaAttached,
    MemoryRecalled,
    ToolCallRecord,
    TurnCompleted,
    TurnFailed,
    TurnOrigin,
    TurnStarted,
)
from turnledger.ledger.ids import session_stream_id
from turnledger.pipeline.budget_guard import BudgetGuard, refusal_text
from turnledger.pipeline.config import Config
from turnledger.pipeline.hygiene import HygieneSchedule
from turnledger.pipeline.memory_service import (
    MemoryService,
    TurnRecall,
    query_shape,
)
from turnledger.pipeline.model_calls import ModelCallFailedError, call_model
from turnledger.pipeline.prompting import trim_event
from turnledger.pipeline.providers.base import ChatResponse, Provider, ProviderError
from turnledger.pipeline.session_cursor import SessionCursor, SessionCursors
from turnledger.pipeline.session_lock import SessionLocks
from turnledger.pipeline.strategy import MemoryStrategy
from turnledger.pipeline.tool_runner import ToolRunner, agent_workspace
from turnledger.pipeline.tools.base import Tool, ToolContext
from turnledger.policies.autosave import autosave_key, decide_autosave
from turnledger.policies.messages import Message
from turnledger.policies.paths import sanitize_session_key
from turnledger.policies.repair import repair_interrupted_turn
from turnledger.policies.scrubbing import scrub_text, summarize
from turnledger.policies.trimming import REASON_CONTEXT_OVERFLOW, trim_after_overflow
from turnledger.projections.queries import SessionHistories

DEFAULT_SYSTEM_PROMPT: Final = (
    "You are a helpful assistant. Use the tools when they help; answer concisely."
)

START_ATTEMPTS: Final = 3
"""How often a turn opens its session and records its start when another writer
keeps moving the session in between (each conflict writes nothing)."""

_log = structlog.get_logger("turnledger.engine")
_bound: list[tuple[tuple[int, ...], Any]] = []


def _logger() -> Any:
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


class TurnOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """How a turn ended.

    Attributes:
        turn_id: The turn.
        completed: Whether it ended with a final answer.
        answer: The final answer ("" when it did not complete).
        iterations: Provider calls made.
        failure: Why it did not complete (``iteration_limit``, ``provider_error``,
            ``budget_exceeded``).
        stream_id: The session stream.
    """

    turn_id: str
    completed: bool
    answer: str
    iterations: int
    failure: str | None = None
    stream_id: str = ""


class TurnEngine:
    """Runs turns for agents, recording everything in the ledger.

    Args:
        ledger: The async ledger (group-committing writer).
        provider: The model endpoint.
        memory: Scoped long-term memory.
        tools: The tools the model may call, by name.
        config: Limits, recall and pricing settings.
        system_prompt: The system prompt (ephemeral: only its digest is recorded).
        strategy: The agent's memory strategy, run after a completed turn
            (consolidation: one extra provider call); ``None`` runs none.
        histories: How sessions are read (a view store makes a cold open cost
            the snapshot plus the newer events); default: folded from the
            stream on first open, then kept current in memory.
    """

    def __init__(
        self,
        *,
        ledger: AsyncLedger,
        provider: Provider,
        memory: MemoryService,
        tools: Mapping[str, Tool],
        config: Config,
        system_prompt: str = DEFAULT_SYSTEM_PROMPT,
        strategy: MemoryStrategy | None = None,
        histories: SessionHistories | None = None,
    ) -> None:
        self.strategy = strategy
        self.ledger = ledger
        self.provider = provider
        self.memory = memory
        self.config = config
        self.system_prompt = system_prompt
        self.tools = ToolRunner(
            tools,
            max_result_chars=config.runtime.max_tool_result_chars,
            concurrency=config.runtime.tool_concurrency,
        )
        self.sessions = SessionCursors(
            ledger, histories or SessionHistories(ledger.store)
        )
        self.session_locks = SessionLocks(ledger.store)
        self.budget = BudgetGuard(ledger.store, config.budgets)
        self.hygiene = HygieneSchedule(memory, config.memory.hygiene_hours)
        self._workspaces: dict[str, Path] = {}

    # -- session ---------------------------------------------------------------

    async def open_session(
        self, agent: str, session_key: str, *, channel: str = "", verify: bool = True
    ) -> SessionCursor:
        """Open (or resume) a session; a turn a crash interrupted is closed first.

        ``verify=False`` trusts a cached cursor without reading the stream's
        head (see :meth:`SessionCursors.open`); a turn does that and retries
        when its first append finds another writer moved the session.
        """
        session = await self.sessions.open(
            agent, session_key, channel=channel, verify=verify
        )
        turn = session.state.open_turn
        if turn is None:
            return session
        calls = [
            call
            for e in session.state.entries
            if e.turn_id == turn
            for call in e.message.tool_calls
        ]
        answered = {
            r.call_id for e in session.state.entries for r in e.message.tool_results
        }
        repair = repair_interrupted_turn(turn, calls, answered)
        await self.sessions.append(session, repair, step_key=f"{turn}:repaired")
        _logger().warning("turn.repaired", turn_id=turn, synthesized=len(repair) - 1)
        return session

    # -- the turn --------------------------------------------------------------

    async def run_turn(
        self,
        agent: str,
        session_key: str,
        user_input: str,
        *,
        origin: TurnOrigin = "interactive",
        channel: str = "",
        attachments: Sequence[MediaAttached] = (),
    ) -> TurnOutcome:
        """Run one turn to a final answer, a failure or the iteration limit.

        ``attachments`` are ``media.attached`` events (references, never bytes);
        their turn id is set to this turn's. The turn holds its session's lock
        (:mod:`turnledger.pipeline.session_lock`): a turn of the same session in
        another process (or task) waits for it, and one that waited too long
        raises :class:`~turnledger.pipeline.session_lock.SessionBusyError`
        before writing anything.
        """
        # One turn at a time per session, across processes: opening (and so
        # repairing a crashed turn) and every step run under the session lock.
        stream = session_stream_id(agent, sanitize_session_key(session_key))
        async with self.session_locks.hold(stream):
            started = time.perf_counter()
            turn_id = os.urandom(8).hex()
            media = [msgspec.structs.replace(a, turn_id=turn_id) for a in attachments]
            first = [
                TurnStarted(
                    turn_id=turn_id,
                    origin=origin,
                    user_input=user_input,
                    attachments=tuple(a.sha256 for a in media),
                ),
                *media,
            ]
            key = sanitize_session_key(session_key)
            # Recall reads memory only: it runs while the start commits.
            with structlog.contextvars.bound_contextvars(
                agent=agent, session=key, turn=turn_id
            ):
                recalling = asyncio.create_task(
                    self._fetch_recall(agent, key, user_input, origin)
                )
            try:
                session = await self._start(agent, session_key, channel, turn_id, first)
            except BaseException:
                recalling.cancel()
                raise
            with structlog.contextvars.bound_contextvars(
                agent=agent, session=session.key, turn=turn_id
            ):
                _logger().info(
                    "turn.started", origin=origin, input_chars=len(user_input)
                )
                recall = await recalling
                self._record_recall(session, turn_id, recall)
                return await self._run(
                    session, turn_id, user_input, origin, recall=recall, started=started
                )

    async def _start(
        self,
        agent: str,
        session_key: str,
        channel: str,
        turn_id: str,
        first: Sequence[Event],
    ) -> SessionCursor:
        """Open the session (repairing a crashed turn) and record the turn's start.

        The cached cursor is trusted (no head read): if another writer moved
        the session, the repair or the start append conflicts, writing nothing,
        the cursor is refreshed, and the open (with its repair check) runs again.
        """
        attempt = 0
        while True:
            try:
                session = await self.open_session(
                    agent, session_key, channel=channel, verify=False
                )
                await self.sessions.append(
                    session, first, step_key=f"{turn_id}:started"
                )
            except ConcurrencyError:
                attempt += 1
                if attempt >= START_ATTEMPTS:
                    raise
            else:
                return session

    async def _run(
        self,
        session: SessionCursor,
        turn_id: str,
        user_input: str,
        origin: TurnOrigin,
        *,
        recall: TurnRecall,
        started: float,
    ) -> TurnOutcome:
        limit = max(1, self.config.runtime.max_tool_iterations)
        for iteration in range(limit):
            budget = self.budget.status()
            if budget.state == "exceeded":  # refused before the model is called
                await self.sessions.append(
                    session,
                    [
                        TurnFailed(
                            turn_id=turn_id,
                            kind="budget_exceeded",
                            error=refusal_text(budget),
                        )
                    ],
                    step_key=f"{turn_id}:failed",
                )
                _logger().warning("turn.budget_exceeded", period=budget.period)
                return _failed(session, turn_id, iteration, "budget_exceeded")
            response = await self._call(session, turn_id, iteration, recall.block)
            if response is None:
                return _failed(session, turn_id, iteration + 1, "provider_error")
            calls = tuple(
                ToolCallRecord(
                    id=c.id or f"call_{os.urandom(6).hex()}",
                    name=c.name or "unknown",
                    arguments=c.arguments,
                )
                for c in response.tool_calls
            )
            message = AssistantMessage(
                turn_id=turn_id,
                text=response.text,
                tool_calls=calls,
                iteration=iteration,
            )
            if not calls:
                await self._finish(
                    session,
                    turn_id,
                    user_input,
                    origin,
                    answer=message,
                    started=started,
                )
                await self._consolidate(session, user_input, response.text)
                await self._hygiene(session.agent)
                return TurnOutcome(
                    turn_id=turn_id,
                    completed=True,
                    answer=response.text,
                    iterations=iteration + 1,
                    stream_id=str(session.stream_id),
                )
            # Committed BEFORE any tool runs: a crash never loses a side effect's call.
            await self.sessions.append(
                session, [message], step_key=f"{turn_id}:assistant-{iteration}"
            )
            results = await self.tools.run(
                turn_id, calls, self._context(session, turn_id)
            )
            await self.sessions.append(
                session, results, step_key=f"{turn_id}:results-{iteration}"
            )
        await self.sessions.append(
            session,
            [
                TurnFailed(
                    turn_id=turn_id,
                    kind="iteration_limit",
                    error=f"stopped after {limit} model calls",
                )
            ],
            step_key=f"{turn_id}:failed",
        )
        _logger().warning("turn.iteration_limit", iterations=limit)
        return _failed(session, turn_id, limit, "iteration_limit")

    async def _fetch_recall(
        self, agent: str, session_key: str, query: str, origin: TurnOrigin
    ) -> TurnRecall:
        """Recall in a worker thread; a failure is an empty recall, logged."""
        try:
            return await asyncio.to_thread(
                self.memory.recall_for_turn,
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
                backend=self.memory.backend_ref(agent),
                query_summary=query_shape(query),
            )

    def _record_recall(
        self, session: SessionCursor, turn_id: str, recall: TurnRecall
    ) -> None:
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

    # -- tools -----------------------------------------------------------------

    def _context(self, session: SessionCursor, turn_id: str) -> ToolContext:
        workspace = self._workspaces.get(session.agent)
        if workspace is None or not workspace.is_dir():  # made once, again if gone
            workspace = self._workspaces[session.agent] = agent_workspace(
                self.config.agent(session.agent).workspace,
                self.config.data_dir,
                session.agent,
            )
        return ToolContext(
            agent=session.agent,
            session_key=session.key,
            turn_id=turn_id,
            workspace=workspace,
            memory=self.memory,
            store=self.ledger.store,
        )

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


def _failed(
    session: SessionCursor, turn_id: str, iterations: int, failure: str
) -> TurnOutcome:
    return TurnOutcome(
        turn_id=turn_id,
        completed=False,
        answer="",
        iterations=iterations,
        failure=failure,
        stream_id=str(session.stream_id),
    )
