"""The projection runner: follows the ledger and keeps every read model current.

Every read model kept by tracking position (a view-store projection, a memory
backend) is a :class:`Tracked` target, and :func:`catch_up` is the one catch-up
loop over them: it reads the ledger in pages of the target's event types after
its position and hands each page to the target with the position reached, which
the target stores with the page's effects (in one transaction where it has
them), so a catch-up killed at any moment resumes where it stopped and never
applies an event twice. Runners in several processes may catch the same target
up at once: a page another one applied first is refused
(:class:`~turnledger.projections.views.TrackingConflictError`) and the loop goes
on from the position that one reached. Nothing else pages the ledger for catch-up
(``tests/test_architecture.py`` checks it).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import Event
from turnledger.ledger.store import EventStore
from turnledger.projections.base import Projection, fold
from turnledger.projections.views import TrackingConflictError, ViewStore

Progress = Callable[[str, int, int], None]
"""Called as ``progress(target name, position reached, target position)``."""

PAGE_SIZE = 500
"""Events read per page by default."""


class Tracked(Protocol):
    """A read model kept in step with the ledger by a tracking position.

    Attributes:
        name: What progress reports call it.
        event_types: The event types it reads (the page filter).
    """

    name: str
    event_types: tuple[type[Event], ...]

    def position(self) -> int:
        """Return the last ledger position applied (0: none)."""
        ...

    def accepts(self, recorded: Recorded) -> bool:
        """Return whether an event of its types is its own (a backend's agents)."""
        ...

    def apply(self, page: Sequence[Recorded], reached: int) -> None:
        """Apply a page of accepted events and store ``reached`` as the position."""
        ...


def catch_up(
    store: EventStore,
    target: Tracked,
    *,
    until: int | None = None,
    page_size: int = PAGE_SIZE,
    progress: Progress | None = None,
) -> int:
    """Apply every event after the target's position up to ``until``.

    Args:
        store: The ledger.
        target: The read model.
        until: The last position to apply (default: the ledger's head now).
        page_size: Events read per page.
        progress: Called after each page.

    Returns:
        How many events were applied (accepted ones).
    """
    head = store.max_position() if until is None else until
    position = target.position()
    applied = 0
    while position < head:
        page = store.read_all(
            after=position, limit=page_size, types=target.event_types, until=head
        )
        # With a type filter, a short page means nothing more matches up to the
        # head: the position moves to the head, not to the last match.
        reached = head if len(page) < page_size else page[-1].position
        kept = [r for r in page if target.accepts(r)]
        try:
            target.apply(kept, reached)
        except TrackingConflictError:
            # Another runner (process) applied past here first: go on from it.
            position = target.position()
            continue
        applied += len(kept)
        position = reached
        if progress is not None:
            progress(target.name, position, head)
    return applied


class ViewTarget:
    """A keyed-fold projection whose states live in a view store.

    Args:
        views: The view store (states and tracking positions).
        projection: The projection.
    """

    def __init__(self, views: ViewStore, projection: Projection[Any]) -> None:
        self.views = views
        self.projection = projection
        self.name = projection.name
        self.event_types = projection.event_types
        self._at = 0  # the position the states it loads must be at

    def position(self) -> int:
        """The projection's tracking position in the view store."""
        self._at = self.views.tracking(self.name)
        return self._at

    def accepts(self, recorded: Recorded) -> bool:  # noqa: ARG002 - every event of its types
        """Every event of the projection's types is folded."""
        return True

    def apply(self, page: Sequence[Recorded], reached: int) -> None:
        """Fold one page into the stored states; commit them with ``reached``.

        Raises:
            TrackingConflictError: Another runner moved the tracking position
                since this one read it (the states loaded may already hold some
                of the page), or commits first; nothing is written.
        """
        projection = self.projection
        keys = {k for recorded in page for k in projection.keys(recorded)}
        states = self.views.load(self.name, keys, projection.state_type)
        found = self.views.tracking(self.name)
        if found != self._at:
            msg = f"Expected {self.name} at {self._at}, found {found}"
            raise TrackingConflictError(msg)
        changed = fold(projection, page, states)
        self.views.commit(
            self.name, {k: changed[k] for k in keys if k in changed}, reached
        )
        self._at = reached


class ProjectionRunner:
    """Keeps projections' views in step with the ledger.

    Args:
        store: The ledger.
        views: Where states and tracking positions are kept.
        projections: The projections to run.
    """

    def __init__(
        self,
        store: EventStore,
        views: ViewStore,
        projections: Sequence[Projection[Any]],
    ) -> None:
        self.store = store
        self.views = views
        self.projections = {p.name: p for p in projections}

    def catch_up(
        self,
        *,
        names: Sequence[str] | None = None,
        page_size: int = PAGE_SIZE,
        progress: Progress | None = None,
    ) -> dict[str, int]:
        """Apply every event not yet applied; return events applied per projection."""
        head = self.store.max_position()
        return {
            name: catch_up(
                self.store,
                ViewTarget(self.views, self.projections[name]),
                until=head,
                page_size=page_size,
                progress=progress,
            )
            for name in names or list(self.projections)
        }

    def rebuild(
        self,
        *,
        names: Sequence[str] | None = None,
        page_size: int = PAGE_SIZE,
        progress: Progress | None = None,
    ) -> dict[str, int]:
        """Drop views and replay the whole ledger into them."""
        for name in names or list(self.projections):
            self.views.reset(name)
        return self.catch_up(names=names, page_size=page_size, progress=progress)

    def work(
        self,
        stop: threading.Event,
        *,
        page_size: int = PAGE_SIZE,
        poll_interval: float = 0.05,
        on_lock: Callable[[str], None] | None = None,
    ) -> None:
        """Run as a projection worker until ``stop`` is set.

        Each projection is run by one worker at a time: this worker takes the
        projections whose lock it gets, keeps trying for the others (standing by
        for a worker that dies), and applies new events as they arrive. Safe to
        kill at any moment: tracking makes a restart resume exactly.
        """
        owned: list[str] = []
        while not stop.is_set():
            for name in self.projections:
                if name not in owned and self.views.try_lock(name):
                    owned.append(name)
                    if on_lock is not None:
                        on_lock(name)
            applied = self.catch_up(names=owned, page_size=page_size) if owned else {}
            if not any(applied.values()):
                stop.wait(poll_interval)
