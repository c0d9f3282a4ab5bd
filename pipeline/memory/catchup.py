"""Memory catch-up: a backend brought up to date with the ledger's memory events.

The paging is the projection runner's (:func:`turnledger.projections.runner
.catch_up`, the one catch-up loop every read model uses); what is memory's own
is here: which agents' events belong to a backend, and opening a sealed content
with the key store before it is applied.
"""

from __future__ import annotations

from functools import partial

import msgspec

from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import MemoryStored
from turnledger.pipeline.memory.wiring import MemoryWiring
from turnledger.projections.memory.apply import BackendTarget
from turnledger.projections.memory.protocol import MemoryBackend
from turnledger.projections.runner import catch_up


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

    def target(self, ref: str, backend: MemoryBackend, agent: str) -> BackendTarget:
        """The backend as the runner's tracked target: its agents' events, opened."""
        owners = self._owners(ref, agent)
        return BackendTarget(
            backend,
            name=ref,
            accepts=partial(self._belongs, ref=ref, owners=owners),
            opened=self._opened,
        )

    def _owners(self, ref: str, agent: str) -> set[str] | None:
        if self.only_agents is not None:
            return set(self.only_agents)
        if ref.startswith("markdown."):
            return {agent}
        return None  # an install-wide backend takes every agent mapped to it

    def _catch_up(self, ref: str, backend: MemoryBackend, agent: str) -> int:
        return catch_up(self.store, self.target(ref, backend, agent))

    def _belongs(
        self, recorded: Recorded, *, ref: str, owners: set[str] | None
    ) -> bool:
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
