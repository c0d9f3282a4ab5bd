"""Importing transcripts into the ledger: one session per conversation.

Every conversation becomes a session stream of ordinary events (user input opens a
turn, assistant messages carry their tool calls, tool results are recorded with
provenance ``imported``, and each system or developer message is a
``system_prompt.set`` event at its place). An empty system message carries
nothing and is counted as skipped. An import writes all its sessions in one
transaction, or nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import msgspec

from turnledger.ledger.events import (
    AssistantMessage,
    Event,
    SessionOpened,
    SystemPromptSet,
    ToolCallRecord,
    ToolResultRecorded,
    TurnCompleted,
    TurnStarted,
)
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import Append, EventStore
from turnledger.pipeline.formats import Conversation, ParsedTranscript
from turnledger.policies.messages import Message, ToolResult
from turnledger.policies.paths import sanitize_session_key

UNKNOWN = "unknown"
ERROR_PREFIX = "Error: "


class ImportedSession(msgspec.Struct, frozen=True, kw_only=True):
    """One session written by an import."""

    session: str
    agent: str
    stream: str
    events: int
    conversation: str


class ImportReport(msgspec.Struct, frozen=True, kw_only=True):
    """What an import wrote and what it could not use."""

    format: str
    sessions: tuple[ImportedSession, ...]
    skipped: dict[str, int]
    problems: tuple[tuple[int, str], ...] = ()


class _Builder:
    """Turns one conversation's messages into events."""

    def __init__(self) -> None:
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

    def add(self, message: Message) -> None:
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
            self._assistant(message)
        elif message.role == "user":
            self._open(message.text)
        else:
            self.skipped[f"{message.role} message without result"] += 1

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


def _error_text(content: str) -> str:
    """Return a failed result's error as the ledger keeps it.

    The history shows a failed result as ``"Error: " + error``; a result that was
    exported that way comes back without the prefix, so a round trip is a fixed
    point instead of growing one prefix per pass.
    """
    return content.removeprefix(ERROR_PREFIX)


def conversation_events(
    conversation: Conversation, *, agent: str, session_key: str, channel: str = "import"
) -> tuple[list[Event], Counter[str]]:
    """Return the events that record a conversation, and what was skipped."""
    builder = _Builder()
    builder.events.append(
        SessionOpened(agent=agent, session_key=session_key, channel=channel)
    )
    for message in conversation.messages:
        builder.add(message)
    return builder.finish(), builder.skipped


def session_keys(parsed: ParsedTranscript, session: str | None) -> list[str]:
    """Return one sanitized session key per conversation."""
    conversations = parsed.conversations
    if session is not None:
        base = sanitize_session_key(session)
        if len(conversations) == 1:
            return [base]
        return [f"{base}-{i}" for i in range(1, len(conversations) + 1)]
    keys = [
        sanitize_session_key(c.id) or f"conversation-{i}"
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
) -> ImportReport:
    """Write every conversation of a transcript as a new session, atomically.

    Raises:
        ConcurrencyError: A target session already has events; nothing is written.
        InvalidEventError: A message cannot be recorded; nothing is written.
    """
    skipped: Counter[str] = Counter(parsed.skipped)
    appends: list[Append] = []
    sessions: list[ImportedSession] = []
    for conversation, key in zip(
        parsed.conversations, session_keys(parsed, session), strict=True
    ):
        events, left_out = conversation_events(
            conversation, agent=agent, session_key=key
        )
        skipped.update(left_out)
        stream = session_stream_id(agent, key)
        appends.append(Append(stream, events, 0))
        sessions.append(
            ImportedSession(
                session=key,
                agent=agent,
                stream=str(stream),
                events=len(events),
                conversation=conversation.id,
            )
        )
    store.append_atomic(appends)
    return ImportReport(
        format=parsed.format,
        sessions=tuple(sessions),
        skipped=dict(sorted(skipped.items())),
        problems=tuple((p.line, p.message) for p in parsed.problems),
    )
