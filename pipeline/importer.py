"""Importing transcripts into the ledger: one session per conversation.

Every conversation becomes a session stream of ordinary events (user input opens a
turn, assistant messages carry their tool calls, tool results are recorded with
provenance ``imported``, and each system or developer message is a
``system_prompt.set`` event at its place). An assistant message whose model
call the file reports usage for (:attr:`Conversation.usage`) is preceded by a
``model.called`` event of that model, provider and tokens, priced with the
``[pricing]`` rate sheet as the turn engine prices its calls (cost 0 for a
model the sheet lacks); a format that carries no usage gives no
``model.called``: none is invented. A model name the engine would not record
either (longer than :data:`MAX_MODEL_CHARS`, holding a control character or
text the ledger cannot keep) is recorded as ``unknown`` and counted as skipped
(``unrecordable model name``). An empty system message carries
nothing and is counted as skipped. An import writes all its sessions in one
transaction, or nothing.

Import identity: given the source's digest (the SHA-256 of the file read,
:func:`turnledger.pipeline.formats.read.read_transcript_source`), a session's
default key is its conversation's in-file id followed by the digest's first 8
hex digits (``1-3fa2b9c0``), so two different files never share a session, and
each session is appended under the idempotency key
``import:<digest>:<conversation index>:<stream>``: importing the same file again
writes nothing and reports each session ``already_imported``. A session key
that holds events from another source (``--session`` given twice, another
writer) is an :class:`ImportClashError` naming the session; nothing is written.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Final, Literal, TypeAlias

import msgspec

from turnledger.ledger.errors import ConcurrencyError
from turnledger.ledger.events import (
    AssistantMessage,
    Event,
    ModelCalled,
    SessionOpened,
    SystemPromptSet,
    ToolCallRecord,
    ToolResultRecorded,
    TurnCompleted,
    TurnStarted,
)
from turnledger.ledger.ids import CONTROL_CHARACTERS, session_stream_id
from turnledger.ledger.store import Append, EventStore
from turnledger.pipeline.errors import PipelineError
from turnledger.pipeline.formats import Conversation, Coverage, ParsedTranscript
from turnledger.pipeline.formats.model import ModelUsage
from turnledger.policies.messages import Message, ToolResult
from turnledger.policies.paths import sanitize_session_key
from turnledger.policies.pricing import ModelPrice, TokenUsage, price_usage
from turnledger.policies.recordable import text_problem

UNKNOWN = "unknown"
ERROR_PREFIX = "Error: "

MAX_MODEL_CHARS: Final = 200
"""The longest model name recorded (as the turn engine records them)."""

UNRECORDABLE_MODEL = "unrecordable model name"
"""The skipped kind a model name recorded as ``unknown`` counts as."""

DIGEST_CHARS: Final = 8
"""Hex digits of the source's digest a default session key ends with."""

SessionOutcome: TypeAlias = Literal["imported", "already_imported"]
"""What an import did with a session: wrote it, or found it written before."""


class ImportClashError(PipelineError):
    """A session key already holds events that this import did not write.

    Attributes:
        session: The session key.
        agent: Its agent.
        found: The events the session holds.
    """

    def __init__(self, *, agent: str, session: str, found: int) -> None:
        self.agent = agent
        self.session = session
        self.found = found
        super().__init__(
            f"Expected session {agent}/{session} to be new or this file's earlier"
            f" import, found {found} events from another source; pass --session"
            " KEY to import the file under another key"
        )


class ImportedSession(msgspec.Struct, frozen=True, kw_only=True):
    """One session of an import.

    Attributes:
        session: The session key.
        agent: Its agent.
        stream: Its stream id.
        events: The events that record it (written now, or before).
        conversation: The conversation's id in the file.
        outcome: ``imported`` (written now) or ``already_imported`` (the same
            source was imported before: nothing written).
    """

    session: str
    agent: str
    stream: str
    events: int
    conversation: str
    outcome: SessionOutcome = "imported"


class ImportReport(msgspec.Struct, frozen=True, kw_only=True):
    """What an import wrote and what it could not use.

    Attributes:
        format: The transcript's format.
        sessions: Its sessions, in file order.
        skipped: What was left out, by kind, with counts.
        problems: Malformed lines, ``(line, message)``.
        source: The source's SHA-256 (``""`` when none was given).
        written: The events written now (0 when everything was imported before).
        coverage: How every record of the file ended, mapped or accounted for.
    """

    format: str
    sessions: tuple[ImportedSession, ...]
    skipped: dict[str, int]
    problems: tuple[tuple[int, str], ...] = ()
    source: str = ""
    written: int = 0
    coverage: Coverage = msgspec.field(default_factory=Coverage)


