"""What the web UI reads, through the query APIs the CLI uses.

Sessions come from :func:`pipeline.sessions.list_sessions`' rule (one
``session.opened`` or ``session.forked`` per session stream); a session's record
is :func:`turnledger.projections.record.read_record`: its lineage (a fork's
source prefix up to the fork point, then its own events, numbered through the
lineage), its transcript (what :func:`pipeline.sessions.load_history` returns:
every recorded message, trimmed ones included, with the trim boundary) and its
cost records; its audit is :func:`pipeline.audit.audit_conversations` over the
same messages ``turnledger audit`` checks. Nothing here folds the ledger.

The ledger is append-only, so what a stream holds up to a version never changes:
:class:`SessionCache` keeps each session's record keyed by its stream's head
version and, when new events arrive, has
:func:`~turnledger.projections.record.advance_record` fold only those.
Point-in-time reads (the scrubber) use :func:`pipeline.sessions.load_history`
and :func:`pipeline.timetravel.replay.replay_session`, the fold of the prefix
``turnledger replay --at`` uses.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from uuid import UUID

import msgspec

from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import (
    MemoryForgotten,
    MemoryStored,
    MemorySuperseded,
    SessionForked,
    TurnStarted,
    tag_of,
)
from turnledger.ledger.store import EventStore
from turnledger.pipeline.audit import audit_conversations
from turnledger.pipeline.sessions import SESSION_STARTS, SessionRef, session_ref_of
from turnledger.projections.costs import CostTotals, grand_total
from turnledger.projections.history import SessionHistoryState
from turnledger.projections.record import (
    SessionRecord,
    advance_record,
    memory_provenance,
    read_record,
)

PAGE_EVENTS = 200
"""Events per timeline page (a 10,000-event session is 50 pages)."""


class SessionData(msgspec.Struct, frozen=True, kw_only=True):
    """One session as of its stream's head version.

    Attributes:
        ref: Where it lives.
        record: Its record (lineage events, transcript, cost states).
        violations: Pairing violations by the lineage version of the message.
        costs: The totals of its model calls (a fork's prefix included).
    """

    ref: SessionRef
    record: SessionRecord
    violations: dict[int, tuple[str, ...]]
    costs: CostTotals

    @property
    def events(self) -> tuple[Recorded, ...]:
        """Its lineage events, oldest first (a fork's source prefix first)."""
        return self.record.events

    @property
    def state(self) -> SessionHistoryState:
        """Its transcript state (``load_history``'s fold)."""
        return self.record.transcript

    @property
    def forked(self) -> SessionForked | None:
        """The fork it begins with (``None``: not a fork)."""
        return self.record.forked

    @property
    def inherited(self) -> int:
        """How many leading events are the fork source's prefix."""
        return self.record.inherited

    @property
    def version(self) -> int:
        """The lineage version of its last event."""
        return self.events[-1].version if self.events else 0

    @property
    def pages(self) -> int:
        """How many timeline pages the events fill (at least one)."""
        return max(1, -(-len(self.events) // PAGE_EVENTS))

    def page_of(self, version: int) -> int:
        """The timeline page (1-based) that holds a lineage version."""
        return max(1, -(-version // PAGE_EVENTS))


def _violations(
    ref: SessionRef, state: SessionHistoryState
) -> dict[int, tuple[str, ...]]:
    name = f"{ref.agent}/{ref.key}"
    report = audit_conversations("ledger", [(name, [e.message for e in state.entries])])
    found: dict[int, tuple[str, ...]] = {}
    for v in report.violations:
        version = state.entries[v.position].version
        found[version] = (*found.get(version, ()), f"{v.kind} {v.id}")
    return found


def _build(ref: SessionRef, record: SessionRecord) -> SessionData:
    return SessionData(
        ref=ref,
        record=record,
        violations=_violations(ref, record.transcript),
        costs=grand_total(record.costs),
    )


class SessionCache:
    """Sessions and their records, kept by head version (thread-safe).

    Args:
        store: The ledger.
        capacity: How many sessions' data to keep.
    """

    def __init__(self, store: EventStore, *, capacity: int = 256) -> None:
        self.store = store
        self.capacity = capacity
        self._lock = threading.Lock()
        self._data: OrderedDict[UUID, SessionData] = OrderedDict()
        self._refs: list[SessionRef] = []
        self._by_id: dict[UUID, SessionRef] = {}
        self._scanned = 0

    def sessions(self) -> list[SessionRef]:
        """Every session in the order opened (new ``session.opened`` read once)."""
        with self._lock:
            top = self.store.max_position()
            if top > self._scanned:
                for r in self.store.iter_all(
                    after=self._scanned, types=SESSION_STARTS, until=top
                ):
                    ref = session_ref_of(r)
                    if ref is not None:
                        self._refs.append(ref)
                        self._by_id[ref.stream_id] = ref
                self._scanned = top
            return list(self._refs)

    def ref(self, stream_id: UUID) -> SessionRef | None:
        """The session with that stream id, if there is one (rescans when unknown)."""
        known = self._by_id.get(stream_id)
        if known is not None:
            return known
        self.sessions()
        return self._by_id.get(stream_id)

    def data(self, ref: SessionRef) -> SessionData:
        """The session as of its head version (new events folded onto the cache)."""
        head = self.store.stream_version(ref.stream_id)
        with self._lock:
            cached = self._data.get(ref.stream_id)
            if cached is not None and cached.record.head == head:
                self._data.move_to_end(ref.stream_id)
                return cached
        record = (
            read_record(self.store, ref.stream_id)
            if cached is None
            else advance_record(self.store, cached.record)
        )
        data = _build(ref, record)
        with self._lock:
            self._data[ref.stream_id] = data
            self._data.move_to_end(ref.stream_id)
            while len(self._data) > self.capacity:
                self._data.popitem(last=False)
        return data


def filter_sessions(
    refs: Sequence[SessionRef], *, agent: str = "", text: str = ""
) -> list[SessionRef]:
    """Sessions of ``agent`` (any when empty) with ``text`` in key, agent or channel."""
    needle = text.casefold()
    return [
        r
        for r in refs
        if (not agent or r.agent == agent)
        and (
            not needle
            or needle in r.key.casefold()
            or needle in r.agent.casefold()
            or needle in r.channel.casefold()
        )
    ]


def anchor(agent: str, key: str) -> str:
    """The HTML id of a memory entry on the memory page (safe for any key)."""
    return "mem-" + hashlib.sha256(f"{agent}\x1f{key}".encode()).hexdigest()[:16]


class MemoryFact(msgspec.Struct, frozen=True, kw_only=True):
    """One memory event of an entry: what happened, where, and from which turn.

    Attributes:
        position: The event's global position.
        action: ``stored``, ``forgotten`` or ``superseded``.
        source: What wrote it.
        session: The session key it names ("" for none).
        stream_id: The session stream holding the turn ("" when none is found).
        turn_id: The turn open at that position in that session ("" for none).
        turn_version: The stream version of that turn's ``turn.started``.
        detail: The supersession target or the forget reason.
    """

    position: int
    action: str
    source: str
    session: str = ""
    stream_id: str = ""
    turn_id: str = ""
    turn_version: int = 0
    detail: str = ""


class MemoryHistory(msgspec.Struct, frozen=True, kw_only=True):
    """An entry's key, its facts oldest first, and whether it is forgotten now."""

    key: str
    facts: tuple[MemoryFact, ...]
    forgotten: bool
    category: str
    importance: float | None


def _turn_at(data: SessionData | None, position: int) -> tuple[str, int]:
    if data is None:
        return "", 0
    found = ("", 0)
    for r in data.events:
        if r.position > position:
            break
        if isinstance(r.event, TurnStarted):
            found = (r.event.turn_id, r.version)
    return found


def memory_histories(cache: SessionCache, agent: str) -> list[MemoryHistory]:
    """Every key of the agent's memory stream with its provenance, newest first."""
    sessions = {r.key: r for r in cache.sessions() if r.agent == agent}
    histories = []
    for key in memory_provenance(cache.store, agent):
        facts = []
        for r in key.events:
            event = r.event
            if not isinstance(event, MemoryStored | MemoryForgotten | MemorySuperseded):
                continue
            session = getattr(event, "session", None) or ""
            ref = sessions.get(session)
            turn, version = _turn_at(cache.data(ref) if ref else None, r.position)
            detail = ""
            if isinstance(event, MemorySuperseded):
                detail = f"by {event.superseded_by}"
            elif isinstance(event, MemoryForgotten):
                detail = event.reason
            facts.append(
                MemoryFact(
                    position=r.position,
                    action=tag_of(type(event)).removeprefix("memory."),
                    source=event.source,
                    session=session,
                    stream_id=str(ref.stream_id) if ref else "",
                    turn_id=turn,
                    turn_version=version,
                    detail=detail,
                )
            )
        histories.append(
            MemoryHistory(
                key=key.key,
                facts=tuple(facts),
                forgotten=key.forgotten,
                category=key.category,
                importance=key.importance,
            )
        )
    return histories
