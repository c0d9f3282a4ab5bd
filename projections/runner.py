"""The projection runner: follows the ledger and keeps every view current.

Catch-up and rebuild read the ledger in pages; each page's changes to a
projection's states are written with the tracking position in one transaction, so a
runner killed at any moment resumes where it stopped and never applies an event
twice.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from turnledger.ledger.envelope import Recorded
from turnledger.ledger.store import EventStore
from turnledger.projections.base import Projection, fold
from turnledger.projections.views import ViewStore

Progress = Callable[[str, int, int], None]
"""Called as ``progress(projection, position reached, target position)``."""


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
        page_size: int = 500,
        progress: Progress | None = None,
    ) -> dict[str, int]:
        """Apply every event not yet applied; return events applied per projection."""
        target = self.store.max_position()
        applied = {}
        for name in names or list(self.projections):
            applied[name] = self._catch_up_one(
                self.projections[name], target, page_size, progress
            )
        return applied

    def _catch_up_one(
        self,
        projection: Projection[Any],
        target: int,
        page_size: int,
        progress: Progress | None,
    ) -> int:
        position = self.views.tracking(projection.name)
        applied = 0
        while position < target:
            page = self.store.read_all(
                after=position,
                limit=page_size,
                types=projection.event_types,
                until=target,
            )
            # With a type filter, a short page means nothing more matches up to
            # the target: tracking moves to the target, not to the last match.
            reached = target if len(page) < page_size else page[-1].position
            self.apply_page(projection, page, reached)
            applied += len(page)
            position = reached
            if progress is not None:
                progress(projection.name, position, target)
        return applied

    def apply_page(
        self, projection: Projection[Any], page: Sequence[Recorded], reached: int
    ) -> None:
        """Fold one page into the stored states and commit them with ``reached``."""
        keys = {k for recorded in page for k in projection.keys(recorded)}
        states = self.views.load(projection.name, keys, projection.state_type)
        changed = fold(projection, page, states)
        self.views.commit(
            projection.name, {k: changed[k] for k in keys if k in changed}, reached
        )

    def rebuild(
        self,
        *,
        names: Sequence[str] | None = None,
        page_size: int = 500,
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
        page_size: int = 500,
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
