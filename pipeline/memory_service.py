"""Long-term memory for the shell: writes as events, reads from the projection.

A write appends a ``memory.stored`` / ``memory.forgotten`` event to the agent's
memory stream, then brings the agent's backend up to date; reads are scoped to
the agent and its configured peers. Backends come from the configuration (one
install-wide instance per backend reference; Markdown per agent).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import msgspec

from turnledger.ledger.envelope import AppendResult, Recorded
from turnledger.ledger.events import (
    Event,
    MemoryForgotten,
    MemorySource,
    MemoryStored,
    RecallRef,
)
from turnledger.ledger.ids import memory_stream_id
from turnledger.ledger.store import EventStore
from turnledger.pipeline.appending import append_decided
from turnledger.pipeline.config import Config, recall_tuning
from turnledger.pipeline.errors import PipelineError
from turnledger.policies.paths import sanitize_session_key
from turnledger.policies.recall import (
    RecallCandidate,
    bound_recall_limit,
    make_recall_selector,
    resolve_inject_policy,
)
from turnledger.policies.relevance import content_terms
from turnledger.policies.retention import MemoryItem, RecallTuning, make_recall_tuner
from turnledger.policies.scoping import check_forget, normalize_backend, recall_agents
from turnledger.policies.types import TurnOrigin
from turnledger.projections.memory.apply import MEMORY_EVENT_TYPES
from turnledger.projections.memory.embedders import (
    Embedder,
    NoEmbedder,
    OpenAICompatibleEmbedder,
)
from turnledger.projections.memory.protocol import (
    MemoryBackend,
    MemoryEntry,
    Unsupported,
)
from turnledger.projections.memory.shred import KeyStore

RERANK_OVERFETCH: Final = 3
"""How many more candidates a recall asks for when a rerank stage is on."""


def rerank(
    found: Sequence[MemoryEntry], tuning: RecallTuning, now: datetime
) -> list[MemoryEntry]:
    """Apply the ``[recall]`` decay / importance / MMR stages to recalled entries.

    Returns:
        The entries in the tuned order, each with its tuned score.
    """
    tune = make_recall_tuner(tuning)
    by_key = {e.key: e for e in found}
    items = [
        MemoryItem(
            key=e.key,
            content=e.content,
            category=e.category,
            created_at=e.created_at,
            updated_at=e.updated_at,
            score=e.score,
            importance=e.importance,
        )
        for e in by_key.values()
    ]
    return [
        msgspec.structs.replace(by_key[item.key], score=item.score)
        for item in tune(items, now)
    ]


def query_shape(query: str) -> str:
    """Describe a recall query without its words (the observer shows this).

    Returns:
        e.g. ``"42 chars, 3 content terms"``: never the user's text.
    """
    return f"{len(query)} chars, {len(content_terms(query))} content terms"


class TurnRecall(msgspec.Struct, frozen=True, kw_only=True):
    """What recall gave a turn: the block to inject and references to record."""

    block: str
    refs: tuple[RecallRef, ...]
    backend: str
    query_summary: str


class MemoryAccessError(PipelineError, ValueError):
    """A memory operation is refused (scope) or cannot be served."""


class StaleEntryError(MemoryAccessError):
    """A compare-and-set store found the entry changed; nothing was written."""

    def __init__(self, key: str) -> None:
        self.key = key
        super().__init__(
            f"Expected memory entry {key!r} unchanged since it was read, "
            "found it rewritten or removed by another writer"
        )


def _base_paths(ledger_url: str) -> tuple[Path, str]:
    if "://" in ledger_url and not ledger_url.startswith("sqlite:///"):
        return Path(), "turnledger"
    path = Path(ledger_url.removeprefix("sqlite:///"))
    return path.parent, path.stem


class MemoryService:
    """Scoped long-term memory over the ledger.

    Args:
        store: The ledger.
        config: The configuration (agents, storage, embedding, recall).
        ledger_url: Where the ledger is (default files are put beside it).
        shredding: Seal memory contents with per-entry keys (forget destroys
            them); ``None`` (the default) takes ``[memory] shredding``, so every
            writer (engine, autosave, tools, consolidation, import, CLI) honours it.
        keys_path: The key store file (default: ``<ledger stem>.keys.db`` beside
            the ledger); a rebuild elsewhere passes the live one to decrypt.
        only_agents: Apply only these agents' events (a rebuild of one agent);
            ``None``: every agent mapped to the backend.
    """

    def __init__(
        self,
        store: EventStore,
        config: Config,
        *,
        ledger_url: str,
        shredding: bool | None = None,
        keys_path: str | Path | None = None,
        only_agents: frozenset[str] | None = None,
    ) -> None:
        self.only_agents = only_agents
        self.store = store
        self.config = config
        self.base, self.stem = _base_paths(ledger_url)
        self.shredding = config.memory.shredding if shredding is None else shredding
        self.keys_path = Path(keys_path or self.base / f"{self.stem}.keys.db")
        self._backends: dict[str, MemoryBackend] = {}
        self._embedder_made: Embedder | None = None
        self._keys: KeyStore | None = None

    # -- wiring ---------------------------------------------------------------

    def keys(self) -> KeyStore:
        """The key store of sealed contents (opened on first use)."""
        if self._keys is None:
            self._keys = KeyStore(str(self.keys_path))
        return self._keys

    def backend_ref(self, agent: str) -> str:
        """The ``kind.alias`` of the backend an agent's memory lives in."""
        return normalize_backend(self.config.agent(agent).memory)

    def _embedder(self) -> Embedder:
        """The configured embedder, built once and shared by every backend."""
        if self._embedder_made is None:
            self._embedder_made = self._make_embedder()
        return self._embedder_made

    def _make_embedder(self) -> Embedder:
        settings = self.config.embedding
        if settings.provider == "none":
            return NoEmbedder()
        if settings.provider == "local":
            from turnledger.projections.memory.local_embedder import (  # noqa: PLC0415
                PACKAGED_MODEL,
                LocalEmbedder,
            )

            local = LocalEmbedder(settings.model or PACKAGED_MODEL)
            found = local.identity.dims
            if settings.dims is not None and settings.dims != found:
                msg = f"embedding.dims: expected {found}, found {settings.dims}"
                raise MemoryAccessError(msg)
            return local
        import os  # noqa: PLC0415

        return OpenAICompatibleEmbedder(
            base_url=settings.base_url or "https://api.openai.com",
            model=settings.model or "text-embedding-3-small",
            dims=settings.dims or 1536,
            api_key=os.environ.get(settings.api_key_env),
        )

    def workspace(self, agent: str) -> Path:
        """The agent's workspace (its Markdown memory lives there)."""
        return self._workspace(agent)

    def sqlite_path(self, ref: str) -> Path:
        """The file of a ``sqlite.<alias>`` backend (configured or default)."""
        alias = ref.partition(".")[2] or "default"
        configured = self.config.storage_for(ref).path
        if configured:
            return Path(configured)
        if alias != "default":
            return self.base / f"{self.stem}.memory.{alias}.db"
        return self.base / f"{self.stem}.memory.db"

    def _workspace(self, agent: str) -> Path:
        configured = self.config.agent(agent).workspace
        if configured:
            return Path(configured)
        return Path(self.config.data_dir) / "agents" / agent / "workspace"

    def _open(self, ref: str, agent: str) -> MemoryBackend:
        kind = ref.partition(".")[0]
        storage = self.config.storage_for(ref)
        if kind == "sqlite":
            from turnledger.projections.memory.sqlite import SQLiteMemory  # noqa: PLC0415

            return SQLiteMemory(self.sqlite_path(ref), embedder=self._embedder())
        if kind == "markdown":
            from turnledger.projections.memory.markdown import MarkdownMemory  # noqa: PLC0415
            from turnledger.projections.memory.markdown_peers import MarkdownPeers  # noqa: PLC0415

            own = MarkdownMemory(self._workspace(agent), agent=agent)
            peers = self._markdown_peers(agent)
            if not peers:
                return own
            return MarkdownPeers(
                own,
                {p: MarkdownMemory(self._workspace(p), agent=p) for p in peers},
            )
        if kind == "postgres":
            from turnledger.projections.memory.postgres import PostgresMemory  # noqa: PLC0415

            return PostgresMemory(str(storage.url), embedder=self._embedder())
        if kind == "qdrant":
            from turnledger.projections.memory.qdrant import QdrantMemory  # noqa: PLC0415

            if self.config.embedding.provider == "none":
                msg = (
                    "Qdrant stores vectors only: expected an [embedding] provider "
                    '("local" or "openai-compatible"), found none'
                )
                raise MemoryAccessError(msg)

            if storage.url:
                return QdrantMemory(url=storage.url, embedder=self._embedder())
            path = storage.path or str(Path(self.config.data_dir) / "qdrant")
            return QdrantMemory(path=path, embedder=self._embedder())
        if kind == "lucid":
            from turnledger.projections.memory.lucid import LucidMemory  # noqa: PLC0415
            from turnledger.projections.memory.sqlite import SQLiteMemory  # noqa: PLC0415

            local = SQLiteMemory(self.base / f"{self.stem}.lucid.db")
            return LucidMemory(local, list(storage.command))
        from turnledger.projections.memory.none import NoneMemory  # noqa: PLC0415

        return NoneMemory()

    def _served(self, agent: str) -> tuple[str, MemoryBackend]:
        ref = self.backend_ref(agent)
        cache_key = f"{ref}/{agent}" if ref.startswith("markdown.") else ref
        backend = self._backends.get(cache_key)
        if backend is None:
            try:
                backend = self._open(ref, agent)
            except Exception as e:
                detail = " ".join(str(e).split())
                msg = f"Cannot open the {ref} memory backend of {agent!r}: {detail}"
                raise MemoryAccessError(msg) from e
            self._backends[cache_key] = backend
        return ref, backend

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

    def _markdown_peers(self, agent: str) -> tuple[str, ...]:
        if not self.backend_ref(agent).startswith("markdown."):
            return ()
        return self.config.agent(agent).read_memory_from

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

    # -- writes ---------------------------------------------------------------

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
        if self.shredding:
            content = self.keys().seal(
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
        _, backend = self._served(agent)
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
                current = self.backend(agent).get(key, agents=[agent])
                if current is None or current.content != if_content:
                    raise StaleEntryError(key)
            return [event]

        written = append_decided(self.store, memory_stream_id(agent), decide)
        return self._read_back(agent, key, written)

    def _read_back(
        self, agent: str, key: str, written: AppendResult | None
    ) -> MemoryEntry:
        """The entry just stored; as stored if another writer already removed it."""
        found = self.backend(agent).get(key, agents=[agent])
        if found is not None:
            return found
        # Another process may forget (or supersede) the key right after this
        # store: the write was made, so it is answered as stored.
        if written is not None:
            ours = self.store.read_stream(
                written.stream_id, after=written.last_version - 1
            )
            if any(getattr(r.event, "key", None) == key for r in ours[1:]):
                return _as_stored(self._opened(ours[0]))
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
        scope = self.config.scope(agent)
        backend = self.backend(agent)
        refusal: list[bool | Unsupported] = []

        def decide(_head: int) -> list[Event] | None:
            # Re-validated before every attempt, on the backend caught up past the
            # head: another writer may have forgotten (or re-stored) the entry.
            refusal.clear()
            existing = self.backend(agent).get(key, agents=list(scope.allowed))
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

        if append_decided(self.store, memory_stream_id(agent), decide) is None:
            return refusal[0]
        shredded = self._keys_exist()
        if shredded:
            self.keys().destroy(agent=agent, memory_key=key)
        self.backend(agent)
        scrub = getattr(backend, "scrub", None)
        if shredded and callable(scrub):
            scrub()  # with shredding on, no copy may stay in the view's files
        return True

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
            for e in self.backend(agent).export(agents=[agent], session=scoped)
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

    # -- reads ----------------------------------------------------------------

    def _agents(self, agent: str, requested: Sequence[str] | None) -> list[str]:
        return list(recall_agents(self.config.scope(agent), requested))

    def recall(
        self,
        agent: str,
        query: str,
        *,
        session: str | None = None,
        limit: int = 5,
        agents: Sequence[str] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[MemoryEntry]:
        """Recall among the agent's allowlist (narrowed by ``agents``), best first.

        ``since``/``until`` keep rows created in that window (inclusive).
        """
        allowed = self._agents(agent, agents)
        if not allowed:
            return []
        scoped_session = sanitize_session_key(session) if session else None
        return self.backend(agent).recall(
            query,
            agents=allowed,
            limit=limit,
            session=scoped_session,
            since=since,
            until=until,
        )

    def export(
        self,
        agent: str,
        *,
        session: str | None = None,
        category: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[MemoryEntry]:
        """Return the agent's own live entries matching the filters, oldest first."""
        scoped = sanitize_session_key(session) if session else None
        return self.backend(agent).export(
            agents=[agent], session=scoped, category=category, since=since, until=until
        )

    def get(self, agent: str, key: str) -> MemoryEntry | None:
        """Return the entry with that key (own first, then peers)."""
        return self.backend(agent).get(key, agents=self._agents(agent, None))

    def list(
        self, agent: str, *, category: str | None = None, session: str | None = None
    ) -> list[MemoryEntry]:
        """Return the agent's (and peers') entries, newest first."""
        return self.backend(agent).list(
            agents=self._agents(agent, None), category=category, session=session
        )

    def stats(self, agent: str) -> dict[str, Any]:
        """Counts of an agent's memory, by category."""
        entries = self.list(agent)
        by_category: dict[str, int] = {}
        for entry in entries:
            by_category[entry.category] = by_category.get(entry.category, 0) + 1
        backend = self.backend(agent)
        return {
            "agent": agent,
            "backend": self.backend_ref(agent),
            "entries": backend.count(agents=[agent]),
            "visible": len(entries),
            "by_category": dict(sorted(by_category.items())),
            "applied_position": backend.applied_position(),
        }

    def context_block(
        self,
        agent: str,
        query: str,
        *,
        session: str | None = None,
        origin: TurnOrigin = "interactive",
    ) -> str:
        """Return exactly the ``[Memory context]`` block a turn would get, or ""."""
        return self.recall_for_turn(agent, query, session=session, origin=origin).block

    def recall_for_turn(
        self,
        agent: str,
        query: str,
        *,
        session: str | None = None,
        origin: TurnOrigin = "interactive",
    ) -> TurnRecall:
        """Recall for a turn per the recall policy: the block and its references."""
        policy = resolve_inject_policy(origin, sessions=[session] if session else [])
        ref = self.backend_ref(agent)
        summary = query_shape(query)
        if not policy.inject:
            return TurnRecall(block="", refs=(), backend=ref, query_summary=summary)
        settings = self.config.recall
        tuning = recall_tuning(settings)
        reranks = tuning.decay or tuning.importance_blend or tuning.mmr
        limit = bound_recall_limit(settings.limit)
        found = self.recall(
            agent,
            query,
            session=policy.sessions[0] if policy.sessions else None,
            limit=bound_recall_limit(
                settings.limit, candidate_multiplier=RERANK_OVERFETCH if reranks else 1
            ),
        )
        if reranks:
            found = rerank(found, tuning, datetime.now(UTC))[:limit]
        select = make_recall_selector(
            min_relevance_score=settings.min_relevance,
            max_entries=settings.max_entries,
            entry_max_chars=settings.entry_max_chars,
            max_total_chars=settings.max_total_chars,
        )
        candidates = [
            RecallCandidate(
                id=e.id,
                key=e.key,
                content=e.content,
                category=e.category,
                score=e.score,
                session=e.session,
                agent=e.agent,
            )
            for e in found
        ]
        selection = select(candidates, policy)
        by_id = {e.id: e for e in found}
        refs = tuple(
            RecallRef(
                key=r.key,
                entry_id=r.id,
                score=by_id[r.id].score if r.id in by_id else None,
                agent=by_id[r.id].agent if r.id in by_id else "",
            )
            for r in selection.entries
        )
        return TurnRecall(
            block=selection.block, refs=refs, backend=ref, query_summary=summary
        )

    def close(self) -> None:
        """Close every backend and the key store."""
        for backend in self._backends.values():
            backend.close()
        self._backends.clear()
        if self._keys is not None:
            self._keys.close()
            self._keys = None


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
