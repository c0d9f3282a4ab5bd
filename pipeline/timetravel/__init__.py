"""Time travel as events: resolve ``--at``, fork a session, rewind one, list forks.

Nothing here copies or deletes: a fork is one ``session.forked`` event on the
new session's stream naming the source stream and version; a rewind is one
``session.rewound`` event (plus, under the ``supersede`` rule, one
``memory.superseded`` event per long-term memory entry the rewound turns
wrote). Readers compose and fold (:mod:`turnledger.projections.lineage`).
"""

from __future__ import annotations

from typing import Final, Literal
from uuid import UUID

import msgspec

from turnledger.ledger.envelope import Recorded
from turnledger.ledger.errors import ConcurrencyError, quote_value
from turnledger.ledger.events import (
    Event,
    MemoryForgotten,
    MemoryStored,
    MemorySuperseded,
    SessionForked,
    SessionOpened,
    SessionRewound,
)
from turnledger.ledger.ids import memory_stream_id, session_stream_id
from turnledger.ledger.store import EventStore
from turnledger.pipeline.appending import append_decided
from turnledger.pipeline.sessions import SessionRef, list_sessions
from turnledger.pipeline.timetravel.pointintime import (
    TimeTravelError,
    parse_position,
    resolve_at,
)
from turnledger.policies.paths import sanitize_session_key
from turnledger.projections.history import rewind_effect
from turnledger.projections.lineage import (
    history_version,
    lineage,
    locate,
    segments,
)
from turnledger.projections.queries import SessionHistories

MemoryRule = Literal["keep", "supersede"]
"""What a rewind does with the long-term memory its rewound turns wrote."""

MEMORY_RULES: Final[tuple[MemoryRule, ...]] = ("keep", "supersede")


def as_memory_rule(value: str) -> MemoryRule:
    """Return ``value`` as a memory rule.

    Raises:
        TimeTravelError: It is neither ``keep`` nor ``supersede``.
    """
    for rule in MEMORY_RULES:
        if value == rule:
            return rule
    msg = f"Expected a memory rule of {', '.join(MEMORY_RULES)}, found {value!r}"
    raise TimeTravelError(msg)


class ForkReport(msgspec.Struct, frozen=True, kw_only=True):
    """A fork made.

    Attributes:
        session: The new session's key.
        agent: Its agent.
        stream: Its stream id.
        source: The source session's key.
        source_stream: The source stream id.
        source_version: The last source-stream version in the fork.
        at: The global position forked at.
        position: The global position of the fork event.
    """

    session: str
    agent: str
    stream: str
    source: str
    source_stream: str
    source_version: int
    at: int
    position: int


def fork_session(
    store: EventStore,
    source: SessionRef,
    at: str,
    *,
    new_key: str | None = None,
    agent: str | None = None,
) -> ForkReport:
    """Fork ``source`` as of ``at``: one ``session.forked`` event, nothing copied.

    Args:
        store: The ledger.
        source: The session forked.
        at: A position, a turn id or an ISO time (:func:`resolve_at`).
        new_key: The fork's session key (default ``<key>-fork-<n>``).
        agent: The fork's agent (default the source's).

    Raises:
        TimeTravelError: ``at`` names nothing in the session, or the new
            session exists already.
    """
    position = parse_position(at)
    if position is None:
        position = resolve_at(lineage(store, source.stream_id), at)
    point = locate(store, source.stream_id, position)
    if point is None:
        msg = (
            "Expected a point at or after the session's first event, found "
            f"{quote_value(at)}"
        )
        raise TimeTravelError(msg)
    alias = agent or source.agent
    key = _new_key(store, alias, source.key) if new_key is None else new_key
    if sanitize_session_key(key) != key or not key:
        msg = (
            f"Expected a session key of letters, digits, '-', '_' or '.', found {key!r}"
        )
        raise TimeTravelError(msg)
    stream = session_stream_id(alias, key)
    event = SessionForked(
        agent=alias,
        session_key=key,
        source_stream=str(point.stream_id),
        source_version=point.version,
        source_position=point.position,
        base_version=point.history_version,
        channel=source.channel,
    )
    try:
        result = store.append(stream, [event], expected_version=0)
    except ConcurrencyError:
        msg = f"Expected a new session key, found session {key!r} of {alias!r} exists"
        raise TimeTravelError(msg) from None
    return ForkReport(
        session=key,
        agent=alias,
        stream=str(stream),
        source=source.key,
        source_stream=str(point.stream_id),
        source_version=point.version,
        at=position,
        position=result.positions[0],
    )


def _new_key(store: EventStore, agent: str, key: str) -> str:
    n = 1
    while store.stream_version(session_stream_id(agent, f"{key}-fork-{n}")):
        n += 1
    return f"{key}-fork-{n}"


class RewindReport(msgspec.Struct, frozen=True, kw_only=True):
    """A rewind made.

    Attributes:
        session: The session's key.
        to: The global position rewound to.
        to_version: The history version rewound to.
        position: The global position of the rewind event.
        turns: The turns rewound (no longer provider-visible).
        restored: How many messages came back (a redo).
        hidden: How many messages were hidden.
        memory_rule: The rule applied to the rewound turns' memory writes.
        memory_keys: The memory keys those turns wrote (still live).
        superseded: The keys superseded by the rule.
        trims_undone: How many trims recorded after the point it undid
            (what they hid is visible again).
        trims_redone: How many trims a rewind after the point had undone
            and this one puts back in effect.
    """

    session: str
    to: int
    to_version: int
    position: int
    turns: tuple[str, ...]
    restored: int
    hidden: int
    memory_rule: MemoryRule
    memory_keys: tuple[str, ...]
    superseded: tuple[str, ...]
    trims_undone: int = 0
    trims_redone: int = 0


