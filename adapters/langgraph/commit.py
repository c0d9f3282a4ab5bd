"""Group commit for ``TurnledgerSaver``: writes that overlap share one transaction.

LangGraph saves in the background (``durability="async"``): a task's
``put_writes`` and the next checkpoint's ``put`` run in worker threads while
the graph goes on, so calls arrive while another one is committing. Each call
queues a :class:`Ticket` with the saver's :class:`GroupCommit` and takes the
saver's lock; the caller that gets the lock first takes every queued ticket and
commits them together: per thread, the
tickets' events are built one after another on the cached fold (each seeing the
ones before it), and every thread's events go to the ledger in one
``append_batch`` (one transaction, one fsync). A call returns once the
transaction holding its events has committed, so every write is still durable
on return; the lock is held from the first build to the fold's update, so no
reader sees a write that is not durable.

A conflict (another process moved a thread's stream on) drops that thread's
fold and builds its tickets again on a fold read afresh, after a short pause
(jittered, doubling from 1 ms to 50 ms: two writers that retried at once in
lock step could otherwise lose to each other every time), up to
:data:`RETRIES` times.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from langgraph.checkpoint.serde.base import SerializerProtocol

from turnledger.adapters.langgraph.records import Built
from turnledger.adapters.langgraph.state import ThreadState
from turnledger.adapters.langgraph.threads import Threads
from turnledger.ledger.errors import ConcurrencyError
from turnledger.ledger.events import Event
from turnledger.ledger.store import Append, EventStore

RETRIES: Final = 50
"""Builds of one ticket against a conflicting writer before the conflict is raised
(about 2.3 s of pauses in all)."""

_FIRST_PAUSE: Final = 0.001
_LONGEST_PAUSE: Final = 0.05


def pause(tries: int) -> float:
    """Seconds to wait before build number ``tries + 1`` (0.5x-1.5x, jittered)."""
    nominal = min(_LONGEST_PAUSE, _FIRST_PAUSE * 2.0 ** min(max(0, tries - 1), 30))
    return nominal * (0.5 + random.random())  # noqa: S311 - jitter, not a secret


@dataclass(eq=False)
class Ticket:
    """One saver call's write, queued for the next group."""

    thread_id: str
    build: Callable[[ThreadState], Built]
    done: bool = False
    error: BaseException | None = None
    tries: int = 0


@dataclass
class WriteQueue:
    """The tickets waiting for a group (its own small lock, never held long)."""

    _lock: threading.Lock = field(default_factory=threading.Lock)
    _tickets: list[Ticket] = field(default_factory=list)

    def add(self, ticket: Ticket) -> None:
        """Queue a ticket."""
        with self._lock:
            self._tickets.append(ticket)

    def __len__(self) -> int:
        """How many tickets wait."""
        with self._lock:
            return len(self._tickets)

    def take(self) -> list[Ticket]:
        """Return every queued ticket, oldest first, and empty the queue."""
        with self._lock:
            tickets, self._tickets = self._tickets, []
        return tickets


@dataclass
class _Plan:
    """One thread's part of a group: its events and the tickets they carry."""

    state: ThreadState
    head: int
    events: list[Event]
    tickets: list[Ticket]


