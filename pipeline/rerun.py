"""Re-run a recorded session offline through the real engine, under other policies.

:func:`rerun_session` reads a session's recorded turns and drives the real
:class:`~turnledger.pipeline.engine.TurnEngine` (built by
:func:`~turnledger.pipeline.bootstrap.bootstrap`) over their user inputs into a
scratch SQLite ledger in a temporary directory (deleted after). The model is a
:class:`ReplayProvider` answering each call of each turn with the recorded
assistant message (text and tool calls, in order) and the recorded usage, or
the recorded failure; the tools are :class:`ReplayTool` s returning the
recorded result of the call (matched by name and arguments within the turn,
which names the recorded call id). Nothing reaches the network and no tool runs.

Before each turn the agent's memory events recorded before that turn's start
are copied into the scratch ledger, so recall sees the memory as it was then
(autosave is off in the re-run: its recorded events are among those copied).
The recorded ledger is only read. Results recorded bounded are rebounded the
way the export path does (never bounded twice). The per-turn comparison is in
:mod:`turnledger.pipeline.rerun_diff`.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast, get_args

import msgspec

from turnledger.ledger.events import (
    AssistantMessage,
    MediaAttached,
    ModelCalled,
    ToolResultRecorded,
    TurnStarted,
)
from turnledger.ledger.ids import memory_stream_id
from turnledger.pipeline.bootstrap import bootstrap
from turnledger.pipeline.config import Config, MemoryConfig
from turnledger.pipeline.providers.base import (
    ChatRequest,
    ChatResponse,
    ErrorKind,
    ProviderError,
    ToolSpec,
    Usage,
)
from turnledger.pipeline.rerun_diff import RerunReport, TurnFacts, compare, facts
from turnledger.pipeline.tools.base import Tool, ToolContext, ToolOutcome
from turnledger.pipeline.tools.registry import default_tools
from turnledger.policies.bounding import make_result_bounder
from turnledger.policies.messages import ToolCall
from turnledger.policies.pairing import audit_pairing

if TYPE_CHECKING:
    from turnledger.ledger.envelope import Recorded
    from turnledger.ledger.store import EventStore
    from turnledger.pipeline.sessions import SessionRef

_REFUSED: ErrorKind = "bad_request"
"""How a call the recorded turn did not make fails."""

__all__ = ["RecordedTurn", "ReplayProvider", "ReplayTool", "rerun_session"]


class RecordedTurn(msgspec.Struct, kw_only=True):
    """What one recorded turn holds, as the re-run needs it.

    Attributes:
        turn_id: The recorded turn id.
        position: The global position of its ``turn.started`` event.
        started: The ``turn.started`` event (user input, origin).
        media: Its ``media.attached`` events.
        calls: Its ``model.called`` events, in order.
        answers: Its assistant messages, in order.
        results: Its tool results by call id.
        events: All of its events (what the comparison reads).
    """

    turn_id: str
    position: int
    started: TurnStarted
    media: list[MediaAttached] = msgspec.field(default_factory=list)
    calls: list[ModelCalled] = msgspec.field(default_factory=list)
    answers: list[AssistantMessage] = msgspec.field(default_factory=list)
    results: dict[str, ToolResultRecorded] = msgspec.field(default_factory=dict)
    events: list[Recorded] = msgspec.field(default_factory=list)


def recorded_turns(events: list[Recorded]) -> list[RecordedTurn]:
    """Group a session stream's events into its turns, in the order started."""
    turns: dict[str, RecordedTurn] = {}
    for recorded in events:
        event = recorded.event
        if isinstance(event, TurnStarted):
            turns[event.turn_id] = RecordedTurn(
                turn_id=event.turn_id, position=recorded.position, started=event
            )
            continue
        turn = turns.get(getattr(event, "turn_id", ""))
        if turn is None:
            continue
        turn.events.append(recorded)
        if isinstance(event, MediaAttached):
            turn.media.append(event)
        elif isinstance(event, ModelCalled):
            turn.calls.append(event)
        elif isinstance(event, AssistantMessage):
            turn.answers.append(event)
        elif isinstance(event, ToolResultRecorded):
            turn.results.setdefault(event.call_id, event)
    return list(turns.values())


