"""Memory catch-up: a backend brought up to date with the ledger's memory events.

Events are read in pages of memory event types up to the ledger's head and
applied with the page's reached position, so each event takes effect once; a
sealed content is opened with the key store before it is applied.
"""

from __future__ import annotations

import msgspec

from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import MemoryStored
from turnledger.ledger.store import EventStore
from turnledger.pipeline.memory_wiring import MemoryWiring
from turnledger.projections.memory.apply import MEMORY_EVENT_TYPES
from turnledger.projections.memory.protocol import MemoryBackend


class MemoryCatchUp(MemoryWiring):
    """Backends served caught up with the ledger (see :meth:`backend`)."""

    def backend(self, agent: str) -> MemoryBackend:
        """The agent's backend, brought up to date with the ledger.

        A Markdown agent's ``read_memory_from`` peers are caught up too (their
        own files, not their peers'), so its recall merges theirs by score.
        """
        ref, backend = self._served(agent)
        self._catch_up(ref, backend, agent)
        for peer in self._markdown_peers(agent):
            peer_ref, peer_backend = self._served(peer)
            self._catch_up(peer_ref, peer_backend, peer)
        return backend

    def _owners(self, ref: str, agent: str) -> set[str] | None:
        if self.only_agents is not None:
            return set(self.only_agents)
        if ref.startswith("markdown."):
            return {agent}
        return None  # an install-wide backend takes every agent mapped to it

    def _catch_up(self, ref: str, backend: MemoryBackend, agent: str) -> int:
        target = self.store.max_position()
        done = backend.applied_position()
        if done >= target:
            return 0
        owners = self._owners(ref, agent)
        applied = 0
        for page in _pages(self.store, done, target):
            events = [
                self._opened(r) for r in page.events if self._belongs(r, ref, owners)
            ]
            backend.apply(events, page.reached)
            applied += len(events)
        return applied

    def _belongs(self, recorded: Recorded, ref: str, owners: set[str] | None) -> bool:
        event_agent = str(getattr(recorded.event, "agent", ""))
        if owners is not None:
            return event_agent in owners
        return self.backend_ref(event_agent) == ref

    def _opened(self, recorded: Recorded) -> Recorded:
        event = recorded.event
        if isinstance(event, MemoryStored) and self._keys_exist():
            plain = self.keys().open(event.content)
            if plain != event.content:
                event = msgspec.structs.replace(event, content=plain)
                return msgspec.structs.replace(recorded, event=event)
        return recorded

    def _keys_exist(self) -> bool:
        return self._keys is not None or self.keys_path.exists()


class _Page(msgspec.Struct, frozen=True):
    events: list[Recorded]
    reached: int


def _pages(store: EventStore, done: int, target: int, size: int = 500) -> list[_Page]:
    pages = []
    after = done
    while after < target:
        events = store.read_all(
            after=after, limit=size, types=MEMORY_EVENT_TYPES, until=target
        )
        reached = target if len(events) < size else events[-1].position
        pages.append(_Page(events, reached))
        after = reached
    return pages
