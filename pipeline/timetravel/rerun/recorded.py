"""What a re-run replays: a recorded session's turns, model outputs and tool results.

:class:`ReplayProvider` answers each model call of each turn with the recorded
assistant message (text and tool calls, in order) and usage, or the recorded
failure (a response the recorded turn could not record is answered with
:data:`UNRECORDED`, so the re-run's turn fails alike); :class:`ReplayTool`
returns the recorded result of a call (matched by name and arguments within the
turn, which names the recorded call id). A result the recorded turn never got
from its tool (the process died; the next open synthesized it), or that it has
neither result nor end, is replayed as the same death: :class:`RerunCrash`,
which no ``except Exception`` catches, so the re-run's turn is left open like
the recorded one and the next turn repairs it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final, cast, get_args

import msgspec

from turnledger.ledger.events import (
    AssistantMessage,
    MediaAttached,
    ModelCalled,
    PromptAssembled,
    ToolResultRecorded,
    TurnCompleted,
    TurnFailed,
    TurnStarted,
)
from turnledger.pipeline.errors import PipelineError
from turnledger.pipeline.providers.base import (
    ChatRequest,
    ChatResponse,
    ErrorKind,
    ProviderError,
    ToolSpec,
    Usage,
)
from turnledger.pipeline.tools.base import Tool, ToolContext, ToolOutcome
from turnledger.pipeline.tools.registry import default_tools
from turnledger.policies.messages import ToolCall
from turnledger.policies.pairing import audit_pairing

if TYPE_CHECKING:
    from turnledger.ledger.envelope import Recorded

_REFUSED: ErrorKind = "bad_request"
"""How a call the recorded turn did not make fails."""

UNRECORDED: Final = "\ud800"
"""The text a re-run gets for a response the recorded turn could not record.

That response is not in the ledger (its turn failed with
``unrecordable_response``, nothing of it appended); a lone surrogate, which
UTF-8 cannot encode, makes the re-run's turn fail the same way under any
policy.
"""

__all__ = [
    "NotRerunnableError",
    "RecordedTurn",
    "ReplayProvider",
    "ReplayTool",
    "RerunCrash",
    "TurnCursor",
    "check_rerunnable",
    "recorded_turns",
    "replay_tools",
]


class NotRerunnableError(PipelineError, ValueError):
    """A session lacks what a re-run replays (its model calls); nothing ran."""


class RerunCrash(BaseException):
    """The recorded turn's process died here; the re-run's turn dies alike."""


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


def _origin(channel: str) -> str:
    """Where a session without model calls came from, by its channel."""
    if channel == "import":
        return "was imported from a transcript"
    if channel:
        return f"was written through {channel!r} (an adapter or another writer)"
    return "was not written by the turn engine"


def check_rerunnable(name: str, channel: str, turns: list[RecordedTurn]) -> None:
    """Refuse a session whose turns hold outputs without recorded model calls.

    A re-run answers each model call with the recorded one (its usage, its
    failure) and compares the prompts the engine recorded; a turn with
    assistant messages, tool results or an end but no ``model.called`` event
    (an imported transcript, a framework adapter's session) has neither, so
    a re-run would only report differences it never observed. So has a turn
    whose model calls were recorded without their prompts (a transcript or
    an adapter reporting each response's usage): no ``prompt.assembled``.

    Args:
        name: The session, as shown (``agent/key``).
        channel: The session's channel (``import``, an adapter's name...).
        turns: Its recorded turns.

    Raises:
        NotRerunnableError: Such a turn exists, naming it.
    """
    for number, turn in enumerate(turns, start=1):
        ended = any(
            isinstance(r.event, TurnCompleted | TurnFailed) for r in turn.events
        )
        if not (turn.answers or turn.results or ended):
            continue
        if turn.calls and not any(
            isinstance(r.event, PromptAssembled) for r in turn.events
        ):
            msg = (
                f"session {name} {_origin(channel)}: it has no recorded prompts"
                f" to re-run (turn {number}, {turn.turn_id}, holds model.called"
                " events but no prompt.assembled event)"
            )
            raise NotRerunnableError(msg)
        if turn.calls:
            continue
        msg = (
            f"session {name} {_origin(channel)}: it has no recorded model calls "
            f"to re-run (turn {number}, {turn.turn_id}, holds outputs but no "
            "model.called event)"
        )
        raise NotRerunnableError(msg)


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
        usage = Usage(
            input_tokens=call.input_tokens,
            output_tokens=call.output_tokens,
            cached_input_tokens=call.cached_input_tokens,
            cache_write_tokens=call.cache_write_tokens,
            reasoning_tokens=call.reasoning_tokens,
        )
        if self._answer >= len(turn.answers):
            if self._call == len(turn.calls) and _unrecordable(turn):
                # Its response was never recorded: a stand-in no policy records.
                return ChatResponse(text=UNRECORDED, usage=usage, model=call.model)
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
            usage=usage,
            model=call.model,
            finish_reason="tool_calls" if answer.tool_calls else "stop",
        )

    async def aclose(self) -> None:
        """Nothing to release."""


def _unrecordable(turn: RecordedTurn) -> bool:
    """Whether the turn failed on a model response it could not record."""
    return any(
        isinstance(r.event, TurnFailed) and r.event.kind == "unrecordable_response"
        for r in turn.events
    )


class ReplayTool:
    """A Tool returning recorded results: the spec it stands for, no side effect."""

    def __init__(self, spec: ToolSpec, cursor: TurnCursor) -> None:
        self._spec = spec
        self._cursor = cursor

    @property
    def spec(self) -> ToolSpec:
        """The spec of the tool it stands for."""
        return self._spec

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutcome:
        """Return the recorded result of this call of the current turn.

        Raises:
            RerunCrash: The recorded call's tool never returned: its result
                was synthesized by the repair after the process died, or the
                recorded turn has no result and no end (it died, or a fork
                was made before its results).
        """
        del context  # nothing runs
        result = self._cursor.take(self._spec.name, arguments)
        died = result is None and not self._cursor.ended()
        if died or (result is not None and result.provenance == "synthesized"):
            raise RerunCrash(self._spec.name)
        if result is None:
            return ToolOutcome(
                success=False, error=f"no recorded result for {self._spec.name}"
            )
        if result.success:
            return ToolOutcome(output=result.output)
        return ToolOutcome(success=False, error=result.error or result.output)


class TurnCursor:
    """The recorded calls of the current turn not yet answered."""

    def __init__(self, turns: list[RecordedTurn]) -> None:
        self._turns = turns
        self._used: set[str] = set()
        self._turn = 0

    def begin(self, index: int) -> None:
        """Answer the calls of recorded turn ``index`` from now on."""
        self._turn, self._used = index, set()

    def ended(self) -> bool:
        """Whether the current recorded turn completed or failed."""
        return any(
            isinstance(r.event, TurnCompleted | TurnFailed)
            for r in self._turns[self._turn].events
        )

    def take(self, name: str, arguments: dict[str, Any]) -> ToolResultRecorded | None:
        """Return the recorded result of the first unanswered matching call."""
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


def replay_tools(turns: list[RecordedTurn], cursor: TurnCursor) -> dict[str, Tool]:
    """Replaying tools for the built-in tools and every tool the session called."""
    specs = {name: tool.spec for name, tool in default_tools().items()}
    for turn in turns:
        for answer in turn.answers:
            for call in answer.tool_calls:
                specs.setdefault(call.name, ToolSpec(name=call.name, description=""))
    return {name: ReplayTool(spec, cursor) for name, spec in specs.items()}
