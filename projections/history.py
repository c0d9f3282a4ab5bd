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
for the commands that audit the whole record.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Final, cast

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
    BREADCRUMB_TEXT,
    Message,
    ToolCall,
    ToolResult,
    make_message,
)
from turnledger.projections.history_rewind import (
    RewindEffect,
    compact,
    rewind,
    rewind_effect,
    trim,
)
from turnledger.projections.history_state import (
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
    "compacted",
    "current_instructions",
    "exact_history",
    "fold_stream",
    "history_digest",
    "media_reference",
    "provider_messages",
    "rewind_effect",
    "tool_result_text",
    "visible_messages",
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
                    _message_entry(recorded.event, version),
                )
            case MediaAttached() as media:
                return _attach(state, media)
            case AssistantMessage() | ToolResultRecorded():
                return _append_entry(state, _message_entry(recorded.event, version))
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


_MESSAGE_EVENTS: Final = (TurnStarted, AssistantMessage, ToolResultRecorded)
"""The events that only append one message (what :func:`fold_stream` batches)."""


def _message_entry(
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


def fold_stream(
    projection: SessionHistory,
    state: SessionHistoryState,
    events: Iterable[Recorded],
) -> SessionHistoryState:
    """Fold one session stream's events into its state, in linear time.

    The same fold as ``projection.evolve`` event by event (a test holds the two
    equal), but runs of message events are appended to the entries once, not one
    tuple copy per event, so a long session folds in time linear in its length.
    """
    wanted = projection.event_types
    events = events if isinstance(events, list) else list(events)
    horizon = _horizon(events) if projection.compact else 0
    pending: list[HistoryEntry] = []
    last = state.last_version
    opened = state.open_turn
    offset = state.version_offset
    completed = 0
    kinds: dict[type, int] = {}  # 0 skipped, 1 a message, 2 an end, 3 by evolve
    for recorded in events:
        event = recorded.event
        kind = kinds.get(type(event))
        if kind is None:
            kind = _kind(event, wanted)
            kinds[type(event)] = kind
        if kind == 1:
            said = cast("TurnStarted | AssistantMessage | ToolResultRecorded", event)
            version = recorded.version + offset
            if version <= horizon:  # a later trim hides it: only counted
                entry = HistoryEntry(
                    version=version, turn_id=said.turn_id, message=_TRIMMED_LATER
                )
            else:
                entry = _message_entry(said, version)
            pending.append(entry)
            last = recorded.version
            if isinstance(said, TurnStarted):
                opened = said.turn_id
        elif kind == 2:  # a completed turn: no message, no tuple copy
            completed += 1
            last, opened = recorded.version, None
        elif kind == 3:
            state = _flush(state, pending, last, opened, completed)
            pending, completed = [], 0
            state = projection.evolve(state, recorded)
            last, opened = state.last_version, state.open_turn
            offset = state.version_offset
    return _flush(state, pending, last, opened, completed)


_TRIMMED_LATER: Final = make_message("user", "", kind="normal")
"""What :func:`fold_stream` keeps for a message a later trim hides (never shown)."""


def _horizon(events: list[Recorded]) -> int:
    """The version a compacting fold of ``events`` is sure to drop through.

    The highest trim boundary among them, unless a rewind is among them (it
    may undo a trim) or one of them is not folded in order: messages at or
    below it are dropped by that trim before the fold ends, so only their
    versions (the trims count them) matter. A fork's events count through its
    offset; a boundary is a lineage version, so the horizon is one too.
    """
    horizon = 0
    for event in [r.event for r in events if type(r.event) in _HORIZON_TYPES]:
        if not isinstance(event, HistoryTrimmed):
            return 0
        horizon = max(horizon, event.dropped_through_version)
    return horizon


_HORIZON_TYPES: Final = frozenset(
    {HistoryTrimmed, SessionRewound, SessionForked, ItemsRemoved}
)


def _kind(event: Event, wanted: tuple[type[Event], ...]) -> int:
    """How :func:`fold_stream` folds an event of this type."""
    if not isinstance(event, wanted):
        return 0
    if isinstance(event, _MESSAGE_EVENTS):
        return 1
    return 2 if isinstance(event, TurnCompleted) else 3


def _flush(
    state: SessionHistoryState,
    pending: list[HistoryEntry],
    last: int,
    opened: str | None,
    completed: int,
) -> SessionHistoryState:
    if not pending and not completed:
        return state
    return msgspec.structs.replace(
        state,
        entries=(*state.entries, *pending) if pending else state.entries,
        last_version=last,
        open_turn=opened,
        turns_completed=state.turns_completed + completed,
    )


def exact_history(
    events: Sequence[Recorded], state: SessionHistoryState | None = None
) -> SessionHistoryState:
    """Return one session's history folded from its events (a lineage), exactly.

    Args:
        events: All of the session's events (relabeled as one stream).
        state: The compacting fold of them, when the caller has it already.

    Returns:
        The compacting fold; or, when a rewind undid a trim whose messages
        that fold had dropped (``missing_through``), the transcript fold
        compacted the same way, which still holds them.
    """
    if state is None:
        state = fold_stream(SESSION_HISTORY, SESSION_HISTORY.initial(""), events)
    if not state.missing_through:
        return state
    whole = fold_stream(SESSION_TRANSCRIPT, SESSION_TRANSCRIPT.initial(""), events)
    return compacted(whole)


def compacted(state: SessionHistoryState) -> SessionHistoryState:
    """Return a transcript-fold state as the compacting fold holds it."""
    return compact(msgspec.structs.replace(state, compacted=True, missing_through=0))


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
    if state.trimmed_entries:
        return [make_message("user", BREADCRUMB_TEXT, kind="breadcrumb"), *kept]
    return kept


def current_instructions(state: SessionHistoryState) -> str | None:
    """Return the system prompt in effect (the last one recorded), if any."""
    return state.instructions[-1].message.text if state.instructions else None


def provider_messages(state: SessionHistoryState) -> list[Message]:
    """Return the history as a provider is sent it: system prompts included.

    The recorded system prompts older than the first visible message come first
    (oldest first; a trim never drops them), then the breadcrumb when trims hid
    messages, then the visible messages with any later system prompt in place.
    """
    visible = visible_messages(state)
    if not state.instructions:
        return visible
    kept = [e for e in state.entries if e.version > state.trimmed_through]
    first = kept[0].version if kept else state.last_version + state.version_offset + 1
    lead = [i.message for i in state.instructions if i.version < first]
    later = [i for i in state.instructions if i.version >= first]
    crumb = visible[: len(visible) - len(kept)]
    body: list[Message] = []
    waiting = 0
    for entry in kept:
        while waiting < len(later) and later[waiting].version < entry.version:
            body.append(later[waiting].message)
            waiting += 1
        body.append(entry.message)
    body.extend(i.message for i in later[waiting:])
    return [*lead, *crumb, *body]


SESSION_HISTORY: Final = SessionHistory("session_history", compact=True)
"""The session-history projection: the provider-visible history, bounded."""

SESSION_TRANSCRIPT: Final = SessionHistory("session_transcript", compact=False)
"""The same fold keeping every recorded message (audits of the whole record)."""


_DIGEST_ENCODER: Final = msgspec.json.Encoder()


def history_digest(messages: Sequence[Message]) -> str:
    """Return the digest a prompt records for its history section.

    The turn engine records it when it assembles a prompt; replay re-derives it
    from the ledger and compares.
    """
    return hashlib.sha256(_DIGEST_ENCODER.encode(tuple(messages))).hexdigest()
