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
atomic append; a context-overflow error triggers the reactive 2/3 trim and one
retry, recorded as a trim.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final
from uuid import UUID

import msgspec
import structlog

from turnledger.ledger.aio import AsyncLedger
from turnledger.ledger.codec import datetime_from_us, now_us
from turnledger.ledger.envelope import Recorded
from turnledger.ledger.errors import ConcurrencyError
from turnledger.ledger.events import (
    AssistantMessage,
    Event,
    HistoryTrimmed,
    MemoryRecalled,
    ModelCalled,
    PromptAssembled,
    PromptSection,
    SessionOpened,
    ToolCallRecord,
    ToolResultRecorded,
    TurnCompleted,
    TurnFailed,
    TurnOrigin,
    TurnStarted,
)
from turnledger.ledger.ids import session_stream_id
from turnledger.pipeline.config import Config
from turnledger.pipeline.export import ExportOptions, prepare_history
from turnledger.pipeline.memory_service import MemoryService, TurnRecall
from turnledger.pipeline.providers.base import (
    ChatRequest,
    ChatResponse,
    Provider,
    ProviderError,
)
from turnledger.pipeline.strategy import MemoryStrategy
from turnledger.pipeline.tools.base import Tool, ToolContext, ToolOutcome
from turnledger.policies.autosave import autosave_key, decide_autosave
from turnledger.policies.bounding import make_result_bounder
from turnledger.policies.images import promote_image_paths
from turnledger.policies.messages import Message
from turnledger.policies.paths import sanitize_session_key
from turnledger.policies.pricing import TokenUsage, price_usage
from turnledger.policies.scrubbing import scrub_text, summarize
from turnledger.policies.trimming import (
    REASON_BUDGET_EXCEEDED,
    REASON_CONTEXT_OVERFLOW,
    trim_after_overflow,
)
from turnledger.projections.base import fold
from turnledger.projections.history import (
    SESSION_HISTORY,
    SessionHistoryState,
    history_digest,
    visible_messages,
)

DEFAULT_SYSTEM_PROMPT: Final = (
    "You are a helpful assistant. Use the tools when they help; answer concisely."
)

_log = structlog.get_logger("turnledger.engine")
_ENCODER: Final = msgspec.json.Encoder()


def _sha(data: bytes | str) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return hashlib.sha256(raw).hexdigest()


class TurnOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """How a turn ended.

    Attributes:
        turn_id: The turn.
        completed: Whether it ended with a final answer.
        answer: The final answer ("" when it did not complete).
        iterations: Provider calls made.
        failure: Why it did not complete (``iteration_limit``, ``provider_error``).
        stream_id: The session stream.
    """

    turn_id: str
    completed: bool
    answer: str
    iterations: int
    failure: str | None = None
    stream_id: str = ""


