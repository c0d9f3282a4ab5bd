"""Session history: the provider-visible history of each session, as a fold.

Per session stream the state keeps the messages the provider has seen (user input
with media as references, assistant messages with their tool calls, tool results as
the model saw them), each with the ledger version that produced it and its size
measured once. Applied trims are kept as a version boundary: what lies at or below
it is no longer provider-visible, and a breadcrumb stands in its place. Pairing
repair and bounding happen at read/export time through the policies, so the record
itself is never rewritten.

Two instances of the fold: :data:`SESSION_HISTORY` (the read model the engine and
readers use, persisted as the session's snapshot) drops the entries a trim made
invisible and keeps only their count, so its size is bounded by what the provider
sees, not by the session's length; :data:`SESSION_TRANSCRIPT` keeps every entry,
for the commands that audit the whole record. This module is the fold event by
event; folding a whole stream at once is :mod:`turnledger.projections.history.fold`
and reading a state out (provider messages, the digest) is
:mod:`turnledger.projections.history.read`.
"""

from __future__ import annotations

from typing import Final

import msgspec

from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import (
    AssistantMessage,
    Event,
    HistoryTrimmed,
    ItemsRemoved,
    MediaAttached,
    SessionForked,
    SessionOpened,
    SessionRewound,
    SystemPromptSet,
    ToolResultRecorded,
    TurnCompleted,
    TurnFailed,
    TurnStarted,
)
from turnledger.policies.lifecycle import LifecycleDeclaration
from turnledger.policies.messages import (
    Message,
    ToolCall,
    ToolResult,
    make_message,
)
from turnledger.projections.history.rewind import (
    RewindEffect,
    rewind,
    rewind_effect,
    trim,
)
from turnledger.projections.history.state import (
    HistoryEntry,
    SessionHistoryState,
    TrimMark,
)

__all__ = [
    "HISTORY_EVENT_TYPES",
    "SESSION_HISTORY",
    "SESSION_TRANSCRIPT",
    "HistoryEntry",
    "RewindEffect",
    "SessionHistory",
    "SessionHistoryState",
    "TrimMark",
    "media_reference",
    "message_entry",
    "rewind_effect",
    "tool_result_text",
]


HISTORY_EVENT_TYPES: Final[tuple[type[Event], ...]] = (
    SessionOpened,
    TurnStarted,
    MediaAttached,
    AssistantMessage,
    ToolResultRecorded,
    HistoryTrimmed,
    ItemsRemoved,
    TurnCompleted,
    TurnFailed,
    SystemPromptSet,
    SessionForked,
    SessionRewound,
)


def tool_result_text(event: ToolResultRecorded) -> str:
    """Return the model-visible text of a tool result (reference §6.2)."""
    if event.success:
        return event.output or "(no output)"
    return f"Error: {event.error or event.output}"


def media_reference(event: MediaAttached) -> str:
    """Return how an attachment appears in the user's message: a reference."""
    ref = event.storage_ref or f"sha256:{event.sha256}"
    if event.kind == "image":
        return f"[IMAGE:{ref}]"
    size = f"{event.mime}, {event.size_bytes} bytes"
    return f"[{event.kind.upper()}:{event.file_name} ({size}) {ref}]"


