"""The vector side of the SQLite memory: embedder, cache, identity and matrix.

Writes get their vectors here (cache first, then one embedder call for the
misses); a failing embedder is recorded and the write goes on without a vector.
A hybrid recall's query vector is computed, and the matrix searched with it, on
a worker thread (:meth:`EmbeddingStage.begin_search`), so the keyword leg runs on
the caller's thread meanwhile (a model and numpy release the GIL while they
compute; the database is only ever used on the caller's thread, which holds its
lock until the search is collected, so no write moves the matrix under the
worker); with no keyword leg, or an embedder that computes on several threads
itself (``computes_in_parallel``: the keyword leg would only take a core from
it), both happen on the caller's thread.
Queries get the scope's nearest rows from the in-memory matrix, which follows
this connection's writes row by row and is reloaded when another connection has
committed (``PRAGMA data_version`` changed).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from turnledger.projections.memory.embedding import (
    Embedder,
    EmbedderError,
    EmbeddingIdentity,
)
from turnledger.projections.memory.sqlite._schema import (
    Database,
    stamp_identity,
    stored_identity,
)
from turnledger.projections.memory.sqlite._scope import Scope
from turnledger.projections.memory.sqlite._vectors import VectorIndex, VectorRow
from turnledger.projections.memory.sqlite.cache import EmbeddingCache, content_hash

_VECTOR_COLUMNS = "rowid, id, agent, session, category, created_us, embedding"
_CHUNK = 500


Hits = dict[int, tuple[str, float]]
"""``{rowid: (entry id, cosine)}``."""


def vector_blob(vector: Sequence[float], dims: int) -> bytes:
    """Encode an embedder's vector as little-endian float32 bytes.

    Raises:
        EmbedderError: It is not ``dims`` finite numbers (in float32 range).
    """
    try:
        array = np.asarray(vector, dtype="<f4")
    except (TypeError, ValueError):
        msg = f"Expected {dims} numbers in an embedding, found {type(vector).__name__}"
        raise EmbedderError(msg) from None
    if array.shape != (dims,):
        msg = f"Expected a {dims}-dimension embedding, found shape {array.shape}"
        raise EmbedderError(msg)
    if not np.isfinite(array).all():
        msg = "Expected finite numbers in an embedding"
        raise EmbedderError(msg)
    return array.tobytes()


class PendingSearch:
    """A query's vector search under way: its vector and its nearest rows.

    ``future`` gives ``(fresh vectors to cache, the query's vector, hits)``.
    """

    __slots__ = ("future",)

    def __init__(
        self, future: Future[tuple[dict[str, bytes], bytes | None, Hits]]
    ) -> None:
        self.future = future


class EmbeddingStage:
    """Vectors for writes and queries of one backend.

    Args:
        db: The memory database.
        embedder: The embedder (dims 0: the stage is off).
        cache_size: How many vectors the cache keeps.
        probes: The vector index's inverted lists per search (None: exact).

    Attributes:
        failures: How many embedder calls failed since the backend opened.
        last_error: The last failure, as ``Type: message``.
    """

    def __init__(
        self,
        db: Database,
        embedder: Embedder,
        cache_size: int,
        *,
        probes: int | None = None,
    ) -> None:
        self._db = db
        self._embedder = embedder
        self.identity: EmbeddingIdentity = embedder.identity
        self.similarity_range: tuple[float, float] = getattr(
            embedder, "similarity_range", (0.0, 1.0)
        )
        self.cache = EmbeddingCache(db.conn, cache_size)
        # An embedder that computes on several threads gains nothing from a
        # keyword leg run beside it (begin_search runs on the caller's thread).
        self._parallel = getattr(embedder, "computes_in_parallel", False) is True
        # An embedder offering a kernel runs a model in this process: BLAS's
        # spinning pool would take its CPU.
        self.vectors = VectorIndex(
            self.identity.dims,
            getattr(embedder, "int8_product", None),
            blas_pool=not hasattr(embedder, "int8_product"),
            probes=probes,
        )
        self.failures = 0
        self.last_error: str | None = None
        self._seen_version: int | None = None
        self._worker: ThreadPoolExecutor | None = None

    @property
    def live(self) -> bool:
        """Whether vectors are computed at all (the embedder has dims > 0)."""
        return self.identity.dims > 0

    def adopt_identity(self) -> None:
        """Stamp the embedder's identity; drop another model's vectors.

        Same identity: nothing. None stored: stamp it. Another one: every vector
        is set to NULL (content kept, recall degrades to keyword until
        ``reindex``), the cache is cleared and the new identity stamped.
        """
        if not self.live:
            return
        with self._db.transaction() as conn:
            stored = stored_identity(conn)
            if stored == self.identity:
                return
            if stored is not None:
                conn.execute("UPDATE memories SET embedding = NULL")
                self.cache.clear()
                self.vectors.reset()
            stamp_identity(conn, self.identity)

    def embed(self, texts: Sequence[str]) -> list[bytes | None]:
        """Return a float32 vector per text (``None`` where embedding failed).

        Call it outside any transaction: the embedder may be slow, and the
        cache reads and writes take their own short transactions.
        """
        if not self.live or not texts:
            return [None] * len(texts)
        hashes = [content_hash(t) for t in texts]
        with self._db.transaction():
            known = self.cache.get_many(hashes)
        missing = {h: t for h, t in zip(hashes, texts, strict=True) if h not in known}
        fresh = self._embed_missing(missing)
        if fresh:
            with self._db.transaction():
                self.cache.put_many(fresh)
        known.update(fresh)
        return [known.get(h) for h in hashes]

    def begin_search(
        self, text: str, scope: Scope, window: int, *, overlap: bool = True
    ) -> PendingSearch | None:
        """Start a query's vector search; collect it with :meth:`finish_search`.

        Call it holding the database's lock, and keep holding it until
        :meth:`finish_search` returns: the matrix is brought up to date here,
        on the caller's thread, and may then be read by the worker thread.
        With ``overlap`` (the caller has other work meanwhile: the keyword
        leg) and a single-threaded embedder, one worker thread (started on
        first use, one per backend) computes the query's vector (unless
        cached) and searches the matrix with it while the caller goes on;
        else both happen here (a hand-over to a thread would only add its
        latency). None when vectors are off.
        """
        if not self.live:
            return None
        self._load()
        key = content_hash(text)
        known: dict[str, bytes] = {}
        if self.cache.capacity:
            with self._db.transaction():
                known = self.cache.get_many([key])

        def work() -> tuple[dict[str, bytes], bytes | None, Hits]:
            fresh = {} if key in known else self._embed_missing({key: text})
            vector = known.get(key) or fresh.get(key)
            hits = {} if vector is None else self._search(vector, scope, window)
            return fresh, vector, hits

        if not overlap or self._parallel:
            done: Future[tuple[dict[str, bytes], bytes | None, Hits]] = Future()
            done.set_result(work())
            return PendingSearch(done)
        if self._worker is None:
            self._worker = ThreadPoolExecutor(1, thread_name_prefix="memory-embed")
        return PendingSearch(self._worker.submit(work))

    def finish_search(self, pending: PendingSearch) -> tuple[bytes | None, Hits]:
        """Wait for the search: the query's vector (None: it failed) and hits."""
        fresh, vector, hits = pending.future.result()
        if fresh and self.cache.capacity:
            with self._db.transaction():
                self.cache.put_many(fresh)
        return vector, hits

    def close(self) -> None:
        """Stop the worker thread (after the call it may be running) and the scan's."""
        if self._worker is not None:
            self._worker.shutdown(wait=True)
            self._worker = None
        self.vectors.close()

    def _embed_missing(self, missing: dict[str, str]) -> dict[str, bytes]:
        if not missing:
            return {}
        dims = self.identity.dims
        try:
            vectors = self._embedder.embed(list(missing.values()))
            if len(vectors) != len(missing):
                msg = f"Expected {len(missing)} vectors, found {len(vectors)}"
                raise EmbedderError(msg)  # noqa: TRY301 - one handler for every failure
            blobs = [vector_blob(v, dims) for v in vectors]
        except Exception as e:  # noqa: BLE001 - an embedder is a plug-in: whatever it raises, the write is kept
            self.failures += 1
            self.last_error = f"{type(e).__name__}: {e}"
            return {}
        return dict(zip(missing, blobs, strict=True))

    def _search(self, vector: bytes, scope: Scope, window: int) -> Hits:
        """``{rowid: (entry id, cosine)}`` of the scope's nearest rows (loaded)."""
        query = np.frombuffer(vector, dtype="<f4")
        hits = self.vectors.search(query, scope, window)
        return {rowid: (entry_id, sim) for rowid, entry_id, sim in hits}

    def similarities(
        self, vector: bytes, rowids: Sequence[int]
    ) -> dict[int, tuple[str, float]]:
        """Return ``{rowid: (entry id, cosine)}`` for these rows (with vectors)."""
        self._load()
        return self.vectors.similarities(np.frombuffer(vector, dtype="<f4"), rowids)

    def _load(self) -> None:
        conn = self._db.conn
        version = int(conn.execute("PRAGMA data_version").fetchone()[0])
        if version != self._seen_version:
            # Another connection committed: the matrix may be stale.
            self.vectors.reset()
            self._seen_version = version
        if not self.vectors.loaded:
            rows = conn.execute(
                f"SELECT {_VECTOR_COLUMNS} FROM memories "
                "WHERE embedding IS NOT NULL AND superseded_by IS NULL"
            ).fetchall()
            self.vectors.load(rows)

    def refresh(self, rowids: Sequence[int]) -> None:
        """Re-read these rows into the matrix (after this connection wrote them)."""
        if not self.vectors.loaded or not rowids:
            return
        conn = self._db.conn
        for start in range(0, len(rowids), _CHUNK):
            chunk = rowids[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            for row in conn.execute(
                f"SELECT {_VECTOR_COLUMNS}, superseded_by IS NULL FROM memories "
                f"WHERE rowid IN ({marks})",
                chunk,
            ):
                rowid, entry_id, agent, session, category, created, blob, live = row
                vector = blob if live and blob else b""
                self.vectors.put(
                    VectorRow(
                        rowid, entry_id, agent, session, category, created, vector
                    )
                )

    def drop(self, rowids: Sequence[int]) -> None:
        """Remove rows from the matrix (deleted or superseded)."""
        if self.vectors.loaded:
            self.vectors.drop(rowids)