class _Session:
    """The engine's cursor on one session stream.

    The engine is the session's only writer while a turn runs, so it keeps the
    session's history folded in memory and folds each event it appends, instead
    of re-reading the stream for every prompt. Events that need no commit of
    their own (a recall record, a model call's usage) wait in ``pending`` and go
    out with the next append.
    """

    def __init__(
        self,
        stream_id: UUID,
        version: int,
        agent: str,
        key: str,
        state: SessionHistoryState,
    ) -> None:
        self.stream_id = stream_id
        self.version = version
        self.agent = agent
        self.key = key
        self.state = state
        self.pending: list[Event] = []


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
    ) -> None:
        self.strategy = strategy
        self.ledger = ledger
        self.provider = provider
        self.memory = memory
        self.tools = dict(tools)
        self.config = config
        self.system_prompt = system_prompt
        self._bound = make_result_bounder(config.runtime.max_tool_result_chars)
        self._gate = asyncio.Semaphore(max(1, config.runtime.tool_concurrency))

    # -- session ---------------------------------------------------------------

    async def _append(self, session: _Session, events: Sequence[Event]) -> None:
        batch = [*session.pending, *events]
        session.pending.clear()
        try:
            result = await self.ledger.append(
                session.stream_id, batch, expected_version=session.version
            )
        except ConcurrencyError:
            # Another writer took the session: our folded copy is stale.
            session.state = await self._read_history(session)
            session.version = session.state.last_version
            raise
        now = datetime_from_us(now_us())
        recorded = [
            Recorded(
                stream_id=session.stream_id,
                version=result.first_version + i,
                position=position,
                recorded_at=now,
                event=event,  # type: ignore[arg-type]
            )
            for i, (event, position) in enumerate(
                zip(batch, result.positions, strict=True)
            )
        ]
        key = str(session.stream_id)
        session.state = fold(SESSION_HISTORY, recorded, {key: session.state})[key]
        session.version = result.last_version

    async def _read_history(self, session: _Session) -> SessionHistoryState:
        events = await self.ledger.read_stream(session.stream_id)
        return fold(SESSION_HISTORY, events).get(
            str(session.stream_id), SESSION_HISTORY.initial("")
        )

    async def _history(self, session: _Session) -> SessionHistoryState:
        return session.state

    async def open_session(
        self, agent: str, session_key: str, *, channel: str = ""
    ) -> _Session:
        """Open (or resume) a session; a turn a crash interrupted is closed first."""
        key = sanitize_session_key(session_key)
        stream = session_stream_id(agent, key)
        events = await self.ledger.read_stream(stream)
        state = fold(SESSION_HISTORY, events).get(
            str(stream), SESSION_HISTORY.initial("")
        )
        version = events[-1].version if events else 0
        session = _Session(stream, version, agent, key, state)
        if version == 0:
            await self._append(
                session, [SessionOpened(agent=agent, session_key=key, channel=channel)]
            )
            return session
        await self._repair_interrupted(session)
        return session

    async def _repair_interrupted(self, session: _Session) -> None:
        state = await self._history(session)
        if state.open_turn is None:
            return
        turn = state.open_turn
        answered = {r.call_id for e in state.entries for r in e.message.tool_results}
        events: list[Event] = [
            ToolResultRecorded(
                turn_id=turn,
                call_id=call.id,
                tool=call.name,
                success=False,
                error="interrupted: the tool call did not complete",
                provenance="synthesized",
            )
            for e in state.entries
            if e.turn_id == turn
            for call in e.message.tool_calls
            if call.id not in answered
        ]
        events.append(
            TurnFailed(
                turn_id=turn, kind="interrupted", error="the process stopped mid-turn"
            )
        )
        await self._append(session, events)
        _log.warning("turn.repaired", turn_id=turn, synthesized=len(events) - 1)

    # -- the turn --------------------------------------------------------------

    async def run_turn(
        self,
        agent: str,
        session_key: str,
        user_input: str,
        *,
        origin: TurnOrigin = "interactive",
        channel: str = "",
        attachments: Sequence[Event] = (),
    ) -> TurnOutcome:
        """Run one turn to a final answer, a failure or the iteration limit.

        ``attachments`` are ``media.attached`` events (references, never bytes);
        their turn id is set to this turn's.
        """
        session = await self.open_session(agent, session_key, channel=channel)
        turn_id = uuid.uuid4().hex[:16]
        with structlog.contextvars.bound_contextvars(
            agent=agent, session=session.key, turn=turn_id
        ):
            return await self._run(session, turn_id, user_input, origin, attachments)

    async def _run(
        self,
        session: _Session,
        turn_id: str,
        user_input: str,
        origin: TurnOrigin,
        attachments: Sequence[Event],
    ) -> TurnOutcome:
        started = time.perf_counter()
        media = [msgspec.structs.replace(a, turn_id=turn_id) for a in attachments]
        await self._append(
            session,
            [
                TurnStarted(
                    turn_id=turn_id,
                    origin=origin,
                    user_input=user_input,
                    attachments=tuple(str(getattr(a, "sha256", "")) for a in media),
                ),
                *media,
            ],
        )
        _log.info("turn.started", origin=origin, input_chars=len(user_input))
        recall = await self._recall(session, turn_id, user_input, origin)
        limit = max(1, self.config.runtime.max_tool_iterations)
        for iteration in range(limit):
            response = await self._call(session, turn_id, iteration, recall.block)
            if response is None:
                return self._outcome(session, turn_id, iteration + 1, "provider_error")
            calls = tuple(
                ToolCallRecord(
                    id=c.id or f"call_{uuid.uuid4().hex[:12]}",
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
                return TurnOutcome(
                    turn_id=turn_id,
                    completed=True,
                    answer=response.text,
                    iterations=iteration + 1,
                    stream_id=str(session.stream_id),
                )
            # Committed BEFORE any tool runs: a crash never loses a side effect's call.
            await self._append(session, [message])
            await self._run_tools(session, turn_id, calls)
        await self._append(
            session,
            [
                TurnFailed(
                    turn_id=turn_id,
                    kind="iteration_limit",
                    error=f"stopped after {limit} model calls",
                )
            ],
        )
        _log.warning("turn.iteration_limit", iterations=limit)
        return self._outcome(session, turn_id, limit, "iteration_limit")

    def _outcome(
        self, session: _Session, turn_id: str, iterations: int, failure: str
    ) -> TurnOutcome:
        return TurnOutcome(
            turn_id=turn_id,
            completed=False,
            answer="",
            iterations=iterations,
            failure=failure,
            stream_id=str(session.stream_id),
        )

    async def _recall(
        self, session: _Session, turn_id: str, query: str, origin: TurnOrigin
    ) -> TurnRecall:
        try:
            recall = await asyncio.to_thread(
                self.memory.recall_for_turn,
                session.agent,
                query,
                session=session.key,
                origin=origin,
            )
        except Exception as e:  # noqa: BLE001 - a recall failure never fails the turn
            _log.warning("memory.recall_failed", error=summarize(scrub_text(str(e))))
            recall = TurnRecall(
                block="",
                refs=(),
                backend=self.memory.backend_ref(session.agent),
                query_summary=summarize(scrub_text(query)),
            )
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
        _log.info("memory.recalled", entries=len(recall.refs))
        return recall

    # -- prompt and provider -----------------------------------------------------

    async def _assemble(
        self, session: _Session, turn_id: str, iteration: int, block: str
    ) -> list[Message]:
        state = await self._history(session)
        visible = visible_messages(state)
        prepared = prepare_history(
            visible,
            ExportOptions(
                budget_tokens=self.config.runtime.context_budget_tokens,
                max_tool_result_chars=self.config.runtime.max_tool_result_chars,
                memory_block=block or None,
                system=self.system_prompt,
            ),
        )
        messages = list(prepared.messages)
        # The prompt event digests the history the projection showed; the trim
        # that shaped this prompt follows it in the same atomic step.
        events: list[Event] = [
            _prompt_event(
                turn_id,
                iteration,
                self.system_prompt,
                visible,
                block=block,
                messages=messages,
            )
        ]
        trim = prepared.trim
        if trim is not None and trim.trimmed:
            events.append(
                _trim_event(state, turn_id, trim.messages, REASON_BUDGET_EXCEEDED, trim)
            )
        await self._append(session, events)
        return messages

    async def _call(
        self, session: _Session, turn_id: str, iteration: int, block: str
    ) -> ChatResponse | None:
        messages = await self._assemble(session, turn_id, iteration, block)
        try:
            return await self._complete(session, turn_id, iteration, messages)
        except ProviderError as e:
            if e.kind != "context_overflow":
                await self._provider_failed(session, turn_id, e)
                return None
        # Reactive recovery: trim to 2/3 of the current estimate, retry once.
        recovery = trim_after_overflow(messages)
        if recovery.decision.trimmed:
            state = await self._history(session)
            await self._append(
                session,
                [
                    _trim_event(
                        state,
                        turn_id,
                        recovery.decision.messages,
                        REASON_CONTEXT_OVERFLOW,
                        recovery.decision,
                    )
                ],
            )
        try:
            retried = list(recovery.decision.messages)
            return await self._complete(session, turn_id, iteration, retried)
        except ProviderError as e:
            await self._provider_failed(session, turn_id, e)
            return None

    async def _complete(
        self, session: _Session, turn_id: str, iteration: int, messages: list[Message]
    ) -> ChatResponse:
        request = ChatRequest(
            messages=tuple(messages),
            tools=tuple(tool.spec for tool in self.tools.values()),
        )
        started = time.perf_counter()
        try:
            response = await self.provider.complete(request)
        except ProviderError as e:
            await self._append(
                session,
                [
                    ModelCalled(
                        turn_id=turn_id,
                        provider=self.provider.name,
                        model=self.provider.model,
                        duration_ms=(time.perf_counter() - started) * 1000,
                        success=False,
                        error=summarize(scrub_text(f"{e.kind}: {e}")),
                        iteration=iteration,
                    )
                ],
            )
            raise
        usage = response.usage
        model = response.model or self.provider.model
        cost = 0.0
        if usage is not None:
            cost = price_usage(
                TokenUsage(
                    model=model,
                    input_tokens=usage.input_tokens,
                    output_tokens=usage.output_tokens,
                    cached_input_tokens=usage.cached_input_tokens,
                ),
                self.config.pricing,
            ).cost_usd
        # Recorded together with the assistant message it produced (one commit).
        session.pending.append(
            ModelCalled(
                turn_id=turn_id,
                provider=self.provider.name,
                model=model,
                input_tokens=usage.input_tokens if usage else 0,
                output_tokens=usage.output_tokens if usage else 0,
                cached_input_tokens=usage.cached_input_tokens if usage else 0,
                cost_usd=cost,
                duration_ms=(time.perf_counter() - started) * 1000,
                iteration=iteration,
            )
        )
        _log.info("model.called", iteration=iteration, calls=len(response.tool_calls))
        return response

    async def _provider_failed(
        self, session: _Session, turn_id: str, error: ProviderError
    ) -> None:
        await self._append(
            session,
            [
                TurnFailed(
                    turn_id=turn_id,
                    kind="provider_error",
                    error=summarize(scrub_text(f"{error.kind}: {error}")),
                )
            ],
        )
        _log.warning("turn.provider_error", kind=error.kind)

    # -- tools -----------------------------------------------------------------

    async def _run_tools(
        self, session: _Session, turn_id: str, calls: Sequence[ToolCallRecord]
    ) -> None:
        context = ToolContext(
            agent=session.agent,
            session_key=session.key,
            turn_id=turn_id,
            workspace=self._workspace(session.agent),
            memory=self.memory,
            store=self.ledger.store,
        )
        outcomes = await asyncio.gather(
            *(self._run_tool(call.name, call.arguments, context) for call in calls)
        )
        await self._append(
            session,
            [
                self._result_event(turn_id, call.id, call.name, outcome)
                for call, outcome in zip(calls, outcomes, strict=True)
            ],
        )

    def _workspace(self, agent: str) -> Path:
        configured = self.config.agent(agent).workspace
        root = (
            Path(configured)
            if configured
            else Path(self.config.data_dir) / "agents" / agent / "workspace"
        )
        root.mkdir(parents=True, exist_ok=True)
        return root

    async def _run_tool(
        self, name: str, arguments: str, context: ToolContext
    ) -> ToolOutcome:
        tool = self.tools.get(name)
        if tool is None:
            return ToolOutcome(success=False, error=f"Unknown tool: {name}")
        try:
            parsed = json.loads(arguments or "{}")
        except ValueError:
            return ToolOutcome(
                success=False,
                error=f"Expected JSON object arguments for {name}, found invalid JSON",
            )
        if not isinstance(parsed, dict):
            return ToolOutcome(
                success=False,
                error=f"Expected JSON object arguments for {name}, "
                f"found {type(parsed).__name__}",
            )
        async with self._gate:
            try:
                return await tool.run(parsed, context)
            except Exception as e:  # noqa: BLE001 - a tool crash is a failed result
                return ToolOutcome(
                    success=False,
                    error=f"Error executing {name}: {summarize(scrub_text(str(e)))}",
                )

    def _result_event(
        self, turn_id: str, call_id: str, name: str, outcome: ToolOutcome
    ) -> ToolResultRecorded:
        raw = outcome.output if outcome.success else (outcome.error or outcome.output)
        promoted = promote_image_paths(raw, os.path.isfile, tool_name=name).text
        bounded = self._bound(promoted)
        text = bounded.text
        return ToolResultRecorded(
            turn_id=turn_id,
            call_id=call_id or "unknown",
            tool=name or "unknown",
            success=outcome.success,
            output=text if outcome.success else "",
            error=None if outcome.success else text,
            original_chars=bounded.original_chars,
            kept_chars=bounded.kept_chars,
            truncated=bounded.truncated,
        )

    # -- end of turn -------------------------------------------------------------

    async def _consolidate(self, session: _Session, user: str, answer: str) -> None:
        """Run the memory strategy after a completed turn; never fails the turn."""
        if self.strategy is None:
            return
        try:
            report = await self.strategy.consolidate_turn(
                session.agent, session.key, user, answer
            )
            _log.info("memory.consolidated", outcome=report.outcome)
        except Exception as e:  # noqa: BLE001 - consolidation never fails a turn
            _log.warning(
                "memory.consolidation_failed", error=summarize(scrub_text(str(e)))
            )

    async def _finish(
        self,
        session: _Session,
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
        await self._append(
            session,
            [
                answer,
                TurnCompleted(
                    turn_id=turn_id,
                    iterations=iteration + 1,
                    duration_ms=(time.perf_counter() - started) * 1000,
                ),
            ],
        )
        _log.info("turn.completed", iterations=iteration + 1, autosaved=decision.save)


def _prompt_event(
    turn_id: str,
    iteration: int,
    system: str,
    visible: list[Message],
    *,
    block: str,
    messages: list[Message],
) -> PromptAssembled:
    sections = [
        PromptSection(
            name="system", chars=len(system), messages=1, digest=_sha(system)
        ),
        PromptSection(
            name="history",
            chars=sum(m.chars for m in visible),
            messages=len(visible),
            digest=history_digest(visible),
        ),
    ]
    if block:
        sections.append(
            PromptSection(
                name="memory", chars=len(block), messages=0, digest=_sha(block)
            )
        )
    encoded = _ENCODER.encode(tuple(messages))
    return PromptAssembled(
        turn_id=turn_id,
        iteration=iteration,
        sections=tuple(sections),
        fingerprint=_sha(encoded),
        estimated_tokens=sum(-(-m.chars // 4) + 4 for m in messages),
    )


def _trim_event(
    state: SessionHistoryState,
    turn_id: str,
    kept: Sequence[Message],
    reason: str,
    decision: Any,
) -> HistoryTrimmed:
    """Record a trim: the versions it dropped from the provider-visible history."""
    entries = [e for e in state.entries if e.version > state.trimmed_through]
    kept_body = sum(1 for m in kept if m.role != "system" and m.kind != "breadcrumb")
    dropped = max(0, len(entries) - kept_body)
    through = entries[dropped - 1].version if dropped else state.trimmed_through
    return HistoryTrimmed(
        turn_id=turn_id,
        dropped_messages=int(decision.dropped_messages),
        dropped_turns=int(decision.dropped_turns),
        kept_turns=int(decision.kept_turns),
        tokens_before=int(decision.tokens_before),
        tokens_after=int(decision.tokens_after),
        reason=reason,
        dropped_through_version=through,
    )