def rewind_session(
    store: EventStore, ref: SessionRef, to: str, *, memory_rule: MemoryRule = "keep"
) -> RewindReport:
    """Rewind a session to ``to``: its history becomes what it was then.

    Messages recorded after the point leave the provider-visible history, and
    trims recorded after it are undone (what they hid is visible again); a
    rewind to a point after an earlier rewind's brings both back (redo).

    Args:
        store: The ledger.
        ref: The session.
        to: A position, a turn id (kept: the history as that turn ended) or an
            ISO time (:func:`resolve_at`).
        memory_rule: ``keep`` the rewound turns' memory writes, or
            ``supersede`` each live one (a ``memory.superseded`` event).

    Raises:
        TimeTravelError: A turn is open, or the rewind would change nothing.
    """
    as_memory_rule(memory_rule)
    chain = segments(store, ref.stream_id)
    events = [r for s in chain for r in s.events]
    position = resolve_at(events, to)
    version = history_version(chain, position)
    state, head = SessionHistories(store).open(ref.stream_id)
    if state.open_turn is not None:
        msg = f"Expected a session between turns, found turn {state.open_turn!r} open"
        raise TimeTravelError(msg)
    effect = rewind_effect(state, version)
    hidden, back = effect.hidden, effect.restored
    undone, redone = effect.trims_undone, effect.trims_redone
    if not hidden and not back and not undone and not redone:
        msg = f"Expected a point before the session's history end, found {to!r}"
        raise TimeTravelError(msg)
    turns = tuple(dict.fromkeys(e.turn_id for e in hidden if e.turn_id))
    keys = _memory_keys(store, ref.agent, events, turns)
    superseded = keys if memory_rule == "supersede" else ()
    event = SessionRewound(
        to_version=version,
        to_position=position,
        turns=turns,
        memory_rule=memory_rule,
        superseded=superseded,
    )
    result = store.append(ref.stream_id, [event], expected_version=head)
    if superseded:
        _supersede(store, ref, superseded, turns)
    return RewindReport(
        session=ref.key,
        to=position,
        to_version=version,
        position=result.positions[0],
        turns=turns,
        restored=len(back),
        hidden=len(hidden),
        memory_rule=memory_rule,
        memory_keys=keys,
        superseded=superseded,
        trims_undone=len(undone),
        trims_redone=len(redone),
    )


def _memory_keys(
    store: EventStore, agent: str, events: list[Recorded], turns: tuple[str, ...]
) -> tuple[str, ...]:
    """Return the live memory keys written while the rewound turns ran."""
    spans: dict[str, list[int]] = {}
    for r in events:
        turn = getattr(r.event, "turn_id", None)
        if turn in turns:
            spans.setdefault(turn, []).append(r.position)
    ranges = [(min(p), max(p)) for p in spans.values()]
    sessions = {
        e.session_key
        for r in events
        if isinstance(e := r.event, SessionOpened | SessionForked)
    }
    live: dict[str, bool] = {}
    written: list[str] = []
    for r in store.read_stream(memory_stream_id(agent)):
        match r.event:
            case MemoryStored(key=key, session=session):
                live[key] = True
                inside = any(lo <= r.position <= hi for lo, hi in ranges)
                if inside and (session is None or session in sessions):
                    written.append(key)
            case MemoryForgotten(key=key) | MemorySuperseded(key=key):
                live[key] = False
            case _:
                pass
    return tuple(k for k in dict.fromkeys(written) if live.get(k))


def _supersede(
    store: EventStore, ref: SessionRef, keys: tuple[str, ...], turns: tuple[str, ...]
) -> None:
    stream: UUID = memory_stream_id(ref.agent)
    reason = f"rewound turns {', '.join(turns)} of session {ref.key}"

    def decide(_head: int) -> list[Event]:
        return [
            MemorySuperseded(
                agent=ref.agent,
                key=key,
                superseded_by=f"rewind:{ref.key}",
                source="cli",
                reason=reason,
            )
            for key in keys
        ]

    append_decided(store, stream, decide)


class ForkNode(msgspec.Struct, frozen=True, kw_only=True):
    """A session in a fork tree.

    Attributes:
        session: Its key.
        agent: Its agent.
        stream: Its stream id.
        source_version: The source version it forked at (0 for the root).
        forks: Its forks, oldest first.
    """

    session: str
    agent: str
    stream: str
    source_version: int = 0
    forks: tuple[ForkNode, ...] = ()


def fork_tree(store: EventStore, ref: SessionRef) -> ForkNode:
    """Return the tree of forks of the session ``ref`` descends from (its root)."""
    parents: dict[UUID, tuple[UUID, int]] = {}
    for r in store.iter_all(types=[SessionForked]):
        if isinstance(r.event, SessionForked):
            parents[r.stream_id] = (UUID(r.event.source_stream), r.event.source_version)
    root = ref.stream_id
    while root in parents:
        root = parents[root][0]
    refs = {s.stream_id: s for s in list_sessions(store)}

    def node(stream: UUID, version: int) -> ForkNode:
        children = [(c, v) for c, (p, v) in parents.items() if p == stream]
        found = refs.get(stream)
        return ForkNode(
            session=found.key if found else str(stream),
            agent=found.agent if found else "",
            stream=str(stream),
            source_version=version,
            forks=tuple(node(c, v) for c, v in children),
        )

    return node(root, 0)


__all__ = [
    "MEMORY_RULES",
    "ForkNode",
    "ForkReport",
    "MemoryRule",
    "RewindReport",
    "TimeTravelError",
    "as_memory_rule",
    "fork_session",
    "fork_tree",
    "lineage",
    "resolve_at",
    "rewind_session",
]