class GroupCommit:
    """Commits the saver's tickets, overlapping ones in one transaction.

    Args:
        store: The ledger the events are appended to.
        threads: The threads' folds the tickets are built on (and dropped from
            when their events did not commit).
        lock: The saver's lock: a group is built and written under it.
        serde: LangGraph's serializer, which the folds load values with.
    """

    def __init__(
        self,
        store: EventStore,
        threads: Threads,
        lock: threading.RLock,
        serde: SerializerProtocol,
    ) -> None:
        self.store = store
        self.threads = threads
        self.lock = lock
        self.serde = serde
        self.queue = WriteQueue()

    def commit(self, ticket: Ticket) -> None:
        """Queue ``ticket`` and return once its events are durable (or raise)."""
        self.queue.add(ticket)
        with self.lock:
            if not ticket.done:
                self.flush(self.queue.take())
        if ticket.error is not None:
            raise ticket.error

    def write(self, ticket: Ticket) -> None:
        """Commit ``ticket`` alone, now, without queueing it (under the lock)."""
        self.flush([ticket])
        if ticket.error is not None:
            raise ticket.error

    def flush(self, tickets: list[Ticket]) -> None:
        """Commit ``tickets`` in as few transactions as they allow (under the lock)."""
        pending: dict[str, list[Ticket]] = {}
        for ticket in tickets:
            pending.setdefault(ticket.thread_id, []).append(ticket)
        fresh: set[str] = set()
        solo = False
        while pending:
            plans = self._round(pending, fresh, solo=solo)
            if plans:
                solo = self._write(plans, fresh) or solo
            for thread_id in list(pending):
                left = [t for t in pending[thread_id] if not t.done]
                if left:
                    pending[thread_id] = left
                else:
                    del pending[thread_id]

    def _round(
        self,
        pending: dict[str, list[Ticket]],
        fresh: set[str],
        *,
        solo: bool,
    ) -> list[_Plan]:
        """Plan each pending thread's next run of tickets (one thread when ``solo``)."""
        plans: list[_Plan] = []
        for thread_id, queued in pending.items():
            if solo and plans:
                break
            try:
                state = self.threads.state(thread_id, catch_up=thread_id in fresh)
            except Exception as e:  # noqa: BLE001 - raised to the thread's callers
                for ticket in queued:
                    ticket.error, ticket.done = e, True
                continue
            plan = self._plan(state, queued, fresh=thread_id in fresh)
            fresh.discard(thread_id)
            if plan is None:
                fresh.add(thread_id)  # found nothing on a stale fold: read first
            elif plan.events:
                plans.append(plan)
        return plans

    def _plan(
        self, state: ThreadState, queued: list[Ticket], *, fresh: bool
    ) -> _Plan | None:
        """Build a run of ``queued`` on the thread's fold, applying each to it.

        Returns ``None`` when the first ticket found nothing to write on a fold
        that was not read afresh (the caller reads and builds again).
        """
        plan = _Plan(state, state.head, [], [])
        for ticket in queued:
            if ticket.done:
                continue
            try:
                events, own = ticket.build(state)
            except Exception as e:  # noqa: BLE001 - raised to this ticket's caller
                ticket.error, ticket.done = e, True
                continue
            if not events:
                if plan.tickets:
                    break  # built in the next round, after this group's write
                if not fresh:
                    return None
                ticket.done = True  # nothing to write on a caught-up fold
                continue
            if not state.opened:
                events = [self.threads.opened(state.thread_id), *events]
            for at, event in enumerate(events, start=state.head + 1):
                state.apply(at, event, self.serde, own)
            plan.events.extend(events)
            plan.tickets.append(ticket)
        return plan

    def _write(self, plans: list[_Plan], fresh: set[str]) -> bool:
        """Append the plans in one transaction; returns whether to go one at a time.

        A failure other than a conflict fails a lone plan's tickets; with several
        plans it is not known whose events caused it, so each is tried alone.
        """
        appends = [
            Append(p.state.stream, p.events, expected_version=p.head) for p in plans
        ]
        try:
            results = self.store.append_batch(appends)
        except Exception as e:  # noqa: BLE001 - raised to the tickets' callers
            for plan in plans:
                self.threads.forget(plan.state.thread_id)  # its fold holds what failed
                fresh.add(plan.state.thread_id)
            if len(plans) > 1:
                return True
            for ticket in plans[0].tickets:
                ticket.error, ticket.done = e, True
            return False
        lost = 0  # the most builds a ticket that will be built again has lost
        for plan, result in zip(plans, results, strict=True):
            if not isinstance(result, ConcurrencyError):
                for ticket in plan.tickets:
                    ticket.done = True
                continue
            self.threads.forget(plan.state.thread_id)
            fresh.add(plan.state.thread_id)
            lost = max(lost, _lost(plan.tickets, result))
        if lost:
            time.sleep(pause(lost))
        return False


def _lost(tickets: list[Ticket], conflict: ConcurrencyError) -> int:
    """Count a lost build on each ticket; fail those out of tries; the most left."""
    most = 0
    for ticket in tickets:
        ticket.tries += 1
        if ticket.tries >= RETRIES:
            ticket.error, ticket.done = conflict, True
        else:
            most = max(most, ticket.tries)
    return most
