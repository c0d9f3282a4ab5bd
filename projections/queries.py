"""Query APIs over the projections: how readers get a read model's state.

Readers never fold the ledger their own way. A session's history is its stored
snapshot (the session-history view the runner keeps) plus the session-stream
events after the snapshot's version, folded with the same pure fold: the answer
is exact even when the view lags, and opening a session costs the snapshot plus
what is newer than it, not the session's length. A point-in-time read (``at``)
folds the prefix up to a global position. A fork's history is its source's
prefix plus its own events (:mod:`turnledger.projections.lineage`); the view
cannot fold across streams, so a fork is opened from its lineage, never from a
snapshot. The keyed views (costs, observer,
knowledge) are read through :class:`ReadModels`, which catches them up first.
"""

from __future__ import annotations

from typing import TypeVar
from uuid import UUID

from turnledger.ledger.envelope import Recorded
from turnledger.ledger.ids import memory_stream_id
from turnledger.ledger.store import EventStore
from turnledger.projections.base import Projection, fold
from turnledger.projections.catalog import PROJECTIONS
from turnledger.projections.costs import COST_RECORDS, CostBucket
from turnledger.projections.history import (
    SESSION_HISTORY,
    SESSION_TRANSCRIPT,
    SessionHistory,
    SessionHistoryState,
)
from turnledger.projections.history.fold import exact_history, fold_stream
from turnledger.projections.knowledge import KNOWLEDGE_GRAPH, NodeState
from turnledger.projections.lineage import fork_event, last_version_at, lineage
from turnledger.projections.runner import ProjectionRunner
from turnledger.projections.views import ViewStore

S = TypeVar("S")


class SessionHistories:
    """Read sessions' provider-visible histories and full transcripts.

    Args:
        store: The ledger.
        views: The view store the runner keeps current (``None``: no snapshot;
            every read folds the stream).
    """

    def __init__(self, store: EventStore, views: ViewStore | None = None) -> None:
        self.store = store
        self.views = views
        self.events_read = 0
        """Events decoded by reads so far (how tests see what an open costs)."""

    def snapshot(self, stream_id: UUID) -> SessionHistoryState | None:
        """Return the stored snapshot of a session, if the view holds a usable one."""
        if self.views is None:
            return None
        found = self.views.load(
            SESSION_HISTORY.name, [str(stream_id)], SessionHistoryState
        ).get(str(stream_id))
        if found is None or not found.compacted or found.fork_of:
            return None
        return None if found.missing_through else found

    def get(self, stream_id: UUID, *, at: int | None = None) -> SessionHistoryState:
        """Return a session's history now, or as of global position ``at``."""
        if at is not None:
            return self._fold(SESSION_HISTORY, stream_id, at)
        return self.open(stream_id)[0]

    def open(self, stream_id: UUID) -> tuple[SessionHistoryState, int]:
        """Return a session's history and its stream's head version."""
        base = self.snapshot(stream_id)
        if base is not None:
            return self.advance(stream_id, base, base.last_version)
        if fork_event(self.store.read_stream(stream_id, limit=1)) is None:
            return self.advance(stream_id, SESSION_HISTORY.initial(""), 0)
        return self._exact(stream_id)

    def _exact(self, stream_id: UUID) -> tuple[SessionHistoryState, int]:
        """Fold the whole lineage (a fork, or a rewind that undid a trim)."""
        own = self.store.read_stream(stream_id)
        events = lineage(self.store, stream_id, own=own)
        self.events_read += len(events)
        return exact_history(events), own[-1].version if own else 0

    def advance(
        self, stream_id: UUID, state: SessionHistoryState, after: int
    ) -> tuple[SessionHistoryState, int]:
        """Fold the session's events after version ``after`` into ``state``.

        Returns:
            The new state and the stream's head version (events the history
            does not fold, such as ``model.called``, still move the head).
        """
        tail = self.store.read_stream(stream_id, after=after)
        self.events_read += len(tail)
        if not tail:
            return state, after
        state = fold_stream(SESSION_HISTORY, state, tail)
        if state.missing_through:  # a rewind undid a trim whose messages it dropped
            return self._exact(stream_id)
        return state, tail[-1].version

    def transcript(
        self, stream_id: UUID, *, at: int | None = None
    ) -> SessionHistoryState:
        """Return every recorded message of a session (trimmed ones included)."""
        return self._fold(SESSION_TRANSCRIPT, stream_id, at)

    def _fold(
        self, projection: SessionHistory, stream_id: UUID, at: int | None
    ) -> SessionHistoryState:
        plain = self._plain_prefix(projection, stream_id, at)
        if plain is not None:
            self.events_read += len(plain)
            state = fold_stream(projection, projection.initial(""), plain)
            if not state.missing_through:
                return state
        events = lineage(self.store, stream_id, at=at)
        self.events_read += len(events)
        # A lineage is one stream (prefix events relabeled): folded linearly.
        state = fold_stream(projection, projection.initial(""), events)
        return exact_history(events, state) if state.missing_through else state

    def _plain_prefix(
        self, projection: SessionHistory, stream_id: UUID, at: int | None
    ) -> list[Recorded] | None:
        """A stream that is no fork, up to ``at``: only the events the fold reads.

        The fold skips every other type, so leaving them unread (and undecoded)
        gives the same state; a fork (its lineage composes streams) gives None.
        """
        first = self.store.read_stream(stream_id, limit=1)
        if not first or fork_event(first) is not None:
            return None
        head = self.store.stream_version(stream_id)
        last = head if at is None else last_version_at(self.store, stream_id, at, head)
        if last == 0:
            return []
        return self.store.read_stream(
            stream_id, until=last, types=projection.event_types
        )


def cost_records(
    store: EventStore, *, stream_id: UUID | None = None, at: int | None = None
) -> dict[str, CostBucket]:
    """Return the cost buckets of one session (or the whole ledger) up to ``at``.

    A fork's costs include its source prefix's model calls (what its history
    cost); the whole ledger counts each call once.
    """
    if stream_id is not None:
        return fold(COST_RECORDS, lineage(store, stream_id, at=at))
    return fold(
        COST_RECORDS,
        (
            r
            for r in store.iter_all(types=COST_RECORDS.event_types)
            if at is None or r.position <= at
        ),
    )


def knowledge_graph(store: EventStore, agent: str) -> dict[str, NodeState]:
    """Return an agent's knowledge graph (its captures, on its memory stream)."""
    return fold(KNOWLEDGE_GRAPH, store.read_stream(memory_stream_id(agent)))


class ReadModels:
    """The persisted views of the keyed projections, caught up before each read.

    In-process readers (the CLI) use it so that a read is never stale: the
    runner applies what the view has not seen yet, then the view answers.

    Args:
        store: The ledger.
        views: The view store.
    """

    def __init__(self, store: EventStore, views: ViewStore) -> None:
        self.store = store
        self.views = views
        self.runner = ProjectionRunner(store, views, PROJECTIONS)
        self.histories = SessionHistories(store, views)

    def states(self, projection: Projection[S]) -> dict[str, S]:
        """Return every state of a projection, caught up to the ledger's end."""
        self.runner.catch_up(names=[projection.name])
        return self.views.all(projection.name, projection.state_type)