class SessionHistory:
    """The session-history projection (one state per session stream).

    Args:
        name: The projection's name (its view rows and tracking).
        compact: Drop the entries a trim made invisible (keeping their count).
    """

    state_type = SessionHistoryState
    event_types = HISTORY_EVENT_TYPES
    lifecycle = LifecycleDeclaration(
        surface="Session history",
        owner="projections.history (fold of the session stream)",
        durability="session",
        scope="session",
        reviewers_check=(
            "History keeps conversation continuity; it is not the store of user "
            "preferences, configuration or files. Tool-call/result pairing is "
            "repaired on export, never by rewriting the record."
        ),
    )

    def __init__(self, name: str, *, compact: bool) -> None:
        self.name = name
        self.compact = compact

    def keys(self, recorded: Recorded) -> tuple[str, ...]:
        """Every event of a session stream folds into that stream's state."""
        return (str(recorded.stream_id),)

    def initial(self, key: str) -> SessionHistoryState:  # noqa: ARG002 - same for all keys
        """An empty history."""
        return SessionHistoryState(compacted=self.compact)

    def evolve(
        self, state: SessionHistoryState, recorded: Recorded
    ) -> SessionHistoryState:
        """Fold one event into a session's history."""
        state = msgspec.structs.replace(state, last_version=recorded.version)
        version = recorded.version + state.version_offset
        match recorded.event:
            case SessionOpened(agent=agent, session_key=key, channel=channel):
                return msgspec.structs.replace(
                    state, agent=agent, session_key=key, channel=channel
                )
            case TurnStarted(turn_id=turn_id):
                return _append_entry(
                    msgspec.structs.replace(state, open_turn=turn_id),
                    message_entry(recorded.event, version),
                )
            case MediaAttached() as media:
                return _attach(state, media)
            case AssistantMessage() | ToolResultRecorded():
                return _append_entry(state, message_entry(recorded.event, version))
            case HistoryTrimmed(dropped_through_version=through):
                return trim(
                    state, max(state.trimmed_through, through), version, self.compact
                )
            case ItemsRemoved(first_version=first, last_version=last):
                low, high = first + state.version_offset, last + state.version_offset
                kept = tuple(e for e in state.entries if not low <= e.version <= high)
                # What a rewind hid is removed too: no redo brings it back.
                hid = tuple(r for r in state.rewound if not low <= r[1].version <= high)
                return msgspec.structs.replace(state, entries=kept, rewound=hid)
            case TurnCompleted():
                return msgspec.structs.replace(
                    state, open_turn=None, turns_completed=state.turns_completed + 1
                )
            case TurnFailed(turn_id=turn_id):
                return msgspec.structs.replace(
                    state, open_turn=None, turns_failed=(*state.turns_failed, turn_id)
                )
            case _:
                return _other(state, recorded, version)


def _result_message(result: ToolResultRecorded) -> Message:
    """Return a tool result as the model saw it."""
    return make_message(
        "tool",
        tool_results=(
            ToolResult(
                call_id=result.call_id,
                content=tool_result_text(result),
                is_error=not result.success,
                name=result.tool,
            ),
        ),
    )


def _other(
    state: SessionHistoryState, recorded: Recorded, version: int
) -> SessionHistoryState:
    """Fold a fork, a rewind or a system prompt (any other event changes nothing)."""
    event = recorded.event
    if isinstance(event, SessionForked):
        return _fork(state, event)
    if isinstance(event, SessionRewound):
        return rewind(state, event.to_version, version)
    if not isinstance(event, SystemPromptSet):
        return state
    entry = HistoryEntry(
        version=version,
        turn_id=event.turn_id or "",
        message=make_message("system", event.text),
    )
    return msgspec.structs.replace(state, instructions=(*state.instructions, entry))


def _fork(state: SessionHistoryState, forked: SessionForked) -> SessionHistoryState:
    """Start a fork's own part on top of the source prefix folded before it."""
    return msgspec.structs.replace(
        state,
        agent=forked.agent,
        session_key=forked.session_key,
        channel=forked.channel,
        fork_of=forked.source_stream,
        version_offset=forked.base_version,
        open_turn=None,
    )


def message_entry(
    event: TurnStarted | AssistantMessage | ToolResultRecorded, version: int
) -> HistoryEntry:
    """Return the history entry a message-producing event appends."""
    match event:
        case TurnStarted(turn_id=turn_id, user_input=text):
            message = make_message("user", text, kind="normal")
        case AssistantMessage(turn_id=turn_id, text=text, tool_calls=calls):
            message = make_message(
                "assistant",
                text,
                tool_calls=tuple(
                    ToolCall(id=c.id, name=c.name, arguments=c.arguments) for c in calls
                ),
            )
        case ToolResultRecorded(turn_id=turn_id):
            message = _result_message(event)
    return HistoryEntry(version=version, turn_id=turn_id, message=message)


def _append_entry(
    state: SessionHistoryState, entry: HistoryEntry
) -> SessionHistoryState:
    return msgspec.structs.replace(state, entries=(*state.entries, entry))


def _attach(state: SessionHistoryState, media: MediaAttached) -> SessionHistoryState:
    """Add a media reference to the turn's user message."""
    for index in range(len(state.entries) - 1, -1, -1):
        entry = state.entries[index]
        if entry.turn_id == media.turn_id and entry.message.role == "user":
            text = f"{entry.message.text}\n{media_reference(media)}".lstrip("\n")
            updated = msgspec.structs.replace(
                entry, message=make_message("user", text, kind="normal")
            )
            entries = (*state.entries[:index], updated, *state.entries[index + 1 :])
            return msgspec.structs.replace(state, entries=entries)
    return state


SESSION_HISTORY: Final = SessionHistory("session_history", compact=True)
"""The session-history projection: the provider-visible history, bounded."""

SESSION_TRANSCRIPT: Final = SessionHistory("session_transcript", compact=False)
"""The same fold keeping every recorded message (audits of the whole record)."""
