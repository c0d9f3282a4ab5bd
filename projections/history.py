"""Session history: the provider-visible history of each session, as a fold.

Per session stream the state keeps the messages the provider has seen (user input
with media as references, assistant messages with their tool calls, tool results as
the model saw them), each with the ledger version that produced it and its size
measured once. Applied trims are kept as a version boundary: what lies at or below
it is no longer provider-visible, and a breadcrumb stands in its place. Pairing
repair and bounding happen at read/export time through the policies, so the record
itself is never rewritten.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Final

import msgspec

from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import (
    AssistantMessage,
    Event,
    HistoryTrimmed,
    ItemsRemoved,
    MediaAttached,
    SessionOpened,
    ToolResultRecorded,
    TurnCompleted,
    TurnFailed,
    TurnStarted,
)
from turnledger.policies.lifecycle import LifecycleDeclaration
from turnledger.policies.messages import (
    BREADCRUMB_TEXT,
    Message,
    ToolCall,
    ToolResult,
    make_message,
)


class HistoryEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One provider-visible message and where it came from.

    Attributes:
        version: The session-stream version of the event that produced it.
        turn_id: The turn it belongs to.
        message: The message (its ``chars`` measured when it was recorded).
    """

    version: int
    turn_id: str
    message: Message


class SessionHistoryState(msgspec.Struct, frozen=True, kw_only=True):
    """The history of one session.

    Attributes:
        agent: The agent alias (from ``session.opened``).
        session_key: The session key.
        channel: The channel.
        entries: Every recorded message, oldest first (trimmed ones included).
        trimmed_through: Entries with a version at or below this are trimmed.
        trims: How many trims were applied.
        turns_completed: Turns that ended with a final answer.
        turns_failed: Ids of turns that ended without one.
        open_turn: The turn in progress, if any.
        last_version: The last stream version folded.
    """

    agent: str = ""
    session_key: str = ""
    channel: str = ""
    entries: tuple[HistoryEntry, ...] = ()
    trimmed_through: int = 0
    trims: int = 0
    turns_completed: int = 0
    turns_failed: tuple[str, ...] = ()
    open_turn: str | None = None
    last_version: int = 0


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
    """The session-history projection (one state per session stream)."""

    name = "session_history"
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

    def keys(self, recorded: Recorded) -> tuple[str, ...]:
        """Every event of a session stream folds into that stream's state."""
        return (str(recorded.stream_id),)

    def initial(self, key: str) -> SessionHistoryState:  # noqa: ARG002 - same for all keys
        """An empty history."""
        return SessionHistoryState()

    def evolve(
        self, state: SessionHistoryState, recorded: Recorded
    ) -> SessionHistoryState:
        """Fold one event into a session's history."""
        state = msgspec.structs.replace(state, last_version=recorded.version)
        match recorded.event:
            case SessionOpened(agent=agent, session_key=key, channel=channel):
                return msgspec.structs.replace(
                    state, agent=agent, session_key=key, channel=channel
                )
            case TurnStarted(turn_id=turn_id, user_input=text):
                return _append(
                    msgspec.structs.replace(state, open_turn=turn_id),
                    recorded.version,
                    turn_id,
                    make_message("user", text, kind="normal"),
                )
            case MediaAttached() as media:
                return _attach(state, media)
            case AssistantMessage(turn_id=turn_id, text=text, tool_calls=calls):
                message = make_message(
                    "assistant",
                    text,
                    tool_calls=tuple(
                        ToolCall(id=c.id, name=c.name, arguments=c.arguments)
                        for c in calls
                    ),
                )
                return _append(state, recorded.version, turn_id, message)
            case ToolResultRecorded() as result:
                message = make_message(
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
                return _append(state, recorded.version, result.turn_id, message)
            case HistoryTrimmed(dropped_through_version=through):
                return msgspec.structs.replace(
                    state,
                    trimmed_through=max(state.trimmed_through, through),
                    trims=state.trims + 1,
                )
            case ItemsRemoved(first_version=first, last_version=last):
                kept = tuple(e for e in state.entries if not first <= e.version <= last)
                return msgspec.structs.replace(state, entries=kept)
            case TurnCompleted():
                return msgspec.structs.replace(
                    state, open_turn=None, turns_completed=state.turns_completed + 1
                )
            case TurnFailed(turn_id=turn_id):
                return msgspec.structs.replace(
                    state, open_turn=None, turns_failed=(*state.turns_failed, turn_id)
                )
            case _:
                return state


def _append(
    state: SessionHistoryState, version: int, turn_id: str, message: Message
) -> SessionHistoryState:
    entry = HistoryEntry(version=version, turn_id=turn_id, message=message)
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


def visible_messages(state: SessionHistoryState) -> list[Message]:
    """Return the provider-visible history: a breadcrumb for trims, then the rest."""
    kept = [e.message for e in state.entries if e.version > state.trimmed_through]
    if state.trims and any(e.version <= state.trimmed_through for e in state.entries):
        return [make_message("user", BREADCRUMB_TEXT, kind="breadcrumb"), *kept]
    return kept


SESSION_HISTORY: Final = SessionHistory()
"""The session-history projection."""


_DIGEST_ENCODER: Final = msgspec.json.Encoder()


def history_digest(messages: Sequence[Message]) -> str:
    """Return the digest a prompt records for its history section.

    The turn engine records it when it assembles a prompt; replay re-derives it
    from the ledger and compares.
    """
    return hashlib.sha256(_DIGEST_ENCODER.encode(tuple(messages))).hexdigest()
