"""The default long-term memory backend: one SQLite file, FTS5 and numpy vectors.

One row per (agent, key): storing a key again updates the row in place and keeps
its id and creation time. Keyword search is FTS5 (external content, kept in step
by triggers); vectors are float32 BLOBs searched by brute-force cosine over an
in-memory matrix, computed after the write by a background thread (``_embedding``:
a row is found by keywords until its vector is committed; in ``embedding`` search
mode, which runs no keyword leg, not at all until then) and one per window of
a long entry (the entry scores its best window's cosine). Memory events are
applied together with the ledger position in one transaction, so each event takes
effect exactly once. Reads by key and filter (``get``, ``list``, ``count``,
``export``) come from the ``_sqlite_reads`` mixin.

Recall (see :meth:`SQLiteMemory.recall`):

1. an empty or ``*`` query returns the scope's newest rows, unscored; a query
   with no content term (stop words, one-letter tokens) matches nothing;
2. keyword stage: a safe, stop-word-bounded FTS5 query (``_fts``) returns up
   to ``2 * limit`` rows scored by query coverage (the IDF-weighted share of
   the query's terms a row holds, comparable across queries), equal scores
   ordered by BM25; every statistic is the scope's own (row count, term
   counts, average length), never the whole table's; a ``conversation`` row
   lends half its BM25 and score to its neighbours in its thread (``_threads``,
   :mod:`~policies.threads`: the reply beside a matching question is found);
3. vector stage (in hybrid mode the query's embedding is computed, and the
   matrix searched with it, on a worker thread while the keyword stage runs):
   the query's embedding against the scope's
   vectors, keeping cosine > 0, up to ``2 * limit``; the keyword candidates'
   cosines are computed too; cosines are rescaled to the embedder's declared
   ``similarity_range`` (the packaged local model: 0.35 -> 0.001, 0.7 -> 1; a
   positive cosine under 0.35 scores under 0.001, ranked, not injected:
   :func:`~policies.relevance.calibrate`);
4. fusion (``_hybrid``): ordered by reciprocal rank fusion of the legs'
   ranks, ties by score then id; scored by a weighted probabilistic OR of
   the legs that measured each row (a live leg that missed the row counts 0),
   the vector leg's score discounted by the share of the query's weight no scoped row
   holds (:func:`~policies.relevance.discount_absent`: "finnish" in a store
   that never mentions it); a row that scores 0 (no positive cosine, no
   keyword) is not returned;
5. if nothing matched, a bounded LIKE fallback (``_sqlite_like``) scored by the
   share of content words found, at most 0.5.

With a cipher key the file is a SQLCipher database (``_schema``): the
stages above run on the open database as on a clear one.

The agent allowlist, the session (with session-less core/daily rows visible
from every session) and the time window are applied INSIDE every stage's query,
before ranking, normalising and limiting. An "unlimited" limit (0) means 1,024.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Final, Literal, Self, TypeAlias

from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import MemoryForgotten, MemoryStored, MemorySuperseded
from turnledger.policies.recall_scope import bound_recall_limit
from turnledger.policies.relevance import calibrate, is_meaningful_query
from turnledger.projections.base import LedgerHead
from turnledger.projections.memory.apply import MEMORY_EVENT_TYPES, new_memory
from turnledger.projections.memory.embedding import (
    Embedder,
    EmbeddingIdentity,
    NoEmbedder,
)
from turnledger.projections.memory.errors import typed_memory_errors
from turnledger.projections.memory.protocol import (
    Capabilities,
    MemoryEntry,
    NewMemory,
    is_recent_query,
)
from turnledger.projections.memory.sqlite import _writes as writes
from turnledger.projections.memory.sqlite._embedding import EmbeddingStage
from turnledger.projections.memory.sqlite._fts import (
    NOTHING,
    EdgeCache,
    FrequentTerms,
    StatsCache,
    keyword_search,
)
from turnledger.projections.memory.sqlite._hybrid import fuse
from turnledger.projections.memory.sqlite._ivf import DEFAULT_PROBES, check_probes
from turnledger.projections.memory.sqlite._like import like_search
from turnledger.projections.memory.sqlite._reads import (
    SQLiteReads,
)
from turnledger.projections.memory.sqlite._schema import (
    Database,
    bind_ledger,
    entry_from_row,
    hydrate,
)
from turnledger.projections.memory.sqlite._scope import make_scope
from turnledger.projections.memory.sqlite.cache import DEFAULT_CACHE_SIZE

SearchMode: TypeAlias = Literal["hybrid", "bm25", "embedding"]
"""``hybrid``: keyword and vectors; ``bm25``: keyword only; ``embedding``:
vectors only (with no embedder, straight to the LIKE fallback)."""

SEARCH_MODES: Final = frozenset({"hybrid", "bm25", "embedding"})
"""Every :data:`SearchMode`."""

CLOSE_DRAIN_SECONDS: Final = 1.0
"""How long :meth:`SQLiteMemory.close` goes on embedding rows lacking vectors."""


DEFAULT_VECTOR_PROBES: Final = DEFAULT_PROBES
"""The inverted lists a search scores with ``[embedding] index = "ivf"``."""


@typed_memory_errors("sqlite")
class SQLiteMemory(SQLiteReads):
    """Long-term memory in one SQLite file.

    Args:
        path: The database file (created if missing), or ``:memory:``.
        embedder: Computes vectors; ``None`` (or dims 0) means keyword only.
        cache_size: How many vectors the embedding cache keeps (0: none).
        vector_weight: The vector modality's weight in fused scores.
        keyword_weight: The keyword modality's weight in fused scores.
        search_mode: ``hybrid``, ``bm25`` or ``embedding``.
        vector_probes: None (the default): vector searches are exact. A
            number: a search over 16,384 rows or more in scope scores only the
            rows of the query's nearest inverted lists, this many lists
            (approximate; ``[embedding] index = "ivf"``, see ``_vector_ivf``).
        cipher_key: The base64 cipher key (as ``open_store`` takes it); None
            reads ``TURNLEDGER_CIPHER_KEY``, ``""`` means none. With a key the
            file is encrypted (SQLCipher); ``:memory:`` never is.
        background_vectors: True (the default): a thread embeds the rows
            lacking vectors after each write. False: they wait for
            :meth:`embed_pending`, :meth:`reindex` or :meth:`close`.

    Raises:
        ValueError: A weight is negative, both are zero, the cache size is
            negative, the search mode is unknown, or ``vector_probes`` < 1.
        FileKeyError: The file does not fit the key (encrypted with another,
            encrypted without a key given, or in clear with a key given).
        SQLCipherMissingError: A key is given without the ``sqlcipher`` extra.
    """

    name = "sqlite"

    def __init__(
        self,
        path: str | Path,
        *,
        embedder: Embedder | None = None,
        cache_size: int = DEFAULT_CACHE_SIZE,
        vector_weight: float = 0.7,
        keyword_weight: float = 0.3,
        search_mode: SearchMode = "hybrid",
        vector_probes: int | None = None,
        cipher_key: str | None = None,
        background_vectors: bool = True,
    ) -> None:
        _check_settings(vector_weight, keyword_weight, search_mode, cache_size)
        check_probes(vector_probes, "vector_probes")  # before the file opens
        self.vector_weight = vector_weight
        self.keyword_weight = keyword_weight
        self.search_mode: SearchMode = search_mode
        self._db = Database(
            path, on_rollback=self._forget_vectors, cipher_key=cipher_key
        )
        self._embedding = EmbeddingStage(
            self._db,
            embedder or NoEmbedder(),
            cache_size,
            probes=vector_probes,
            background=background_vectors,
        )
        self.capabilities = Capabilities(vectors=self._embedding.live)
        self._frequent: FrequentTerms = {}
        self._stats: StatsCache = {}
        self._edges: EdgeCache = {}
        self._embedding.adopt_identity()

    @property
    def identity(self) -> EmbeddingIdentity:
        """The embedder's provider, model and dimensions."""
        return self._embedding.identity

    @property
    def embedding_failures(self) -> int:
        """How many embedder calls failed since this handle opened."""
        return self._embedding.failures

    @property
    def last_embedding_error(self) -> str | None:
        """The last embedder failure, as ``Type: message``."""
        return self._embedding.last_error

    # -- writes -------------------------------------------------------------

    def store(self, entry: NewMemory) -> MemoryEntry:
        """Upsert the entry per (agent, key); the id and creation time are kept.

        The row and its keywords are committed at once; its vector is computed
        afterwards, off this call, by the background thread (the row is found
        by keywords until then; unchanged content keeps its vector). A failing
        embedder never loses the write: the row stays without a vector.
        """
        with self._db.transaction() as conn:
            row = writes.upsert(conn, entry, None)
            self._embedding.refresh([row[0]])
        self._embedding.wake()
        return entry_from_row(row)

    def forget(self, key: str, *, agent: str) -> bool:
        """Delete ``agent``'s row with that key; False when there was none."""
        with self._db.transaction() as conn:
            gone = writes.forget(conn, agent, key)
            self._embedding.drop(gone)
        return bool(gone)

    def supersede(self, key: str, *, agent: str, superseded_by: str) -> bool:
        """Hide ``agent``'s row with that key (storing the key again un-hides it)."""
        with self._db.transaction() as conn:
            hidden = writes.supersede(conn, agent, key, superseded_by)
            self._embedding.drop(hidden)
        return bool(hidden)

    def purge_session(self, session: str, *, agent: str) -> int:
        """Delete ``agent``'s rows of a session; return how many."""
        with self._db.transaction() as conn:
            gone = writes.purge_session(conn, agent, session)
            self._embedding.drop(gone)
        return len(gone)

    def apply(self, events: Sequence[Recorded], position: int) -> None:
        """Apply memory events above the stored position, then record ``position``.

        The effects and the position are written in ONE transaction, so a crash
        leaves either both or neither, and re-applying is a no-op. Vectors are
        computed afterwards by the background thread, as for :meth:`store`.
        """
        done = self.applied_position()
        if position <= done:
            return
        todo = [
            r
            for r in events
            if r.position > done and isinstance(r.event, MEMORY_EVENT_TYPES)
        ]
        entries = {
            r.position: new_memory(r) for r in todo if isinstance(r.event, MemoryStored)
        }
        stored = {at: (entry, None) for at, entry in entries.items()}
        with self._db.transaction() as conn:
            done = writes.position(conn)  # another handle may have applied some
            batch: list[writes.Write] = []
            for recorded in (r for r in todo if r.position > done):
                if recorded.position in stored:
                    batch.append(stored[recorded.position])
                    continue
                self._embedding.refresh(writes.upsert_many(conn, batch))
                batch = []
                self._apply_removal(conn, recorded.event)
            self._embedding.refresh(writes.upsert_many(conn, batch))
            writes.save_position(conn, position)
        if entries:
            self._embedding.wake()

    def reindex(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Rebuild the full-text index and embed every live row lacking a vector.

        The vectors the background thread has not computed yet are computed
        here, on the caller's thread, in batches of ``BATCH_ROWS`` (64),
        each batch committed on its own (an interrupted reindex resumes where
        it stopped).

        Args:
            progress: Called with ``(rows done, rows to do)`` after each batch.

        Returns:
            How many rows got a vector here (0 without an embedder).
        """
        with self._db.transaction() as conn:
            conn.execute("INSERT INTO memories_fts (memories_fts) VALUES ('rebuild')")
        return self._embedding.embed_pending(progress)

    @property
    def pending_vectors(self) -> int:
        """How many live rows still wait for their vector (0: vectors off)."""
        return self._embedding.pending()

    def embed_pending(self) -> int:
        """Embed, on this thread, every live row lacking a vector; return how many.

        What the background thread would do, now (each row tried once).
        """
        return self._embedding.embed_pending()

    # -- reads --------------------------------------------------------------

    def recall(
        self,
        query: str,
        *,
        agents: Sequence[str],
        limit: int = 5,
        session: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[MemoryEntry]:
        """Return the best matches among ``agents``' rows, best first.

        See the module docstring for the stages. A recent query (empty or ``*``)
        returns the newest rows, unscored. ``limit`` 0 means 1,024, and no limit
        exceeds 1,024.

        Raises:
            RecallConfigError: ``limit`` is negative.
        """
        count = bound_recall_limit(limit)
        scope = make_scope(agents, session=session, since=since, until=until)
        if not scope.agents:
            return []
        if is_recent_query(query):
            return self._newest(scope, count)
        if not is_meaningful_query(query):
            return []  # stop words or one-letter tokens only: nothing matches
        keyword_live = self.search_mode != "embedding"
        window = 2 * count
        with self._db.read() as conn:
            pending = (  # on the worker thread while the keyword leg runs
                self._embedding.begin_search(query, scope, window, overlap=keyword_live)
                if self.search_mode != "bm25"
                else None
            )
            try:
                matches = (  # while the query's vector is computed and searched
                    keyword_search(
                        conn,
                        query,
                        scope,
                        window,
                        frequent=self._frequent,
                        stats_cache=self._stats,
                        edge_cache=self._edges,
                    )
                    if keyword_live
                    else NOTHING
                )
            finally:  # the worker reads the matrix: never left running unlocked
                vector, near = (
                    (None, {})
                    if pending is None
                    else self._embedding.finish_search(pending)
                )
            keyword = matches.rows
            if vector is not None:
                missing = [rowid for rowid in keyword if rowid not in near]
                near |= self._embedding.similarities(vector, missing)
                low, high = self._embedding.similarity_range
                near = {
                    rowid: (entry_id, calibrate(cosine, low, high))
                    for rowid, (entry_id, cosine) in near.items()
                }
            fused = fuse(
                near,
                keyword,
                vector_weight=self.vector_weight,
                keyword_weight=self.keyword_weight,
                keyword_live=keyword_live,
                absent=matches.absent,
            )[:count]
            if fused:
                return hydrate(conn, fused)
            found = like_search(conn, query, scope, count)
        return [entry_from_row(row, score) for row, score in found]

    def health(self) -> bool:
        """Return whether the database answers."""
        try:
            with self._db.read() as conn:
                conn.execute("SELECT 1").fetchone()
        except sqlite3.Error:
            return False
        return True

    def applied_position(self) -> int:
        """Return the last ledger position applied to this store (0: none)."""
        with self._db.read() as conn:
            return writes.position(conn)

    def scrub(self) -> None:
        """Leave no trace of deleted rows in the database files.

        Rows are deleted with ``secure_delete`` on; this also merges the
        full-text index (whose older segments still list a deleted row's
        words), rewrites the file and truncates the write-ahead log. Run after
        forgetting with shredding on; it costs a full rewrite.
        """
        with self._db.read() as conn:
            conn.execute("INSERT INTO memories_fts(memories_fts) VALUES ('optimize')")
            conn.execute("VACUUM")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def bind(self, ledger_id: str | None, head: LedgerHead) -> bool:
        """Tie the database to the ledger it derives from; return whether emptied.

        A database that recorded another ledger's id, or tracks a position
        past ``head`` (read under the database's write lock:
        :data:`~projections.base.LedgerHead`), loses its memories and
        tracking position (the caller catches up from the ledger's memory
        events); then ``ledger_id`` is recorded.
        """
        with self._db.lock:
            emptied = bind_ledger(self._db.conn, ledger_id, head)
        if emptied:
            self._forget_vectors()
            self._frequent.clear()
        return emptied

    def close(self) -> None:
        """Close the database and the threads, after a bounded wait for vectors.

        The background thread's batch under way is committed; then rows
        lacking vectors are embedded here for up to
        :data:`CLOSE_DRAIN_SECONDS` (no batch starts after). Rows still
        lacking one are embedded by a later handle with an embedder (its
        background thread, woken by its first write; its close) or by
        :meth:`reindex`; until then they are found by keywords.
        """
        self._embedding.close(CLOSE_DRAIN_SECONDS)
        self._db.close()
        self._forget_vectors()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        _exc_type: type[BaseException] | None,
        _exc: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- internals ----------------------------------------------------------

    def _forget_vectors(self) -> None:
        self._embedding.vectors.reset()

    def _apply_removal(self, conn: sqlite3.Connection, event: object) -> None:
        if isinstance(event, MemoryForgotten):
            self._embedding.drop(writes.forget(conn, event.agent, event.key))
        elif isinstance(event, MemorySuperseded):
            gone = writes.supersede(conn, event.agent, event.key, event.superseded_by)
            self._embedding.drop(gone)


def _check_settings(vector: float, keyword: float, mode: str, cache: int) -> None:
    if vector < 0 or keyword < 0 or vector + keyword <= 0:
        msg = (
            "Expected non-negative weights with a positive sum, found "
            f"vector_weight={vector}, keyword_weight={keyword}"
        )
        raise ValueError(msg)
    if mode not in SEARCH_MODES:
        msg = f"Expected a search mode in {sorted(SEARCH_MODES)}, found {mode!r}"
        raise ValueError(msg)
    if cache < 0:
        msg = f"Expected a cache size >= 0, found {cache}"
        raise ValueError(msg)