class ReplayProvider:
    """A Provider answering with a recorded session's model outputs.

    Call :meth:`begin` before each turn; each :meth:`complete` then returns the
    turn's next recorded answer (or raises its recorded failure) and records
    whether the prompt it was given is pairing-valid (every tool result
    answers a call that precedes it).
    """

    def __init__(self, turns: list[RecordedTurn]) -> None:
        self._turns = turns
        self._turn = 0
        self._call = 0
        self._answer = 0
        self.pairing: list[list[bool]] = [[] for _ in turns]
        first = next((c for t in turns for c in t.calls), None)
        self._name = first.provider if first else "replay"
        self._model = first.model if first else "replay"

    @property
    def name(self) -> str:
        """The recorded provider's name."""
        return self._name

    @property
    def model(self) -> str:
        """The recorded model."""
        return self._model

    def begin(self, index: int) -> None:
        """Serve the recorded turn ``index`` from its first model call."""
        self._turn, self._call, self._answer = index, 0, 0

    async def complete(self, request: ChatRequest) -> ChatResponse:
        """Return the recorded answer of this call (or raise its failure).

        Raises:
            ProviderError: The recorded call failed, or the re-run asked for a
                call the recorded turn did not make (``bad_request``).
        """
        turn = self._turns[self._turn]
        self.pairing[self._turn].append(audit_pairing(request.messages).clean)
        if self._call >= len(turn.calls):
            msg = f"the recorded turn made {len(turn.calls)} model calls, not more"
            raise ProviderError(_REFUSED, msg)
        call = turn.calls[self._call]
        self._call += 1
        if not call.success:
            kind, _, rest = (call.error or "server").partition(":")
            known = kind if kind in get_args(ErrorKind) else "server"
            raise ProviderError(cast("ErrorKind", known), rest.strip() or kind)
        if self._answer >= len(turn.answers):
            msg = "the recorded turn has no assistant message for this call"
            raise ProviderError(_REFUSED, msg)
        answer = turn.answers[self._answer]
        self._answer += 1
        return ChatResponse(
            text=answer.text,
            tool_calls=tuple(
                ToolCall(id=c.id, name=c.name, arguments=c.arguments)
                for c in answer.tool_calls
            ),
            usage=Usage(
                input_tokens=call.input_tokens,
                output_tokens=call.output_tokens,
                cached_input_tokens=call.cached_input_tokens,
                cache_write_tokens=call.cache_write_tokens,
                reasoning_tokens=call.reasoning_tokens,
            ),
            model=call.model,
            finish_reason="tool_calls" if answer.tool_calls else "stop",
        )

    async def aclose(self) -> None:
        """Nothing to release."""


class ReplayTool:
    """A Tool returning recorded results: the spec it stands for, no side effect."""

    def __init__(self, spec: ToolSpec, cursor: _TurnCursor) -> None:
        self._spec = spec
        self._cursor = cursor

    @property
    def spec(self) -> ToolSpec:
        """The spec of the tool it stands for."""
        return self._spec

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutcome:
        """Return the recorded result of this call of the current turn."""
        del context  # nothing runs
        result = self._cursor.take(self._spec.name, arguments)
        if result is None:
            return ToolOutcome(
                success=False, error=f"no recorded result for {self._spec.name}"
            )
        if result.success:
            return ToolOutcome(output=result.output)
        return ToolOutcome(success=False, error=result.error or result.output)


class _TurnCursor:
    """The recorded calls of the current turn not yet answered."""

    def __init__(self, turns: list[RecordedTurn]) -> None:
        self._turns = turns
        self._used: set[str] = set()
        self._turn = 0

    def begin(self, index: int) -> None:
        self._turn, self._used = index, set()

    def take(self, name: str, arguments: dict[str, Any]) -> ToolResultRecorded | None:
        turn = self._turns[self._turn]
        for answer in turn.answers:
            for call in answer.tool_calls:
                if call.id in self._used or call.name != name:
                    continue
                try:
                    same = json.loads(call.arguments or "{}") == arguments
                except ValueError:
                    same = False
                if same:
                    self._used.add(call.id)
                    return turn.results.get(call.id)
        return None


