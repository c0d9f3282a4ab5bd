"""Qdrant memory: vectors with agent/session/category/time as payload filters (§2.4).

One collection (default ``turnledger_memories``) through qdrant-client: a local
path (``QdrantClient(path=...)``, used in tests), ``:memory:`` or a server URL.
A point's id is the uuid5 of its agent and key, so a store replaces the point
(keeping the entry id and creation time, read back first). Every read filters
inside the query (``must`` conditions, ``MatchAny`` over the allowed agents), so
disallowed rows never take a place in the limit. A side collection
(``<collection>__meta``) keeps the applied ledger position, the embedder's
identity and the id of the ledger the points derive from (:meth:`QdrantMemory.bind`).

Qdrant search is by vector only: without an embedder of dimension > 0 a write
answers :class:`Unsupported`, and a keyword query finds nothing (a recent query,
``get`` and ``list`` still work on stored points). Differences from the
reference: namespace and importance are kept; session-less core/daily facts are
visible from every session; time windows are payload range filters, not string
comparisons after the search; a collection made by another embedder is refused
with a message asking for a rebuild instead of mixing vectors. A point's vector is
computed when it is written: the unit mean of all its text's windows' vectors
(:func:`~turnledger.projections.memory.embedding.windows.whole_text_vector`), so
nothing of a long entry is cut.
"""

from __future__ import annotations

import math
import os
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final, TypeAlias

from qdrant_client import QdrantClient, models

from turnledger.ledger.envelope import Recorded
from turnledger.policies.recall_scope import bound_recall_limit
from turnledger.policies.relevance import is_meaningful_query
from turnledger.projections.base import LedgerHead, head_position
from turnledger.projections.memory.apply import apply_in_order
from turnledger.projections.memory.embedding import Embedder
from turnledger.projections.memory.embedding.windows import whole_text_vector
from turnledger.projections.memory.errors import typed_memory_errors
from turnledger.projections.memory.protocol import (
    Capabilities,
    MemoryEntry,
    NewMemory,
    Unsupported,
    is_recent_query,
)
from turnledger.projections.memory.qdrant._payload import (
    POINT_NAMESPACE,
    payload_entry,
    point_id,
    point_payload,
    scope_filter,
)

DEFAULT_COLLECTION: Final = "turnledger_memories"
"""The collection used when none is named."""

NO_VECTORS_REASON: Final = (
    "qdrant memory needs an embedder with dimensions > 0;"
    " keyword-only search is not a qdrant capability"
)
_META_ID: Final = str(uuid.uuid5(POINT_NAMESPACE, "turnledger:meta"))
_MIN_SCORE: Final = 1e-9
_PAGE: Final = 256
_INDEXES: Final = {
    "agent": models.PayloadSchemaType.KEYWORD,
    "key": models.PayloadSchemaType.KEYWORD,
    "session": models.PayloadSchemaType.KEYWORD,
    "category": models.PayloadSchemaType.KEYWORD,
    "live": models.PayloadSchemaType.BOOL,
    "created_ts": models.PayloadSchemaType.FLOAT,
    "updated_ts": models.PayloadSchemaType.FLOAT,
}
_Entries: TypeAlias = list[MemoryEntry]

__all__ = ["NO_VECTORS_REASON", "QdrantMemory", "point_id", "scope_filter"]


