"""The turn engine: runs agent turns and records every step in the ledger.

A turn: open or resume the session (repairing a turn a crash interrupted) ->
record turn started (input, attachments as references) -> recall and inject per
the recall policy (references recorded with the first prompt; the recall runs in
a worker thread while the start commits; a recall failure never fails the turn)
-> assemble the prompt from the session-history projection, bounded, trimmed and
pairing-repaired by the policies (its fingerprint recorded, never the prompt) ->
call the provider (usage and cost recorded) -> check that the response can be
recorded whole (else the turn fails, nothing of the response appended) -> record
the assistant message BEFORE any tool runs -> run the tools (bounded
concurrency), bound and promote their results, record them -> repeat until a
final answer or the iteration limit -> autosave through the gate -> turn
completed. Each step is one atomic append, keyed ``f"{turn_id}:{step}"``
(``started``, ``prompt-N``, ``assistant-N``, ``results-N``, ``trim-N``,
``model-N.A``, ``failed``, ``completed``; a repair is ``{interrupted
turn}:repaired``): an append retried after a lost acknowledgement writes nothing
twice (see
:meth:`~turnledger.pipeline.engine.session_cursor.SessionCursors.append`). A
context-overflow error triggers the reactive 2/3 trim and one retry, recorded as
a trim.

The engine holds the parts of a turn, each an object of its own built with
only the collaborators it uses: opening the session (crash repair) and
recording the turn's start is :class:`~turnledger.pipeline.engine.opening.TurnOpener`,
the turn's recall (fetched while the start commits, recorded with the first
prompt) :class:`~turnledger.pipeline.engine.recall.Recaller`, the prompt and
model call (with the overflow recovery)
:class:`~turnledger.pipeline.engine.model_step.ModelStep`, the end of a
completed turn (autosave, completion, consolidation, hygiene)
:class:`~turnledger.pipeline.engine.finishing.TurnFinisher`, tool execution
:class:`~turnledger.pipeline.engine.tool_runner.ToolRunner` with the tools'
context from :class:`~turnledger.pipeline.engine.tool_context.ToolContexts`.
Beside them: prompt assembly in :mod:`turnledger.pipeline.engine.prompting`
(kept incremental per session by :mod:`turnledger.pipeline.engine.prompt_cache`),
the model call in :mod:`turnledger.pipeline.engine.model_calls`, crash repair as
the pure policy :func:`turnledger.policies.repair.repair_interrupted_turn`, the
budget check in :mod:`turnledger.pipeline.engine.budget_guard`, the session lock
in :mod:`turnledger.pipeline.engine.session_lock`, and the session cursor
(snapshot + tail, cached between turns) in
:mod:`turnledger.pipeline.engine.session_cursor`.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Mapping, Sequence
from typing import Final

import msgspec
import structlog

from turnledger.ledger.aio import AsyncLedger
from turnledger.ledger.events import (
    AssistantMessage,
    MediaAttached,
    ToolCallRecord,
    TurnOrigin,
    TurnStarted,
)
from turnledger.ledger.ids import session_stream_id
from turnledger.pipeline.config import Config
from turnledger.pipeline.engine.budget_guard import BudgetGuard, refusal_text
from turnledger.pipeline.engine.failure import TurnFailure
from turnledger.pipeline.engine.finishing import TurnFinisher
from turnledger.pipeline.engine.logger import engine_logger as _logger
from turnledger.pipeline.engine.model_step import ModelStep
from turnledger.pipeline.engine.opening import TurnOpener
from turnledger.pipeline.engine.recall import Recaller
from turnledger.pipeline.engine.session_cursor import SessionCursor, SessionCursors
from turnledger.pipeline.engine.session_lock import SessionLocks
from turnledger.pipeline.engine.tool_context import ToolContexts
from turnledger.pipeline.engine.tool_runner import ToolRunner
from turnledger.pipeline.memory import MemoryService, TurnRecall
from turnledger.pipeline.memory.hygiene import HygieneSchedule
from turnledger.pipeline.memory.strategy.types import MemoryStrategy
from turnledger.pipeline.providers.base import Provider
from turnledger.pipeline.tools.base import Tool
from turnledger.policies.paths import sanitize_session_key
from turnledger.projections.queries import SessionHistories

__all__ = ["DEFAULT_SYSTEM_PROMPT", "TurnEngine", "TurnOutcome"]

DEFAULT_SYSTEM_PROMPT: Final = (
    "You are a helpful assistant. Use the tools when they help; answer concisely."
)


class TurnOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """How a turn ended.

    Attributes:
        turn_id: The turn.
        completed: Whether it ended with a final answer.
        answer: The final answer ("" when it did not complete).
        iterations: Provider calls made.
        failure: Why it did not complete (``iteration_limit``, ``provider_error``,
            ``budget_exceeded``, ``unrecordable_response``).
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

    The engine holds the parts of a turn, each built with the collaborators it
    needs, and runs them in order under the session's lock.

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

    Attributes:
        sessions: The session cursors every step appends through.
        session_locks: One turn at a time per session, across processes.
        budget: The ``[budgets]`` check made before each model call.
        tools: Runs the model's tool calls.
        opener: Opens the session (crash repair) and records the turn's start.
        recaller: The turn's memory recall.
        model: The model step (prompt, call, overflow recovery).
        finisher: The end of a completed turn (autosave, completion, upkeep).
        tool_contexts: What the tools may use (workspace, memory, ledger).
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
        self.sessions = SessionCursors(
            ledger, histories or SessionHistories(ledger.store)
        )
        self.session_locks = SessionLocks(ledger.store)
        self.budget = BudgetGuard(ledger.store, config.budgets)
        self.tools = ToolRunner(
            tools,
            max_result_chars=config.runtime.max_tool_result_chars,
            concurrency=config.runtime.tool_concurrency,
        )
        self.opener = TurnOpener(self.sessions)
        self.recaller = Recaller(memory)
        self.model = ModelStep(
            sessions=self.sessions,
            provider=provider,
            tool_specs=self.tools.specs,
            pricing=config.pricing,
            runtime=config.runtime,
            budget=self.budget,
            system_prompt=system_prompt,
        )
        self.finisher = TurnFinisher(
            sessions=self.sessions,
            memory=memory,
            config=config,
            strategy=strategy,
            hygiene=HygieneSchedule(memory, config.memory.hygiene_hours),
        )
        self.tool_contexts = ToolContexts(
            config=config, memory=memory, store=ledger.store
        )
        self._iterations = max(1, config.runtime.max_tool_iterations)

    async def open_session(
        self, agent: str, session_key: str, *, channel: str = "", verify: bool = True
    ) -> SessionCursor:
        """Open (or resume) a session; a turn a crash interrupted is closed first.

        See :meth:`~turnledger.pipeline.engine.opening.TurnOpener.open`.
        """
        return await self.opener.open(
            agent, session_key, channel=channel, verify=verify
        )

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
        (:mod:`turnledger.pipeline.engine.session_lock`): a turn of the same session in
        another process (or task) waits for it, and one that waited too long
        raises :class:`~turnledger.pipeline.engine.session_lock.SessionBusyError`
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
                    self.recaller.fetch(agent, key, user_input, origin)
                )
            try:
                session = await self.opener.start(
                    agent, session_key, channel=channel, turn_id=turn_id, first=first
                )
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
                self.recaller.record(session, turn_id, recall)
                return await self._run(
                    session, turn_id, user_input, origin, recall=recall, started=started
                )

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
        limit = self._iterations
        for iteration in range(limit):
            budget = self.budget.status()
            if budget.state == "exceeded":  # refused before the model is called
                refused = TurnFailure(
                    kind="budget_exceeded", error=refusal_text(budget)
                )
                return await self._fail(session, turn_id, iteration, refused)
            response = await self.model.call(session, turn_id, iteration, recall.block)
            if isinstance(response, TurnFailure):
                return await self._fail(session, turn_id, iteration + 1, response)
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
                await self.finisher.complete(
                    session,
                    turn_id,
                    user_input,
                    origin,
                    answer=message,
                    started=started,
                )
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
            context = self.tool_contexts.for_turn(session.agent, session.key, turn_id)
            results = await self.tools.run(turn_id, calls, context)
            await self.sessions.append(
                session, results, step_key=f"{turn_id}:results-{iteration}"
            )
        stopped = TurnFailure(
            kind="iteration_limit", error=f"stopped after {limit} model calls"
        )
        return await self._fail(session, turn_id, limit, stopped)

    async def _fail(
        self,
        session: SessionCursor,
        turn_id: str,
        iterations: int,
        failure: TurnFailure,
    ) -> TurnOutcome:
        """Record the turn's failure (the one place ``turn.failed`` is appended)."""
        await self.sessions.append(
            session, [failure.event(turn_id)], step_key=f"{turn_id}:failed"
        )
        _logger().warning("turn.failed", kind=failure.kind, iterations=iterations)
        return TurnOutcome(
            turn_id=turn_id,
            completed=False,
            answer="",
            iterations=iterations,
            failure=failure.kind,
            stream_id=str(session.stream_id),
        )