def replay_tools(turns: list[RecordedTurn], cursor: _TurnCursor) -> dict[str, Tool]:
    """Replaying tools for the built-in tools and every tool the session called."""
    specs = {name: tool.spec for name, tool in default_tools().items()}
    for turn in turns:
        for answer in turn.answers:
            for call in answer.tool_calls:
                specs.setdefault(call.name, ToolSpec(name=call.name, description=""))
    return {name: ReplayTool(spec, cursor) for name, spec in specs.items()}


def rerun_config(config: Config, data_dir: Path) -> Config:
    """``config``'s policies over a scratch data directory (no configured backends).

    Kept: ``[runtime]``, ``[recall]``, ``[pricing]``, ``[budgets]``. Left at
    their defaults: memory backends and agents (the scratch SQLite store),
    embeddings, telemetry; autosave and hygiene are off.
    """
    return Config(
        data_dir=str(data_dir),
        runtime=config.runtime,
        recall=config.recall,
        pricing=config.pricing,
        budgets=config.budgets,
        memory=MemoryConfig(autosave=False, hygiene_hours=0.0),
    )


def _copy_memory(
    store: EventStore, scratch: EventStore, agent: str, before: int, done: int
) -> int:
    """Copy the agent's memory events recorded before ``before``; return the count."""
    stream = memory_stream_id(agent)
    pending = [
        r.event for r in store.read_stream(stream, after=done) if r.position < before
    ]
    if pending:
        scratch.append(stream, pending, expected_version=done)
    return done + len(pending)


async def _drive(
    store: EventStore,
    ref: SessionRef,
    turns: list[RecordedTurn],
    config: Config,
    scratch: Path,
) -> tuple[list[TurnFacts], list[list[bool]]]:
    provider = ReplayProvider(turns)
    cursor = _TurnCursor(turns)
    url = str(scratch / "rerun.db")
    async with bootstrap(
        config, provider=provider, ledger_url=url, tools=replay_tools(turns, cursor)
    ) as runtime:
        # Recorded results may carry their bound already: rebound, never twice.
        runtime.engine.tools._bound = make_result_bounder(  # noqa: SLF001 - see above
            config.runtime.max_tool_result_chars, recorded=True
        )
        copied = 0
        for index, turn in enumerate(turns):
            copied = await asyncio.to_thread(
                _copy_memory, store, runtime.store, ref.agent, turn.position, copied
            )
            provider.begin(index)
            cursor.begin(index)
            await runtime.engine.run_turn(
                ref.agent,
                ref.key,
                turn.started.user_input,
                origin=turn.started.origin,
                channel=ref.channel,
                attachments=turn.media,
            )
        rerun = recorded_turns(runtime.store.read_stream(ref.stream_id))
    return [facts(t.events) for t in rerun], provider.pairing


def rerun_session(store: EventStore, ref: SessionRef, config: Config) -> RerunReport:
    """Re-run a recorded session's turns offline under ``config``'s policies.

    Args:
        store: The recorded ledger (only read).
        ref: The session.
        config: The policies (runtime limits, recall, pricing, budgets).

    Returns:
        The per-turn comparison of the recorded turns with the re-run.
    """
    turns = recorded_turns(store.read_stream(ref.stream_id))
    with tempfile.TemporaryDirectory(prefix="turnledger-rerun-") as tmp:
        scratch = Path(tmp)
        policies = rerun_config(config, scratch / "data")
        rerun, pairing = asyncio.run(_drive(store, ref, turns, policies, scratch))
    return compare(
        ref,
        recorded=[facts(t.events) for t in turns],
        turn_ids=[t.turn_id for t in turns],
        rerun=rerun,
        pairing=pairing,
        runtime=policies.runtime,
    )
