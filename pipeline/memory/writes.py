"""Memory writes: stores and forgets recorded as events, then applied.

A write appends a ``memory.stored`` / ``memory.forgotten`` event to the agent's
memory stream (re-validated before every append attempt), then brings the
agent's backend up to date; with shredding the content is sealed first and a
forget destroys the entry's keys.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from turnledger.ledger.envelope import AppendResult, Recorded
from turnledger.ledger.events import (
    Event,
    MemoryForgotten,
    MemorySource,
    MemoryStored,
)
from turnledger.ledger.ids import memory_stream_id
from turnledger.ledger.store import EventStore
from turnledger.pipeline.appending import append_decided
from turnledger.pipeline.config import Config
from turnledger.pipeline.memory.catchup import MemoryCatchUp
from turnledger.pipeline.memory.wiring import (
    MemoryAccessError,
    MemoryWiring,
    StaleEntryError,
)
from turnledger.policies.paths import sanitize_session_key
from turnledger.policies.scoping import check_forget
from turnledger.projections.memory.errors import MemoryStoreError
from turnledger.projections.memory.protocol import (
    MemoryBackend,
    MemoryEntry,
    Unsupported,
)


class MemoryWrites:
    """Store, forget and erase: every write an event first.

    Args:
        store: The ledger the events are appended to.
        config: The configuration (each agent's scope).
        wiring: The agents' backends (opened, not caught up) and the key store
            that seals contents with shredding on.
        catch_up: The agents' backends caught up with the ledger.
    """

    def __init__(
        self,
        store: EventStore,
        config: Config,
        wiring: MemoryWiring,
        catch_up: MemoryCatchUp,
    ) -> None:
        self._store = store
        self._config = config
        self._wiring = wiring
        self._catch_up = catch_up

    def store_entry(
        self,
        agent: str,
        key: str,
        content: str,
        *,
        category: str = "core",
        session: str | None = None,
        source: MemorySource = "cli",
        importance: float | None = None,
        namespace: str = "default",
        if_content: str | None = None,
    ) -> MemoryEntry | Unsupported:
        """Record a memory write and apply it; returns the stored entry.

        With ``if_content`` the write is a compare-and-set: it is made only while
        the agent's own live entry under ``key`` still has exactly that content,
        checked again before every append attempt (another process may have
        rewritten it since it was read); a merge uses it.

        Raises:
            MemoryAccessError: ``importance`` is outside [0, 1] or ``namespace``
                is empty.
            StaleEntryError: ``if_content`` no longer matches; nothing written.
        """
        if importance is not None and not 0.0 <= importance <= 1.0:
            msg = f"Expected an importance in [0, 1], found {importance!r}"
            raise MemoryAccessError(msg)
        if not namespace.strip():
            msg = "Expected a non-empty memory namespace, found an empty one"
            raise MemoryAccessError(msg)
        entry_id = uuid.uuid4().hex
        if self._wiring.shredding:
            content = self._wiring.keys().seal(
                content, key_id=entry_id, agent=agent, memory_key=key
            )
        event = MemoryStored(
            agent=agent,
            key=key,
            content=content,
            category=category,
            session=sanitize_session_key(session) if session else None,
            namespace=namespace,
            importance=importance,
            source=source,
            entry_id=entry_id,
        )
        _, backend = self._wiring.served(agent)
        if not backend.capabilities.stores:
            return Unsupported(
                operation="store",
                backend=backend.name,
                reason="memory is disabled for this agent (backend none)",
            )

        def decide(_head: int) -> list[Event]:
            # A plain store is an upsert by key that depends on no earlier state:
            # on a conflict it is retried as is (ledger order decides). A
            # compare-and-set re-reads the entry, caught up past the head.
            if if_content is not None:
                current = self._catch_up.backend(agent).get(key, agents=[agent])
                if current is None or current.content != if_content:
                    raise StaleEntryError(key)
            return [event]

        written = append_decided(self._store, memory_stream_id(agent), decide)
        try:
            return self._read_back(agent, key, written)
        except MemoryStoreError as e:
            raise _recorded_but(e, f"the store of {key!r}") from e

    def _read_back(
        self, agent: str, key: str, written: AppendResult | None
    ) -> MemoryEntry:
        """The entry just stored; as stored if another writer already removed it."""
        found = self._catch_up.backend(agent).get(key, agents=[agent])
        if found is not None:
            return found
        # Another process may forget (or supersede) the key right after this
        # store: the write was made, so it is answered as stored.
        if written is not None:
            ours = self._store.read_stream(
                written.stream_id, after=written.last_version - 1
            )
            if any(getattr(r.event, "key", None) == key for r in ours[1:]):
                return _as_stored(self._catch_up.opened(ours[0]))
        msg = f"Expected the stored entry {key!r} to be readable, found nothing"
        raise MemoryAccessError(msg)  # pragma: no cover - a backend lost a write

    def forget(
        self, agent: str, key: str, *, source: MemorySource = "cli"
    ) -> bool | Unsupported:
        """Forget the agent's own entry (peers' entries are refused).

        Returns False when there is no such entry, Unsupported when the backend is
        append-only; with shredding the entry's keys are destroyed too.

        Raises:
            MemoryAccessError: The entry belongs to another agent.
        """
        scope = self._config.scope(agent)
        backend = self._catch_up.backend(agent)
        refusal: list[bool | Unsupported] = []

        def decide(_head: int) -> list[Event] | None:
            # Re-validated before every attempt, on the backend caught up past the
            # head: another writer may have forgotten (or re-stored) the entry.
            refusal.clear()
            existing = self._catch_up.backend(agent).get(
                key, agents=list(scope.allowed)
            )
            if existing is None:
                refusal.append(False)
                return None
            decision = check_forget(scope, existing.agent)
            if not decision.allowed:
                raise MemoryAccessError(decision.detail)
            if backend.capabilities.append_only and not backend.capabilities.redacts:
                refusal.append(
                    Unsupported(
                        operation="forget",
                        backend=backend.name,
                        reason=f"{backend.name} memory is append-only (an audit trail)",
                    )
                )
                return None
            return [
                MemoryForgotten(
                    agent=agent, key=key, session=existing.session, source=source
                )
            ]

        if append_decided(self._store, memory_stream_id(agent), decide) is None:
            if refusal[0] is False and self._wiring.keys_exist():
                # An earlier forget may be recorded with its key left (the key
                # store failed then): forgetting again destroys what is left.
                self._wiring.keys().destroy(agent=agent, memory_key=key)
            return refusal[0]
        self._after_forget(agent, key, backend)
        return True

    def _after_forget(self, agent: str, key: str, backend: MemoryBackend) -> None:
        """Destroy the entry's keys (with shredding), apply, scrub the view."""
        shredded = self._wiring.keys_exist()
        if shredded:
            try:
                self._wiring.keys().destroy(agent=agent, memory_key=key)
            except MemoryStoreError as e:
                what = (
                    f"the forget of {key!r} (its sealing key NOT yet destroyed: "
                    "forget it again)"
                )
                raise _recorded_but(e, what) from e
        try:
            self._catch_up.backend(agent)
            scrub = getattr(backend, "scrub", None)
            if shredded and callable(scrub):
                scrub()  # with shredding on, no copy may stay in the view's files
        except MemoryStoreError as e:
            raise _recorded_but(e, f"the forget of {key!r}") from e

    def forget_matching(
        self,
        agent: str,
        *,
        subject: str | None = None,
        session: str | None = None,
        before: datetime | None = None,
    ) -> list[str] | Unsupported:
        """Forget every own entry matching all the filters given (erasure).

        ``subject`` matches key or content case-insensitively; ``session`` the
        entry's session; ``before`` a creation time strictly earlier. Each entry
        is forgotten as :meth:`forget` does (with shredding, its key destroyed).

        Returns:
            The forgotten keys, oldest first; Unsupported from an append-only
            backend.
        """
        scoped = sanitize_session_key(session) if session else None
        needle = subject.casefold() if subject else None
        keys = [
            e.key
            for e in self._catch_up.backend(agent).export(
                agents=[agent], session=scoped
            )
            if (needle is None or needle in f"{e.key}\n{e.content}".casefold())
            and (before is None or e.created_at < before)
        ]
        done: list[str] = []
        for key in keys:
            outcome = self.forget(agent, key)
            if isinstance(outcome, Unsupported):
                return outcome
            if outcome:
                done.append(key)
        return done


def _recorded_but(error: MemoryStoreError, what: str) -> MemoryStoreError:
    """The same typed error, saying the ledger already holds the write."""
    return type(error)(
        f"{what} is recorded in the ledger, but {error} (the memory store "
        "catches up on its next use)",
        store=error.store,
    )


def _as_stored(recorded: Recorded) -> MemoryEntry:
    """The entry a ``memory.stored`` event wrote, as a backend would return it."""
    event = recorded.event
    if not isinstance(event, MemoryStored):  # pragma: no cover - read by version
        msg = f"Expected a memory.stored event, found {type(event).__name__}"
        raise MemoryAccessError(msg)
    return MemoryEntry(
        id=event.entry_id,
        key=event.key,
        content=event.content,
        category=event.category,
        agent=event.agent,
        session=event.session,
        namespace=event.namespace,
        importance=event.importance,
        created_at=recorded.recorded_at,
        updated_at=recorded.recorded_at,
    )
