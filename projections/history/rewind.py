"""Trims and rewinds in the session-history fold: boundaries, undo and redo.

A trim sets a version boundary (kept as a :class:`TrimMark`); a rewind makes
the history exactly what it was as of a version: every message, trim and
system prompt the session recorded is visible after it exactly when it was
visible then (:func:`rewind_effect`), however many rewinds and redos lie
between. The compacting fold drops what a trim hides; when a rewind undoes
such a trim it marks the state ``missing_through`` and readers fold the
transcript instead (:func:`turnledger.projections.history.fold.exact_history`).
"""

from __future__ import annotations

import msgspec

from turnledger.projections.history.state import (
    HistoryEntry,
    SessionHistoryState,
    TrimMark,
)


def trim(
    state: SessionHistoryState, through: int, version: int, compacting: bool
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
    return compact(state) if compacting else state


def compact(state: SessionHistoryState) -> SessionHistoryState:
    """Drop what the trim boundary hides."""
    through = state.trimmed_through
    return msgspec.structs.replace(
        state,
        entries=tuple(e for e in state.entries if e.version > through),
        rewound=tuple(r for r in state.rewound if r[1].version > through),
    )


class RewindEffect(msgspec.Struct, frozen=True, kw_only=True):
    """What a rewind to a version changes in a session's history.

    Attributes:
        hidden: The visible messages it hides.
        restored: The hidden messages it brings back (a redo).
        trims_undone: The trims in effect it undoes.
        trims_redone: The undone trims it puts back in effect.
    """

    hidden: tuple[HistoryEntry, ...]
    restored: tuple[HistoryEntry, ...]
    trims_undone: tuple[TrimMark, ...]
    trims_redone: tuple[TrimMark, ...]


def _visible_at(version: int, at: int, log: tuple[tuple[int, int], ...]) -> bool:
    """Whether what version ``version`` recorded was visible as of version ``at``.

    ``log`` holds each rewind as ``(its version, the version it went back
    to)``. Right after a rewind the history is what it was at its target, so
    the question moves back to the target until no rewind lies between.
    """
    while True:
        last = max((r for r in log if r[0] <= at), default=None)
        if last is None or version > last[0]:
            return version <= at
        at = last[1]


def rewind_effect(state: SessionHistoryState, to: int) -> RewindEffect:
    """Return what a rewind to version ``to`` would change (pure, exact).

    Every message and trim the session recorded is visible after the rewind
    exactly when it was visible as of ``to``, however many rewinds (and
    redos) lie between.
    """
    log = state.rewind_log
    shown = tuple(e for e in state.entries if not _visible_at(e.version, to, log))
    back = tuple(r[1] for r in state.rewound if _visible_at(r[1].version, to, log))
    undone = tuple(
        m
        for m in state.trim_marks
        if not m.rewound_by and not _visible_at(m.version, to, log)
    )
    redone = tuple(
        m for m in state.trim_marks if m.rewound_by and _visible_at(m.version, to, log)
    )
    return RewindEffect(
        hidden=shown, restored=back, trims_undone=undone, trims_redone=redone
    )


def rewind(state: SessionHistoryState, to: int, version: int) -> SessionHistoryState:
    """Go back to the history as of version ``to``; hidden messages are kept.

    What was visible as of ``to`` is visible again and everything else is
    hidden by this rewind (``version``): messages recorded after ``to`` leave,
    messages a later rewind hid come back (a redo), and trims alike: one
    recorded after ``to`` is undone (what it hid is visible again), one that
    was in effect at ``to`` is in effect again; system prompts alike.
    """
    effect = rewind_effect(state, to)
    gone = {e.version for e in effect.hidden}
    back = {e.version for e in effect.restored}
    stay = tuple(r for r in state.rewound if r[1].version not in back)
    kept = [e for e in state.entries if e.version not in gone]
    kept += [r[1] for r in state.rewound if r[1].version in back]
    undone = {m.version for m in effect.trims_undone}
    redone = {m.version for m in effect.trims_redone}
    marks = tuple(
        msgspec.structs.replace(m, rewound_by=version)
        if m.version in undone
        else msgspec.structs.replace(m, rewound_by=0)
        if m.version in redone
        else m
        for m in state.trim_marks
    )
    live = [m for m in marks if not m.rewound_by]
    through = max((m.through for m in live), default=0)
    prompts = sorted(
        (*state.instructions, *state.rewound_instructions), key=lambda e: e.version
    )
    shown = tuple(e for e in prompts if _visible_at(e.version, to, state.rewind_log))
    missing = state.missing_through
    if state.compacted and through < state.trimmed_through:
        missing = max(missing, state.trimmed_through)  # dropped, now visible
    state = msgspec.structs.replace(
        state,
        entries=tuple(sorted(kept, key=lambda e: e.version)),
        rewound=(*stay, *((version, e) for e in effect.hidden)),
        rewinds=state.rewinds + 1,
        rewind_log=(*state.rewind_log, (version, to)),
        open_turn=None,
        trim_marks=marks,
        trimmed_through=through,
        trimmed_entries=sum(m.hidden for m in live),
        trims=len(live),
        missing_through=missing,
        instructions=shown,
        rewound_instructions=tuple(e for e in prompts if e not in shown),
    )
    return compact(state) if state.compacted else state