class _Builder:
    """Turns one conversation's messages into events."""

    def __init__(self, pricing: Mapping[str, ModelPrice] | None = None) -> None:
        self.pricing: Mapping[str, ModelPrice] = pricing or {}
        self.events: list[Event] = []
        self.turns = 0
        self.turn: str | None = None
        self.names: dict[str, str] = {}
        self.skipped: Counter[str] = Counter()

    def _close(self) -> None:
        if self.turn is not None:
            self.events.append(TurnCompleted(turn_id=self.turn))
            self.turn = None

    def _open(self, text: str) -> str:
        self._close()
        self.turns += 1
        self.turn = f"t{self.turns}"
        self.events.append(
            TurnStarted(turn_id=self.turn, origin="interactive", user_input=text)
        )
        return self.turn

    def _current(self) -> str:
        # Messages before the first user message belong to an implicit turn.
        if self.turn is None:
            self.turn = f"t{self.turns}"
        return self.turn

    def add(self, message: Message, usage: ModelUsage | None = None) -> None:
        if message.role == "system":
            if message.text:
                self.events.append(SystemPromptSet.of(message.text, turn_id=self.turn))
            else:
                self.skipped["empty system message"] += 1
            return
        if message.tool_results:
            self._results(message.tool_results)
            if message.role == "user" and message.text:
                # Words sent with the results (a carrier's text blocks) follow
                # them as the user's next input, so no text is lost.
                self._open(message.text)
            return
        if message.role == "assistant":
            if usage is not None:
                self._model_called(usage)
            self._assistant(message)
        elif message.role == "user":
            self._open(message.text)
        else:
            self.skipped[f"{message.role} message without result"] += 1

    def _model_called(self, usage: ModelUsage) -> None:
        model = usage.model or UNKNOWN
        if not _recordable_name(model):
            self.skipped[UNRECORDABLE_MODEL] += 1
            model = UNKNOWN
        tokens = TokenUsage(
            model=model,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cached_input_tokens=usage.cached_input_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            reasoning_tokens=usage.reasoning_tokens,
        )
        self.events.append(
            ModelCalled(
                turn_id=self._current(),
                provider=usage.provider or UNKNOWN,
                model=model,
                input_tokens=tokens.input_tokens,
                output_tokens=tokens.output_tokens,
                cached_input_tokens=tokens.cached_input_tokens,
                cache_write_tokens=tokens.cache_write_tokens,
                reasoning_tokens=tokens.reasoning_tokens,
                cost_usd=price_usage(tokens, self.pricing).cost_usd,
            )
        )

    def _assistant(self, message: Message) -> None:
        calls = tuple(
            ToolCallRecord(
                id=c.id or UNKNOWN, name=c.name or UNKNOWN, arguments=c.arguments
            )
            for c in message.tool_calls
        )
        for call in calls:
            self.names[call.id] = call.name
        self.events.append(
            AssistantMessage(
                turn_id=self._current(), text=message.text, tool_calls=calls
            )
        )

    def _results(self, results: Sequence[ToolResult]) -> None:
        turn = self._current()
        for r in results:
            call_id = r.call_id or UNKNOWN
            self.events.append(
                ToolResultRecorded(
                    turn_id=turn,
                    call_id=call_id,
                    tool=r.name or self.names.get(call_id, UNKNOWN),
                    success=not r.is_error,
                    output=r.content if not r.is_error else "",
                    error=_error_text(r.content) if r.is_error else None,
                    original_chars=len(r.content),
                    kept_chars=len(r.content),
                    provenance="imported",
                )
            )

    def finish(self) -> list[Event]:
        self._close()
        return self.events


def _recordable_name(model: str) -> bool:
    return (
        len(model) <= MAX_MODEL_CHARS
        and CONTROL_CHARACTERS.search(model) is None
        and text_problem("model", model) is None
    )


def _error_text(content: str) -> str:
    """Return a failed result's error as the ledger keeps it.

    The history shows a failed result as ``"Error: " + error``; a result that was
    exported that way comes back without the prefix, so a round trip is a fixed
    point instead of growing one prefix per pass.
    """
    return content.removeprefix(ERROR_PREFIX)


