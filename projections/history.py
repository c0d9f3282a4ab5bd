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


class TrimMark(msgspec.Struct, frozen=True, kw_only=True):
    """A trim applied to a session, kept so a rewind can undo (and redo) it.

    Attributes:
        version: The version of the ``history.trimmed`` event.
        through: The trim boundary it set.
        hidden: How many recorded messages it made invisible.
        rewound_by: The version of the rewind that undid it (0: in effect).
    """

    version: int
    through: int
    hidden: int
    rewound_by: int = 0


class SessionHistoryState(msgspec.Struct, frozen=True, kw_only=True):
    """The history of one session.

    Attributes:
        agent: The agent alias (from ``session.opened``).
        session_key: The session key.
        channel: The channel.
        entries: The recorded messages, oldest first: every one in the
            transcript fold; in the history fold only those after the last trim.
        trimmed_through: Entries with a version at or below this are trimmed.
        trimmed_entries: How many recorded messages the trims in effect made
            invisible.
        compacted: Whether this state comes from the compacting fold (a view
            written before compaction existed decodes as ``False`` and is not
            used as a snapshot).
        trims: How many trims are in effect (a rewind to before a trim undoes
            it).
        turns_completed: Turns that ended with a final answer.
        turns_failed: Ids of turns that ended without one.
        open_turn: The turn in progress, if any.
        last_version: The last stream version folded.
        instructions: Every system prompt recorded (``system_prompt.set``), as
            system messages, oldest first; trims never hide them.
        fork_of: The source stream when the session is a fork (``""``: none).
        version_offset: Added to this stream's versions to count them through
            a fork's prefix (0 unless a fork).
        rewinds: How many rewinds were applied.
        rewound: The messages rewinds hid, each with the version of the rewind
            that hid it (a later rewind to before it brings them back).
        trim_marks: Every trim applied, oldest first, in effect or undone.
        missing_through: In the compacting fold, 0 unless a rewind undid a
            trim whose messages it had dropped: entries at or below this
            version may be missing, and readers fold the transcript instead
            (:func:`exact_history`). A later trim through it clears it.
    """

    agent: str = ""
    session_key: str = ""
    channel: str = ""
    entries: tuple[HistoryEntry, ...] = ()
    trimmed_through: int = 0
    trimmed_entries: int = 0
    trims: int = 0
    turns_completed: int = 0
    turns_failed: tuple[str, ...] = ()
    open_turn: str | None = None
    last_version: int = 0
    instructions: tuple[HistoryEntry, ...] = ()
    compacted: bool = False
    fork_of: str = ""
    version_offset: int = 0
    rewinds: int = 0
    rewound: tuple[tuple[int, HistoryEntry], ...] = ()
    trim_marks: tuple[TrimMark, ...] = ()
    missing_through: int = 0


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
                return _trim(
                    state, max(state.trimmed_through, through), version, self.compact
                )
            case ItemsRemoved(first_version=first, last_version=last):
                low, high = first + state.version_offset, last + state.version_offset
                kept = tuple(e for e in state.entries if not low <= e.version <= high)
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


def _trim(
    state: SessionHistoryState, through: int, version: int, compact: bool
) -> SessionHistoryState:
    """Apply a trim boundary; a compacting fold drops what it hid."""
    hidden = sum(
        1 for e in state.entries if state.trimmed_through < e.version <= through
    )
    mark = TrimMark(version=version, through=through, hidden=hidden)
    state = msgspec.structs.replace(
        state,
        trimmed_through=through,
        trimmed_entries=state.trimmed_entries + hidden,
        trims=state.trims + 1,
        trim_marks=(*state.trim_marks, mark),
    )
    return _compact(state) if compact else state


def _compact(state: SessionHistoryState) -> SessionHistoryState:
    """Drop what the trim boundary hides (and forget what is missing below it)."""
    through = state.trimmed_through
    missing = state.missing_through
    return msgspec.structs.replace(
        state,
        entries=tuple(e for e in state.entries if e.version > through),
        rewound=tuple(r for r in state.rewound if r[1].version > through),
        missing_through=0 if missing <= through else missing,
    )


def _other(
    state: SessionHistoryState, recorded: Recorded, version: int
) -> SessionHistoryState:
    """Fold a fork, a rewind or a system prompt (any other event changes nothing)."""
    event = recorded.event
    if isinstance(event, SessionForked):
        return _fork(state, event)
    if isinstance(event, SessionRewound):
        return _rewind(state, event.to_version, version)
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


def _rewind(state: SessionHistoryState, to: int, version: int) -> SessionHistoryState:
    """Go back to the history as of version ``to``; hidden messages are kept.

    Messages after ``to`` are hidden by this rewind (``version``); messages that
    existed at ``to`` but were hidden by a rewind recorded after it come back.
    Trims are treated alike: one recorded after ``to`` is undone (what it hid
    is visible again), one undone by a rewind after ``to`` is in effect again.
    """
    back = tuple(r for r in state.rewound if r[0] > to and r[1].version <= to)
    stay = tuple(r for r in state.rewound if not (r[0] > to and r[1].version <= to))
    hidden = tuple((version, e) for e in state.entries if e.version > to)
    kept = [e for e in state.entries if e.version <= to] + [r[1] for r in back]
    marks = tuple(_rewind_mark(m, to, version) for m in state.trim_marks)
    live = [m for m in marks if not m.rewound_by]
    through = max((m.through for m in live), default=0)
    missing = state.missing_through
    if state.compacted and through < state.trimmed_through:
        missing = max(missing, state.trimmed_through)  # dropped, now visible
    state = msgspec.structs.replace(
        state,
        entries=tuple(sorted(kept, key=lambda e: e.version)),
        rewound=(*stay, *hidden),
        rewinds=state.rewinds + 1,
        open_turn=None,
        trim_marks=marks,
        trimmed_through=through,
        trimmed_entries=sum(m.hidden for m in live),
        trims=len(live),
        missing_through=missing,
    )
    return _compact(state) if state.compacted else state


def _rewind_mark(mark: TrimMark, to: int, version: int) -> TrimMark:
    if not mark.rewound_by and mark.version > to:
        return msgspec.structs.replace(mark, rewound_by=version)
    if mark.rewound_by > to and mark.version <= to:
        return msgspec.structs.replace(mark, rewound_by=0)
    return mark


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
    pending: list[HistoryEntry] = []
    last = state.last_version
    opened = state.open_turn
    for recorded in events:
        event = recorded.event
        if not isinstance(event, wanted):
            continue
        if isinstance(event, _MESSAGE_EVENTS):
            pending.append(
                _message_entry(event, recorded.version + state.version_offset)
            )
            last = recorded.version
            if isinstance(event, TurnStarted):
                opened = event.turn_id
            continue
        state = _flush(state, pending, last, opened)
        pending = []
        state = projection.evolve(state, recorded)
        last, opened = state.last_version, state.open_turn
    return _flush(state, pending, last, opened)


def _flush(
    state: SessionHistoryState,
    pending: list[HistoryEntry],
    last: int,
    opened: str | None,
) -> SessionHistoryState:
    if not pending:
        return state
    return msgspec.structs.replace(
        state,
        entries=(*state.entries, *pending),
        last_version=last,
        open_turn=opened,
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
    return _compact(msgspec.structs.replace(state, compacted=True, missing_through=0))


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
