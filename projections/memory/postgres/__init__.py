"""PostgreSQL memory: tsvector keyword search plus optional vectors (§2.3).

One table per schema, ``UNIQUE(agent, key)`` (the primary key), upserts keeping
the id and creation time. Keyword search uses a generated ``tsvector`` (``simple``
configuration, key weighted above content) with a GIN index; the query is split
into words in Python and each word goes through ``plainto_tsquery`` as a bound
parameter, OR-ed together, so any input is searched for and never parsed as an
operator.

Fixed from the reference: ``ts_rank_cd`` only picks the candidates (agents,
session, time window and supersession applied inside the query, before ranking
and limiting); they are ordered by BM25 on the scope's statistics (a
``conversation`` row lending half its BM25 and score to its thread neighbours,
as on SQLite: :mod:`~turnledger.policies.threads`) and fused with
the vector candidates by reciprocal rank
(:func:`~turnledger.projections.memory.postgres._sql.rank_candidates`); a
candidate's keyword score is SQLite's keyword gate (the IDF-weighted share of
the query's content words it holds, each word's IDF counted on the caller's
scope, with the same allowances for small scopes), never divided by the
batch's best, so the 0.4 relevance floor filters for real;
cosines are calibrated by the embedder's ``similarity_range``; stop words are
never searched for; vectors are used
at recall (pgvector when ``CREATE EXTENSION vector`` works, otherwise a
``float4[]`` column with cosine computed in numpy over the keyword and recency
candidates), blended 0.7/0.3 like SQLite, one vector per entry (the unit mean of
all its windows' vectors:
:func:`~turnledger.projections.memory.embedding.windows.whole_text_vector`, so
nothing of a long entry is cut). Vectors are computed off the write path, as on
SQLite: a write commits its row without one and wakes a background thread
(:class:`~turnledger.projections.memory.embedding.backfill.Backfill`) that
embeds the rows lacking one in batches once the writes pause; until then a row
is found by the keyword leg only. Session-less core/daily facts are
visible from every session on every path. The connection, its transactions and
the schema migration are :mod:`turnledger.projections.memory.postgres._connection`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Final, Literal, TypeAlias

import msgspec
import psycopg
from psycopg import sql

from turnledger.ledger.envelope import Recorded
from turnledger.policies.recall_scope import bound_recall_limit
from turnledger.policies.relevance import is_meaningful_query, token_count
from turnledger.projections.base import LedgerHead, head_position
from turnledger.projections.memory.apply import apply_one
from turnledger.projections.memory.embedding import (
    Embedder,
    EmbedderError,
    EmbeddingIdentity,
    NoEmbedder,
)
from turnledger.projections.memory.embedding.backfill import Backfill
from turnledger.projections.memory.embedding.windows import (
    whole_text_vector,
    whole_text_vectors,
)
from turnledger.projections.memory.errors import typed_memory_errors
from turnledger.projections.memory.postgres._connection import (
    LOCK_TIMEOUT_MS,
    Connection,
    PostgresConnection,
)
from turnledger.projections.memory.postgres._sql import (
    COLUMNS,
    KEYWORD,
    NEAREST,
    PENDING,
    PENDING_COUNT,
    PGVECTOR_SIMILARITY,
    SET_VECTOR,
    THREAD,
    UPSERT,
    RowKey,
    TermStats,
    Vector,
    VectorKind,
    column_type,
    query_words,
    rank_candidates,
    row_entry,
    scope_clause,
    split_url,
    thread_lenders,
    unit_vector,
)
from turnledger.projections.memory.protocol import (
    Capabilities,
    MemoryEntry,
    NewMemory,
    Unsupported,
    is_recent_query,
)

_Entries: TypeAlias = list[MemoryEntry]
_Cursor: TypeAlias = tuple[str, str]

BATCH_ROWS: Final = 64
"""How many rows one backfill (or reindex) batch embeds and commits."""

CLOSE_DRAIN_SECONDS: Final = 1.0
"""How long :meth:`PostgresMemory.close` goes on embedding rows lacking vectors."""

__all__ = [
    "LOCK_TIMEOUT_MS",
    "PostgresMemory",
    "VectorKind",
    "query_words",
    "split_url",
]


def _word_query(i: int) -> sql.Composable:
    """The ``i``-th query word as a tsquery (a bound parameter, never parsed)."""
    return sql.SQL("plainto_tsquery('simple', {})").format(sql.Placeholder(f"w{i}"))


def _tsquery(count: int) -> sql.Composable:
    """The first ``count`` query words OR-ed (:func:`_word_query` each)."""
    return sql.SQL(" || ").join(_word_query(i) for i in range(count))


def _word_params(words: Sequence[str]) -> dict[str, str]:
    """The parameters :func:`_word_query` binds."""
    return {f"w{i}": word for i, word in enumerate(words)}


@typed_memory_errors("postgres")
class PostgresMemory(PostgresConnection):
    """Long-term memory in a PostgreSQL schema.

    Args:
        url: ``postgresql://user@host:port/db?schema=NAME`` (schema default
            ``public``, created if missing).
        embedder: Vectors for recall; ``None`` keeps recall keyword-only.
        vectors: ``auto`` uses pgvector when the extension can be created,
            otherwise ``float4[]``; ``array`` forces the fallback.
        candidate_pool: Keyword and vector/recency candidates per recall.
        background_vectors: True (the default): a thread embeds the rows
            lacking vectors after each write. False: they wait for
            :meth:`embed_pending`, :meth:`reindex` or :meth:`close`.

    Attributes:
        embedding_failures: How many embedder calls failed since this handle
            opened.
        last_embedding_error: The last failure, as ``Type: message``.
    """

    name = "postgres"

    def __init__(
        self,
        url: str,
        *,
        embedder: Embedder | None = None,
        vectors: Literal["auto", "pgvector", "array"] = "auto",
        candidate_pool: int = 200,
        background_vectors: bool = True,
    ) -> None:
        self._conninfo, self.schema = split_url(url)
        self._embedder = embedder
        self._pool = candidate_pool
        self._lock = threading.RLock()
        self._conn = self._connect()
        vectors_on = embedder is not None and embedder.identity.dims > 0
        self.capabilities = Capabilities(vectors=vectors_on)
        self.vector_kind: VectorKind = self._migrate(vectors)
        self.embedding_failures = 0
        self.last_embedding_error: str | None = None
        self._background = background_vectors and vectors_on
        self._backfill: Backfill[_Cursor] = Backfill(
            self._embed_batch, ("", ""), self._failed, name="memory-vectors-pg"
        )

    def _vector(self, text: str) -> Vector | None:
        if not self.capabilities.vectors or self._embedder is None:
            return None
        try:  # every window of a long text (see embedding.windows)
            vector = whole_text_vector(self._embedder, text)
        except EmbedderError:
            return None  # the row is kept without its vector, as on SQLite
        return unit_vector(vector)

    def _vector_param(self, vector: Vector | None) -> Any:
        if vector is None:
            return None
        values = [float(x) for x in vector]
        return str(values) if self.vector_kind == "pgvector" else values

    def store(self, entry: NewMemory) -> MemoryEntry | Unsupported:
        """Upsert per (agent, key), keeping the id and creation time.

        The row and its keywords are committed at once; its vector is computed
        afterwards, off this call, by the background thread (the row is found
        by keywords until then; unchanged content keeps its vector). A failing
        embedder never loses the write: the row stays without a vector.
        """
        params = {
            **msgspec.structs.asdict(entry),
            "id": entry.entry_id,
            "tokens": token_count(entry.key, entry.content),
        }
        with self._transaction() as conn:
            row = conn.execute(self._sql(UPSERT), params).fetchone()
        assert row is not None  # noqa: S101 - RETURNING always yields the row
        if self._background:
            self._backfill.wake()
        return row_entry(row)

    # -- vectors, off the write path -----------------------------------------

    @property
    def identity(self) -> EmbeddingIdentity:
        """The embedder's provider, model and dimensions."""
        return (self._embedder or NoEmbedder()).identity

    @property
    def pending_vectors(self) -> int:
        """How many live rows still wait for their vector (0: vectors off)."""
        return self.count_pending()

    def count_pending(self) -> int:
        """:attr:`pending_vectors` (a method: its errors leave typed)."""
        if not self.capabilities.vectors:
            return 0
        with self._transaction() as conn:
            row = conn.execute(self._sql(PENDING_COUNT)).fetchone()
        return int(row[0]) if row else 0

    def embed_pending(
        self,
        progress: Callable[[int, int], None] | None = None,
        *,
        deadline: float | None = None,
    ) -> int:
        """Embed, on this thread, every live row lacking a vector; return how many.

        What the background thread would do, now: batches of
        :data:`BATCH_ROWS`, each committed on its own, each row tried once.

        Args:
            progress: Called with ``(rows done, rows to do)`` after each batch.
            deadline: A ``time.monotonic()`` after which no batch starts.
        """
        if not self.capabilities.vectors:
            return 0
        return self._backfill.drain(self.count_pending(), progress, deadline=deadline)

    def reindex(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Embed every live row lacking a vector (the keyword index is generated).

        Rows lack one when written before vectors were on or under another
        embedder, or when the background thread had not reached them.

        Args:
            progress: Called with ``(rows done, rows to do)`` after each batch.

        Returns:
            How many rows got a vector here (0 without an embedder).
        """
        return self.embed_pending(progress)

    def _embed_batch(self, after: _Cursor) -> tuple[_Cursor, int, int]:
        """Embed the next rows after ``after``: (next cursor, rows, embedded)."""
        assert self._embedder is not None  # noqa: S101 - vectors on: an embedder
        params = {"agent": after[0], "key": after[1], "limit": BATCH_ROWS}
        with self._transaction() as conn:
            rows = conn.execute(self._sql(PENDING), params).fetchall()
        if not rows:
            return after, 0, 0
        try:  # outside any transaction: the embedder may be slow
            vectors = whole_text_vectors(self._embedder, [row[2] for row in rows])
        except EmbedderError as e:
            self._failed(e)
            vectors = [None] * len(rows)
        found = [
            (self._vector_param(unit), agent, key, content)
            for (agent, key, content), vector in zip(rows, vectors, strict=True)
            if vector is not None and (unit := unit_vector(vector)) is not None
        ]
        written = 0
        if found:
            column = sql.SQL(column_type(self.vector_kind))
            update = self._sql(SET_VECTOR, column=column)
            with self._transaction() as conn, conn.cursor() as cursor:
                cursor.executemany(update, found)
                written = max(0, cursor.rowcount)  # not the rows rewritten since
        return (rows[-1][0], rows[-1][1]), len(rows), written

    def _failed(self, error: Exception) -> None:
        """Record an embedding failure (the rows stay without vectors)."""
        self.embedding_failures += 1
        self.last_embedding_error = f"{type(error).__name__}: {error}"

    def _select(
        self, where: str, params: dict[str, Any], tail: str
    ) -> list[tuple[Any, ...]]:
        query = self._sql(
            f"SELECT {COLUMNS} FROM {{table}} WHERE {{where}} {tail}", where=where
        )
        with self._transaction() as conn:
            return conn.execute(query, params).fetchall()

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
        """Return the best matches among ``agents``' rows, best first.

        Keyword scores are SQLite's keyword gate: the IDF-weighted share of
        the query's content words a row holds, on the caller's scope
        (comparable across queries); with an embedder, the cosine similarity,
        calibrated by the embedder's ``similarity_range``, is blended in
        (0.7/0.3). A query of stop words only matches nothing.
        """
        limit = bound_recall_limit(limit)
        if not agents:
            return []
        where, params = scope_clause(agents, session, since=since, until=until)
        if is_recent_query(query):
            params["limit"] = limit
            tail = "ORDER BY updated_at DESC, key LIMIT %(limit)s"
            return [row_entry(row) for row in self._select(where, params, tail)]
        if not is_meaningful_query(query):
            return []  # stop words or one-letter words only: nothing matches
        vector = self._vector(query)
        params |= {
            "pool": self._pool,
            "qvec": self._vector_param(vector),
            "dims": 0 if vector is None else len(vector),
        }
        words = query_words(query)
        rows, stats = self._keyword_rows(words, where, params, vector)
        threads, borrowed = self._threads(
            rows, thread_lenders(rows, stats), where, params, vector
        )
        rows += borrowed
        if vector is not None:
            rows += self._vector_rows(where, params, vector)
        ranked = rank_candidates(
            rows,
            vector,
            stored=self.vector_kind,
            query=query,
            similarity_range=getattr(self._embedder, "similarity_range", (0.0, 1.0)),
            stats=stats,
            threads=threads,
        )
        return ranked[:limit]

    def _threads(
        self,
        rows: Sequence[Sequence[Any]],
        lenders: Sequence[RowKey],
        where: str,
        params: dict[str, Any],
        vector: Vector | None,
    ) -> tuple[dict[RowKey, tuple[RowKey, ...]], list[tuple[Any, ...]]]:
        """Return the lenders' thread neighbours and the rows no leg found.

        Each lender's neighbours in its conversation thread
        (:mod:`~policies.threads`), within the scope, and the rows of those
        neighbours that are not among the candidates ``rows`` already.
        """
        if not lenders:
            return {}, []
        agents, keys = (list(column) for column in zip(*lenders, strict=True))
        query = self._sql(THREAD, extra=self._extra(vector), where=where)
        with self._transaction() as conn:
            found = conn.execute(  # never a generic plan: it scans the table
                query,
                params | {"lender_agents": agents, "lender_keys": keys},
                prepare=False,
                binary=True,  # the vectors as numpy arrays (Float32Vectors)
            ).fetchall()
        threads: dict[RowKey, list[RowKey]] = {}
        known = {(row[0], row[1]) for row in rows}
        borrowed: list[tuple[Any, ...]] = []
        for lender, *neighbour in found:
            agent, key = neighbour[0], neighbour[1]
            threads.setdefault((agent, lender), []).append((agent, key))
            if (agent, key) not in known:  # no leg found it: read it here
                known.add((agent, key))
                borrowed.append((*neighbour, None, None, None))
        return {k: tuple(v) for k, v in threads.items()}, borrowed

    def _extra(self, vector: Vector | None) -> sql.Composable:
        """The column recall reads to score a row's vector."""
        if vector is None:
            return sql.SQL("NULL")
        if self.vector_kind == "array":
            return sql.SQL("embedding")
        return sql.SQL(PGVECTOR_SIMILARITY)

    def _keyword_rows(
        self,
        words: Sequence[str],
        where: str,
        params: dict[str, Any],
        vector: Vector | None,
    ) -> tuple[list[tuple[Any, ...]], TermStats | None]:
        """The keyword candidates, and the scope's statistics of the words.

        The statistics are BM25's IDF (the scope's row count, each word's count
        among its rows), taken in the same query; when no row holds a word,
        the scope's row count alone (every word counted 0: the share of the
        query no row holds discounts the vector leg). ``None`` without words.
        """
        if not words:
            return [], None
        held = sql.SQL(", ").join(
            sql.SQL("search @@ {}").format(_word_query(i)) for i in range(len(words))
        )
        counts = sql.SQL(", ").join(
            sql.SQL("count(*) FILTER (WHERE held[{}]) OVER ()").format(i + 1)
            for i in range(len(words))
        )
        query = self._sql(
            KEYWORD,
            extra=self._extra(vector),
            held=held,
            counts=counts,
            tsquery=_tsquery(len(words)),
            where=where,
        )
        with self._transaction() as conn:
            found = conn.execute(
                query, params | _word_params(words), binary=True
            ).fetchall()
        if not found:
            rows = self._rows_where(where, params)
            return [], TermStats(rows=rows, counts=dict.fromkeys(words, 0))
        rows, word_rows = int(found[0][-2]), found[0][-1]
        stats = TermStats(
            rows=rows,
            counts={w: int(n) for w, n in zip(words, word_rows, strict=True)},
        )
        return [row[:-2] for row in found], stats

    def _vector_rows(
        self, where: str, params: dict[str, Any], vector: Vector
    ) -> list[tuple[Any, ...]]:
        """Vector candidates: nearest with pgvector, newest with float4[]."""
        order, dims = "updated_at DESC", ""
        if self.vector_kind == "pgvector":
            order = "embedding <=> %(qvec)s::vector"
            dims = "AND vector_dims(embedding) = %(dims)s"
        query = self._sql(
            NEAREST,
            extra=self._extra(vector),
            where=where,
            dims=sql.SQL(dims),
            order=sql.SQL(order),
        )
        with self._transaction() as conn:
            return conn.execute(query, params, binary=True).fetchall()

    def get(self, key: str, *, agents: Sequence[str]) -> MemoryEntry | None:
        """Return the live row with that key, the first agent in ``agents`` winning."""
        where, params = scope_clause(agents, None)
        params["key"] = key
        tail = "AND key = %(key)s ORDER BY array_position(%(agents)s, agent) LIMIT 1"
        rows = self._select(where, params, tail)
        return row_entry(rows[0]) if rows else None

    def list(
        self,
        *,
        agents: Sequence[str],
        category: str | None = None,
        session: str | None = None,
        limit: int = 1000,
    ) -> _Entries:
        """Return live rows, newest first (strict session filter)."""
        where, params = scope_clause(agents, session, strict=True, category=category)
        params["limit"] = limit
        tail = "ORDER BY updated_at DESC, key LIMIT %(limit)s"
        return [row_entry(row) for row in self._select(where, params, tail)]

    def _write(self, template: str, params: dict[str, Any]) -> int:
        with self._transaction() as conn:
            return conn.execute(self._sql(template), params).rowcount

    def forget(self, key: str, *, agent: str) -> bool | Unsupported:
        """Delete ``agent``'s row with that key; False when there was none."""
        template = "DELETE FROM {table} WHERE agent = %(agent)s AND key = %(key)s"
        return self._write(template, {"agent": agent, "key": key}) > 0

    def supersede(
        self, key: str, *, agent: str, superseded_by: str
    ) -> bool | Unsupported:
        """Hide ``agent``'s row with that key behind ``superseded_by``."""
        template = (
            "UPDATE {table} SET superseded_by = %(by)s"
            " WHERE agent = %(agent)s AND key = %(key)s AND superseded_by IS NULL"
        )
        return (
            self._write(template, {"agent": agent, "key": key, "by": superseded_by}) > 0
        )

    def purge_session(self, session: str, *, agent: str) -> int | Unsupported:
        """Delete ``agent``'s rows of a session; return how many."""
        template = (
            "DELETE FROM {table} WHERE agent = %(agent)s AND session = %(session)s"
        )
        return self._write(template, {"agent": agent, "session": session})

    def count(self, *, agents: Sequence[str]) -> int:
        """Return how many live rows ``agents`` have."""
        return self._rows_where(*scope_clause(agents, None))

    def _rows_where(self, where: str, params: dict[str, Any]) -> int:
        """How many rows a scope clause (:func:`scope_clause`) selects."""
        query = self._sql("SELECT count(*) FROM {table} WHERE {where}", where=where)
        with self._transaction() as conn:
            row = conn.execute(query, params).fetchone()
        return int(row[0]) if row else 0

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
        where, params = scope_clause(
            agents, session, since=since, until=until, strict=True, category=category
        )
        tail = "ORDER BY created_at, agent, key"
        return [row_entry(row) for row in self._select(where, params, tail)]

    def health(self) -> bool:
        """Return whether the server answers."""
        try:
            with self._transaction() as conn:
                conn.execute("SELECT 1")
        except psycopg.Error:
            return False
        return True

    def applied_position(self) -> int:
        """Return the last ledger position applied (0: none)."""
        with self._transaction() as conn:
            return self._position(conn)

    def _position(self, conn: Connection, *, lock: bool = False) -> int:
        query = "SELECT value FROM {meta} WHERE name = 'applied_position'"
        row = conn.execute(
            self._sql(query + (" FOR UPDATE" if lock else ""))
        ).fetchone()
        return int(row[0]) if row else 0

    def apply(self, events: Sequence[Recorded], position: int) -> None:
        """Apply the events above the tracked position, then record ``position``.

        The effects and the position are written in one transaction.
        """
        with self._transaction() as conn:
            done = self._position(conn, lock=True)
            if position <= done:
                return
            for recorded in events:
                if recorded.position > done:
                    apply_one(self, recorded)
            conn.execute(
                self._sql(
                    "UPDATE {meta} SET value = %s WHERE name = 'applied_position'"
                ),
                (str(position),),
            )

    def bind(self, ledger_id: str | None, head: LedgerHead) -> bool:
        """Tie the memory to the ledger it derives from; return whether emptied.

        In one transaction: a schema whose meta table names another ledger's
        id, or whose applied position is past ``head`` (read once that
        position is locked: :data:`~projections.base.LedgerHead`), loses every
        memory row and its position (the embedder's identity stays); then
        ``ledger_id`` is recorded in the meta table (row ``ledger_id``). The
        caller catches up from the ledger's memory events.
        """
        with self._transaction() as conn:
            done = self._position(conn, lock=True)
            row = conn.execute(
                self._sql("SELECT value FROM {meta} WHERE name = 'ledger_id'")
            ).fetchone()
            stale = done > head_position(head) or (
                row is not None and ledger_id is not None and str(row[0]) != ledger_id
            )
            if stale:
                conn.execute(self._sql("DELETE FROM {table}"))
                conn.execute(
                    self._sql(
                        "UPDATE {meta} SET value = '0' WHERE name = 'applied_position'"
                    )
                )
            if ledger_id is not None:
                conn.execute(
                    self._sql(
                        "INSERT INTO {meta} VALUES ('ledger_id', %s) "
                        "ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value"
                    ),
                    (ledger_id,),
                )
        return stale

    def close(self) -> None:
        """Close the connection and the thread, after a bounded wait for vectors.

        Vectors are embedded for up to :data:`CLOSE_DRAIN_SECONDS` first (see
        :meth:`~projections.memory.embedding.backfill.Backfill.stop`); rows
        still lacking one are found by keywords until a later handle or
        :meth:`reindex` embeds them.
        """
        drain = CLOSE_DRAIN_SECONDS if self.capabilities.vectors else 0.0
        self._backfill.stop(drain, self.count_pending)
        with self._lock:
            self._conn.close()
