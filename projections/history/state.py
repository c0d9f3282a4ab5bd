"""The session-history state: what the history fold keeps per session stream.

:mod:`turnledger.projections.history` folds it; this module only defines it
(and the trim marks rewinds undo), so the fold's time-travel part
(:mod:`turnledger.projections.history.rewind`) can share it.
"""

from __future__ import annotations

import msgspec

from turnledger.policies.messages import Message


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
        rewind_log: Every rewind as ``(its version, the version it went back
            to)``, oldest first.
        rewound_instructions: The system prompts rewinds hid (recorded after
            the point a rewind went back to; a redo brings them back).
        missing_through: In the compacting fold, 0 unless a rewind undid a
            trim whose messages it had dropped: entries at or below this
            version may be missing (and the counts of later trims with
            them), so readers fold the transcript instead
            (:func:`exact_history`); it stays set for the session.
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
    rewind_log: tuple[tuple[int, int], ...] = ()
    rewound_instructions: tuple[HistoryEntry, ...] = ()
