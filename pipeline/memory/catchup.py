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
from turnledger.ledger.store import EventStore
from turnledger.pipeline.memory.wiring import MemoryWiring
from turnledger.projections.memory.apply import BackendTarget
from turnledger.projections.memory.protocol import MemoryBackend
from turnledger.projections.runner import catch_up


class MemoryCatchUp:
    """Backends served caught up with the ledger (see :meth:`backend`).

    Args:
        store: The ledger whose memory events are applied.
        wiring: Where each agent's backend is, and the key store that opens
            sealed contents.
        only_agents: Apply only these agents' events (a rebuild of one agent);
            ``None``: every agent mapped to the backend.
    """

    def __init__(
        self,
        store: EventStore,
        wiring: MemoryWiring,
        *,
        only_agents: frozenset[str] | None = None,
    ) -> None:
        self._store = store
        self._wiring = wiring
        self._only_agents = only_agents

    def backend(self, agent: str) -> MemoryBackend:
        """The agent's backend, brought up to date with the ledger.

        A Markdown agent's ``read_memory_from`` peers are caught up too (their
        own files, not their peers'), so its recall merges theirs by score.
        """
        ref, backend = self._wiring.served(agent)
        self._catch_up(ref, backend, agent)
        for peer in self._wiring.markdown_peers(agent):
            peer_ref, peer_backend = self._wiring.served(peer)
            self._catch_up(peer_ref, peer_backend, peer)
        return backend

    def target(self, ref: str, backend: MemoryBackend, agent: str) -> BackendTarget:
        """The backend as the runner's tracked target: its agents' events, opened."""
        owners = self._owners(ref, agent)
        return BackendTarget(
            backend,
            name=ref,
            accepts=partial(self._belongs, ref=ref, owners=owners),
            opened=self.opened,
        )

    def opened(self, recorded: Recorded) -> Recorded:
        """The event with a sealed ``memory.stored`` content opened by the key store.

        Returns:
            The same record when there is nothing to open (no key store, another
            event, a content never sealed); a shredded content reads as
            :data:`~turnledger.projections.memory.shred.FORGOTTEN`.
        """
        event = recorded.event
        if isinstance(event, MemoryStored) and self._wiring.keys_exist():
            plain = self._wiring.keys().open(event.content)
            if plain != event.content:
                event = msgspec.structs.replace(event, content=plain)
                return msgspec.structs.replace(recorded, event=event)
        return recorded

    def _owners(self, ref: str, agent: str) -> set[str] | None:
        if self._only_agents is not None:
            return set(self._only_agents)
        if ref.startswith("markdown."):
            return {agent}
        return None  # an install-wide backend takes every agent mapped to it

    def _catch_up(self, ref: str, backend: MemoryBackend, agent: str) -> int:
        return catch_up(self._store, self.target(ref, backend, agent))

    def _belongs(
        self, recorded: Recorded, *, ref: str, owners: set[str] | None
    ) -> bool:
        event_agent = str(getattr(recorded.event, "agent", ""))
        if owners is not None:
            return event_agent in owners
        return self._wiring.backend_ref(event_agent) == ref