@typed_memory_errors("qdrant")
class QdrantMemory:
    """Long-term memory in a Qdrant collection.

    Args:
        location: ``":memory:"`` (the default when nothing else is given) or a
            server location.
        path: A local directory (qdrant-client's local mode).
        url: A server URL (production).
        api_key: The server's API key.
        collection: The collection name.
        embedder: Vectors for every write and search (dimension > 0 needed).
    """

    name = "qdrant"

    def __init__(
        self,
        location: str | None = None,
        *,
        path: str | os.PathLike[str] | None = None,
        url: str | None = None,
        api_key: str | None = None,
        collection: str = DEFAULT_COLLECTION,
        embedder: Embedder | None = None,
    ) -> None:
        if location is None and path is None and url is None:
            location = ":memory:"
        self._client = QdrantClient(
            location=location,
            path=None if path is None else os.fspath(path),
            url=url,
            api_key=api_key,
        )
        self._server = path is None and location != ":memory:"
        self.collection = collection
        self._meta = f"{collection}__meta"
        self._embedder = embedder
        dims = embedder.identity.dims if embedder is not None else 0
        self.capabilities = Capabilities(
            keyword=False,
            vectors=dims > 0,
            persistent=location != ":memory:",
            stores=dims > 0,
        )
        if dims > 0:
            self._ensure_collection(dims)

    def _identity(self) -> str:
        return "|".join(map(str, self._embedder.identity)) if self._embedder else ""

    def _ensure_collection(self, dims: int) -> None:
        stored = self._meta_payload().get("identity")
        if stored not in {None, self._identity()}:
            msg = (
                f"Expected collection {self.collection!r} to hold vectors of"
                f" {self._identity()!r}, found {stored!r}; rebuild it from the ledger"
            )
            raise ValueError(msg)
        if not self._client.collection_exists(self.collection):
            params = models.VectorParams(size=dims, distance=models.Distance.COSINE)
            self._client.create_collection(self.collection, vectors_config=params)
            if self._server:  # local mode ignores payload indexes (and warns)
                for field, schema in _INDEXES.items():
                    self._client.create_payload_index(self.collection, field, schema)
        self._save_meta(identity=self._identity())

    def _meta_payload(self) -> dict[str, Any]:
        if not self._client.collection_exists(self._meta):
            return {}
        found = self._client.retrieve(self._meta, ids=[_META_ID], with_payload=True)
        return dict(found[0].payload or {}) if found else {}

    def _save_meta(self, **values: Any) -> None:
        if not self._client.collection_exists(self._meta):
            params = models.VectorParams(size=1, distance=models.Distance.DOT)
            self._client.create_collection(self._meta, vectors_config=params)
        payload = self._meta_payload() | values
        point = models.PointStruct(id=_META_ID, vector=[1.0], payload=payload)
        self._client.upsert(self._meta, points=[point], wait=True)

    def _ready(self, agents: Sequence[str]) -> bool:
        return bool(agents) and self._client.collection_exists(self.collection)

    def _embed(self, text: str) -> list[float] | None:
        if self._embedder is None or not self.capabilities.vectors:
            return None
        vector = whole_text_vector(self._embedder, text)  # every window
        return vector if math.fsum(x * x for x in vector) > 0.0 else None

    def store(self, entry: NewMemory) -> MemoryEntry | Unsupported:
        """Upsert the agent's key (same point id), keeping id and creation time.

        Raises:
            EmbedderError: The embedder failed (a point cannot lack its vector).
        """
        if not self.capabilities.stores:
            return Unsupported(
                operation="store", backend=self.name, reason=NO_VECTORS_REASON
            )
        vector = self._embed(f"{entry.key}\n{entry.content}")
        pid = point_id(entry.agent, entry.key)
        found = self._client.retrieve(self.collection, ids=[pid], with_payload=True)
        first = found[0].payload if found and found[0].payload else None
        created = (
            datetime.fromtimestamp(first["created_ts"], UTC) if first else entry.at
        )
        payload = point_payload(
            entry, first["entry_id"] if first else entry.entry_id, created
        )
        point = models.PointStruct(
            id=pid, vector=vector or [0.0] * self._dims(), payload=payload
        )
        self._client.upsert(self.collection, points=[point], wait=True)
        return payload_entry(payload)

    def _dims(self) -> int:
        return self._embedder.identity.dims if self._embedder else 0

    def recall(
        self,
        query: str,
        *,
        agents: Sequence[str],
        limit: int = 5,
        session: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> _Entries:
        """Return the nearest rows (cosine on [0, 1]) or the newest, filters inside."""
        limit = bound_recall_limit(limit)
        if not self._ready(agents):
            return []
        where = scope_filter(agents, session, since=since, until=until)
        if is_recent_query(query):
            return self._newest(where, limit)
        if not is_meaningful_query(query):
            return []  # stop words or one-letter words only: nothing matches
        vector = self._embed(query)
        if vector is None:
            return []
        found = self._client.query_points(
            self.collection,
            query=vector,
            query_filter=where,
            limit=limit,
            with_payload=True,
            score_threshold=_MIN_SCORE,
        )
        return [
            payload_entry(point.payload or {}, min(1.0, max(0.0, point.score)))
            for point in found.points
        ]

    def _newest(self, where: models.Filter, limit: int) -> _Entries:
        order = models.OrderBy(key="updated_ts", direction=models.Direction.DESC)
        points, _ = self._client.scroll(
            self.collection,
            scroll_filter=where,
            limit=limit,
            order_by=order,
            with_payload=True,
        )
        return [payload_entry(point.payload or {}) for point in points]

    def _all(self, where: models.Filter) -> _Entries:
        entries: _Entries = []
        offset: Any = None
        while True:
            points, offset = self._client.scroll(
                self.collection,
                scroll_filter=where,
                limit=_PAGE,
                offset=offset,
                with_payload=True,
            )
            entries += [payload_entry(point.payload or {}) for point in points]
            if offset is None:
                return entries

    def get(self, key: str, *, agents: Sequence[str]) -> MemoryEntry | None:
        """Return the live row with that key, the first agent in ``agents`` winning."""
        if not self._ready(agents):
            return None
        ids = [point_id(agent, key) for agent in agents]
        found = self._client.retrieve(self.collection, ids=ids, with_payload=True)
        live = {str(p.id): p.payload for p in found if p.payload and p.payload["live"]}
        return next((payload_entry(live[pid]) for pid in ids if pid in live), None)

    def list(
        self,
        *,
        agents: Sequence[str],
        category: str | None = None,
        session: str | None = None,
        limit: int = 1000,
    ) -> _Entries:
        """Return live rows, newest first (strict session filter)."""
        if not self._ready(agents):
            return []
        where = scope_filter(agents, session, strict=True, category=category)
        return self._newest(where, limit)

    def _existing(self, agent: str, key: str) -> dict[str, Any] | None:
        if not self._client.collection_exists(self.collection):
            return None
        pid = point_id(agent, key)
        found = self._client.retrieve(self.collection, ids=[pid], with_payload=True)
        return found[0].payload if found else None

    def forget(self, key: str, *, agent: str) -> bool | Unsupported:
        """Delete ``agent``'s point with that key; False when there was none."""
        if self._existing(agent, key) is None:
            return False
        selector = models.PointIdsList(points=[point_id(agent, key)])
        self._client.delete(self.collection, points_selector=selector, wait=True)
        return True

    def supersede(
        self, key: str, *, agent: str, superseded_by: str
    ) -> bool | Unsupported:
        """Hide ``agent``'s point with that key (payload ``live = false``)."""
        payload = self._existing(agent, key)
        if payload is None or not payload["live"]:
            return False
        self._client.set_payload(
            self.collection,
            payload={"live": False, "superseded_by": superseded_by},
            points=[point_id(agent, key)],
            wait=True,
        )
        return True

    def purge_session(self, session: str, *, agent: str) -> int | Unsupported:
        """Delete ``agent``'s points of a session; return how many."""
        if not self._ready([agent]):
            return 0
        where = scope_filter([agent], session, strict=True, live=False)
        found = self._client.count(self.collection, count_filter=where, exact=True)
        selector = models.FilterSelector(filter=where)
        self._client.delete(self.collection, points_selector=selector, wait=True)
        return found.count

    def count(self, *, agents: Sequence[str]) -> int:
        """Return how many live points ``agents`` have."""
        if not self._ready(agents):
            return 0
        where = scope_filter(agents)
        return self._client.count(self.collection, count_filter=where, exact=True).count

    def export(
        self,
        *,
        agents: Sequence[str],
        session: str | None = None,
        category: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> _Entries:
        """Return every live row matching the filters, oldest first."""
        if not self._ready(agents):
            return []
        where = scope_filter(
            agents, session, since=since, until=until, strict=True, category=category
        )
        rows = self._all(where)
        return sorted(rows, key=lambda e: (e.created_at, e.agent, e.key))

    def health(self) -> bool:
        """Return whether the client can list collections."""
        try:
            self._client.get_collections()
        except Exception:  # noqa: BLE001 - any client failure (HTTP, gRPC, local lock) is "unhealthy"
            return False
        return True

    def applied_position(self) -> int:
        """Return the last ledger position applied (0: none)."""
        return int(self._meta_payload().get("applied_position", 0))

    def apply(self, events: Sequence[Recorded], position: int) -> None:
        """Apply events above the position, then record it in the side collection.

        Upserts by deterministic id and deletes are idempotent, so a crash before
        the position is saved re-applies them harmlessly.
        """
        apply_in_order(self, events, position, self._save_position)

    def _save_position(self, position: int) -> None:
        self._save_meta(applied_position=position)

    def bind(self, ledger_id: str | None, head: LedgerHead) -> bool:
        """Tie the collection to the ledger it derives from; return whether emptied.

        The side collection's meta point records the ledger's id. A collection
        whose meta names another ledger, or whose applied position is past
        ``head``, is deleted and made again empty (position 0); then
        ``ledger_id`` is recorded. The caller catches up from the ledger's
        memory events.
        """
        meta = self._meta_payload()
        recorded = meta.get("ledger_id")
        applied = int(meta.get("applied_position", 0))
        stale = applied > head_position(head) or (
            recorded is not None and ledger_id is not None and recorded != ledger_id
        )
        if stale:
            if self._client.collection_exists(self.collection):
                self._client.delete_collection(self.collection)
            self._save_meta(applied_position=0)
            if self._dims() > 0:
                self._ensure_collection(self._dims())
        if ledger_id is not None and recorded != ledger_id:
            self._save_meta(ledger_id=ledger_id)
        return stale

    def close(self) -> None:
        """Close the client (releases a local path's lock)."""
        self._client.close()