def conversation_events(
    conversation: Conversation,
    *,
    agent: str,
    session_key: str,
    channel: str = "import",
    pricing: Mapping[str, ModelPrice] | None = None,
) -> tuple[list[Event], Counter[str]]:
    """Return the events that record a conversation, and what was skipped.

    ``pricing`` (``[pricing]``) prices the model calls the file reports usage for.
    """
    builder = _Builder(pricing)
    builder.events.append(
        SessionOpened(agent=agent, session_key=session_key, channel=channel)
    )
    usage = conversation.usage or (None,) * len(conversation.messages)
    for message, used in zip(conversation.messages, usage, strict=True):
        builder.add(message, used)
    return builder.finish(), builder.skipped


def session_keys(
    parsed: ParsedTranscript, session: str | None, *, source: str = ""
) -> list[str]:
    """Return one sanitized session key per conversation.

    ``session`` (``--session``) names them (``KEY``, or ``KEY-1``, ``KEY-2``...
    for several). Otherwise each is its conversation's in-file id (or
    ``conversation-N``), followed by ``-`` and the first :data:`DIGEST_CHARS`
    hex digits of ``source`` when one is given, so keys are unique per source.
    """
    conversations = parsed.conversations
    if session is not None:
        base = sanitize_session_key(session)
        if len(conversations) == 1:
            return [base]
        return [f"{base}-{i}" for i in range(1, len(conversations) + 1)]
    suffix = f"-{source[:DIGEST_CHARS]}" if source else ""
    keys = [
        (sanitize_session_key(c.id) or f"conversation-{i}") + suffix
        for i, c in enumerate(conversations, 1)
    ]
    seen: Counter[str] = Counter()
    unique = []
    for key in keys:
        seen[key] += 1
        unique.append(key if seen[key] == 1 else f"{key}-{seen[key]}")
    return unique


def import_transcript(
    store: EventStore,
    parsed: ParsedTranscript,
    *,
    agent: str = "imported",
    session: str | None = None,
    source: str = "",
    pricing: Mapping[str, ModelPrice] | None = None,
) -> ImportReport:
    """Write every conversation of a transcript as a new session, atomically.

    Args:
        store: The ledger.
        parsed: The transcript.
        agent: The agent the sessions belong to.
        session: The session key (``--session``); default: derived (see
            :func:`session_keys`).
        source: The SHA-256 of the file the transcript was read from; with it,
            default keys are unique per source and importing the same source
            again writes nothing (see the module docstring).
        pricing: The ``[pricing]`` rate sheet the reported model calls are
            priced with (none: each costs 0).

    Raises:
        ImportClashError: A target session already holds events this source's
            import did not write; nothing is written.
        ConcurrencyError: The same, without a ``source`` (no idempotency key
            tells a repeated import from a clash); nothing is written.
        InvalidEventError: A message cannot be recorded; nothing is written.
    """
    skipped: Counter[str] = Counter(parsed.skipped)
    appends: list[Append] = []
    sessions: list[ImportedSession] = []
    keys = session_keys(parsed, session, source=source)
    for index, (conversation, key) in enumerate(
        zip(parsed.conversations, keys, strict=True)
    ):
        events, left_out = conversation_events(
            conversation, agent=agent, session_key=key, pricing=pricing
        )
        skipped.update(left_out)
        stream = session_stream_id(agent, key)
        idempotency = f"import:{source}:{index}:{stream}" if source else None
        appends.append(Append(stream, events, 0, idempotency))
        sessions.append(
            ImportedSession(
                session=key,
                agent=agent,
                stream=str(stream),
                events=len(events),
                conversation=conversation.id,
            )
        )
    # A keyed append to a stream already at a version writes nothing and
    # returns the earlier result; a new stream's append may still be such a
    # replay when another process imported the same file meanwhile: its
    # positions then lie at or below the ledger's position before this one.
    heads = [store.stream_version(a.stream_id) if source else 0 for a in appends]
    before = store.max_position()
    try:
        results = store.append_atomic(appends)
    except ConcurrencyError as clash:
        if not source:
            raise
        named = next(s for s in sessions if s.stream == str(clash.stream_id))
        raise ImportClashError(
            agent=agent, session=named.session, found=clash.found
        ) from None
    replayed = [
        head > 0 or (bool(r.positions) and r.positions[0] <= before)
        for head, r in zip(heads, results, strict=True)
    ]
    sessions = [
        msgspec.structs.replace(s, outcome="already_imported") if again else s
        for s, again in zip(sessions, replayed, strict=True)
    ]
    return ImportReport(
        format=parsed.format,
        sessions=tuple(sessions),
        skipped=dict(sorted(skipped.items())),
        problems=tuple((p.line, p.message) for p in parsed.problems),
        source=source,
        written=sum(s.events for s in sessions if s.outcome == "imported"),
        coverage=parsed.coverage,
    )
