"""The SQL and pure helpers of :mod:`projections.memory.postgres`."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final, Literal, NamedTuple, TypeAlias
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import msgspec
import numpy as np

from turnledger.policies.relevance import (
    ABSENT_FULL_ROWS,
    KeywordGate,
    absent_share,
    bm25_term,
    calibrate,
    content_terms,
    discount_absent,
    fuse,
    newer_first,
    normalize,
    reciprocal_rank,
    term_weight,
    token_count,
    word_tokens,
)
from turnledger.policies.threads import THREAD_CATEGORY, lend_along_threads
from turnledger.projections.memory.protocol import (
    DURABLE_GLOBAL_CATEGORIES,
    MemoryEntry,
)

TABLE: Final = "turnledger_memories"
META_TABLE: Final = "turnledger_memory_meta"
VECTOR_WEIGHT: Final = 0.7
KEYWORD_WEIGHT: Final = 0.3
MAX_QUERY_WORDS: Final = 32
"""Words of a query searched for (a user message can be long)."""

_SCHEMA = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
COLUMNS: Final = """agent, key, id, content, category, session, namespace,
    importance, created_at, updated_at"""
CREATE: Final = (
    "CREATE SCHEMA IF NOT EXISTS {schema}",
    """CREATE TABLE IF NOT EXISTS {table} (agent text NOT NULL, key text NOT NULL,
    id text NOT NULL, content text NOT NULL, category text NOT NULL, session text,
    namespace text NOT NULL DEFAULT 'default', importance double precision,
    created_at timestamptz NOT NULL, updated_at timestamptz NOT NULL,
    superseded_by text, embedding {column}, search tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('simple', key), 'A')
    || setweight(to_tsvector('simple', content), 'B')) STORED, tokens integer,
    PRIMARY KEY (agent, key))""",
    # A table made before the column: rows read NULL (tokenised at recall).
    "ALTER TABLE {table} ADD COLUMN IF NOT EXISTS tokens integer",
    "CREATE INDEX IF NOT EXISTS tl_memories_search ON {table} USING GIN (search)",
    "CREATE INDEX IF NOT EXISTS tl_memories_recent ON {table} (agent, updated_at)",
    """CREATE INDEX IF NOT EXISTS tl_memories_unembedded ON {table} (agent, key)
    WHERE embedding IS NULL AND superseded_by IS NULL""",
    f"""CREATE INDEX IF NOT EXISTS tl_memories_thread ON {{table}}
    (agent, namespace, created_at, key)
    WHERE category = '{THREAD_CATEGORY}' AND superseded_by IS NULL""",
    "CREATE TABLE IF NOT EXISTS {meta} (name text PRIMARY KEY, value text NOT NULL)",
    "INSERT INTO {meta} VALUES ('applied_position', '0') ON CONFLICT DO NOTHING",
)
UPSERT: Final = f"""INSERT INTO {{table}} ({COLUMNS}, embedding, tokens) VALUES (
    %(agent)s, %(key)s, %(id)s, %(content)s, %(category)s, %(session)s,
    %(namespace)s, %(importance)s, %(at)s, %(at)s, NULL, %(tokens)s)
    ON CONFLICT (agent, key) DO UPDATE SET content = EXCLUDED.content,
    tokens = EXCLUDED.tokens,
    category = EXCLUDED.category, session = EXCLUDED.session,
    namespace = EXCLUDED.namespace, importance = EXCLUDED.importance,
    updated_at = EXCLUDED.updated_at, embedding = CASE
    WHEN {{table}}.content = EXCLUDED.content THEN {{table}}.embedding END,
    superseded_by = NULL RETURNING {COLUMNS}"""
"""The write of an entry: without a vector (the backfill computes it), an
unchanged content keeping the one it has; with its length in word tokens
(:func:`~policies.relevance.token_count`, for BM25 at recall)."""
PENDING: Final = """SELECT agent, key, content FROM {table}
    WHERE embedding IS NULL AND superseded_by IS NULL
    AND (agent, key) > (%(agent)s, %(key)s) ORDER BY agent, key LIMIT %(limit)s"""
"""The next live rows lacking a vector after a cursor, in key order."""
PENDING_COUNT: Final = """SELECT count(*) FROM {table}
    WHERE embedding IS NULL AND superseded_by IS NULL"""
SET_VECTOR: Final = """UPDATE {table} SET embedding = %s::{column}
    WHERE agent = %s AND key = %s AND content = %s AND embedding IS NULL"""
"""A row's vector, unless it was rewritten since its text was read."""
KEYWORD: Final = f"""SELECT {COLUMNS}, {{extra}}, tokens, held,
    coalesce(rank / nullif(max(rank) OVER (), 0), 0) AS score,
    (SELECT count(*) FROM {{table}} WHERE {{where}}) AS scope_rows,
    ARRAY[{{counts}}] AS word_rows
    FROM (SELECT *, ts_rank_cd(search, q) AS rank, ARRAY[{{held}}] AS held
    FROM {{table}}, (SELECT {{tsquery}}) AS query(q)
    WHERE {{where}} AND search @@ q OFFSET 0) AS matched
    ORDER BY score DESC, updated_at DESC, key LIMIT %(pool)s"""
"""The keyword candidates (the scope's rows holding a query word, ``ts_rank_cd``
picking up to the pool), each with which query words it holds; and on every
row, BM25's statistics of the scope: its row count and, per query word, how
many of its rows hold it (window counts over every matching row, before the
pool's limit). ``OFFSET 0`` keeps the sub-query whole: merged into the outer
query, each window count would match the tsvector and rank again."""
NEAREST: Final = f"""SELECT {COLUMNS}, {{extra}}, NULL, NULL, NULL FROM {{table}}
    WHERE {{where}} AND embedding IS NOT NULL {{dims}} ORDER BY {{order}}
    LIMIT %(pool)s"""
_SAME_THREAD: Final = f"""n.agent = m.agent AND n.namespace = m.namespace
    AND n.session IS NOT DISTINCT FROM m.session
    AND n.category = '{THREAD_CATEGORY}'"""
THREAD: Final = f"""SELECT m.key, side.* FROM {{table}} m CROSS JOIN LATERAL (
    (SELECT {COLUMNS}, {{extra}} FROM {{table}} n WHERE {_SAME_THREAD}
    AND (n.created_at, n.key) < (m.created_at, m.key) AND {{where}}
    ORDER BY n.created_at DESC, n.key DESC LIMIT 1)
    UNION ALL
    (SELECT {COLUMNS}, {{extra}} FROM {{table}} n WHERE {_SAME_THREAD}
    AND (n.created_at, n.key) > (m.created_at, m.key) AND {{where}}
    ORDER BY n.created_at, n.key LIMIT 1)) AS side
    WHERE m.category = '{THREAD_CATEGORY}' AND (m.agent, m.key) IN (SELECT * FROM
    unnest(%(lender_agents)s::text[], %(lender_keys)s::text[]))"""
"""Each lender's neighbours in its conversation thread (:mod:`~policies.threads`:
an agent's ``conversation`` rows of one session and namespace, in the order
first stored: ``created_at``, then the key), among the caller's scope
(``where``, whose unqualified names are the neighbour's): one row per lender
and neighbour, the lender's key then the neighbour read as a vector candidate
is (:data:`COLUMNS` and the vector column)."""
PGVECTOR_SIMILARITY: Final = """CASE WHEN vector_dims(embedding) = %(dims)s
    THEN 1 - (embedding <=> %(qvec)s::vector) END"""
Vector: TypeAlias = "np.ndarray[Any, np.dtype[np.float32]]"
"""A unit-length float32 vector."""

VectorKind: TypeAlias = Literal["pgvector", "array"]
"""How vectors are stored: a pgvector ``vector`` or a ``float4[]``."""


def column_type(kind: VectorKind) -> str:
    """The SQL type of the embedding column for vectors stored as ``kind``."""
    return "vector" if kind == "pgvector" else "float4[]"


class _Candidate(msgspec.Struct, kw_only=True):
    """A recall candidate: the row, its keyword score and tokens, its similarity.

    ``held`` is ``None`` for a row the keyword leg did not find, else the
    query words it holds.
    """

    entry: MemoryEntry
    held: frozenset[str] | None = None
    keyword: float | None = None
    length: int = 0
    counts: Counter[str] = msgspec.field(default_factory=Counter)
    similarity: float | None = None


RowKey: TypeAlias = tuple[str, str]
"""A row's agent and key."""


def _key(candidate: _Candidate) -> RowKey:
    return candidate.entry.agent, candidate.entry.key


def _has_evidence(candidate: _Candidate) -> bool:
    """Whether either leg gave the candidate a positive score (it is kept)."""
    return (candidate.keyword or 0.0) > 0.0 or (candidate.similarity or 0.0) > 0.0


class TermStats(NamedTuple):
    """BM25's statistics of a query's words, taken on the caller's scope.

    Attributes:
        rows: How many rows the scope holds.
        counts: Per query word, how many of the scope's rows hold it.
    """

    rows: int
    counts: dict[str, int]


def split_url(url: str) -> tuple[str, str]:
    """Return the connection URL without ``schema=`` and the schema it selects.

    Raises:
        ValueError: Not a postgresql:// URL, or a schema that is not an identifier.
    """
    parts = urlsplit(url)
    if parts.scheme not in {"postgresql", "postgres"}:
        msg = f"Expected a postgresql:// URL, found scheme {parts.scheme!r}"
        raise ValueError(msg)
    query = parse_qsl(parts.query, keep_blank_values=True)
    schema = next((value for name, value in query if name == "schema"), "public")
    if not _SCHEMA.fullmatch(schema):
        msg = f"Expected a schema of letters, digits and _, found {schema!r}"
        raise ValueError(msg)
    rest = urlencode([(name, value) for name, value in query if name != "schema"])
    return urlunsplit(parts._replace(query=rest)), schema


def query_words(query: str) -> list[str]:
    """Return the distinct content words of a query searched for, in order.

    Stop words and one-letter words are left out
    (:func:`~policies.relevance.content_terms`).
    """
    return list(content_terms(query))[:MAX_QUERY_WORDS]


def row_entry(row: Sequence[Any], score: float | None = None) -> MemoryEntry:
    """Return the entry a row of :data:`COLUMNS` holds."""
    agent, key, id_, content, category, session, namespace, importance = row[:8]
    return MemoryEntry(
        id=id_,
        key=key,
        content=content,
        category=category,
        agent=agent,
        session=session,
        namespace=namespace,
        importance=importance,
        created_at=row[8].astimezone(UTC),
        updated_at=row[9].astimezone(UTC),
        score=score,
    )


def unit_vector(vector: Any) -> Vector | None:
    """Return the vector scaled to unit length; ``None`` when empty or zero."""
    array = np.asarray(vector, dtype=np.float32).ravel()
    norm = float(np.linalg.norm(array)) if array.size else 0.0
    return array / norm if norm > 0.0 else None


def blend(
    keyword: float | None, similarity: float | None, absent: float = 0.0
) -> float:
    """Return the hybrid score of the legs measured (0.7 vector, 0.3 keyword).

    The weighted probabilistic OR of :func:`policies.relevance.fuse`, the
    similarity first discounted by ``absent``, the share of the query's weight
    no scoped row holds (:func:`policies.relevance.discount_absent`).
    """
    if similarity is not None:
        similarity = discount_absent(similarity, absent)
    return fuse(
        similarity, keyword, vector_weight=VECTOR_WEIGHT, keyword_weight=KEYWORD_WEIGHT
    )


def scope_clause(
    agents: Sequence[str],
    session: str | None,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    strict: bool = False,
    category: str | None = None,
) -> tuple[str, dict[str, Any]]:
    """Return the WHERE clause every read filters by, and its parameters.

    Args:
        agents: The allowed agents.
        session: A session scope; its rows, plus session-less core/daily rows
            unless ``strict``.
        since: Earliest creation time (inclusive).
        until: Latest creation time (inclusive).
        strict: Only the session's own rows.
        category: Only this category.
    """
    clauses = ["agent = ANY(%(agents)s)", "superseded_by IS NULL"]
    params: dict[str, Any] = {"agents": list(agents), "session": session}
    if session is not None:
        clauses.append(
            "session = %(session)s"
            if strict
            else "(session = %(session)s OR"
            " (session IS NULL AND category = ANY(%(durable)s)))"
        )
        params["durable"] = sorted(DURABLE_GLOBAL_CATEGORIES)
    for name, value, clause in (
        ("since", since, "created_at >= %(since)s"),
        ("until", until, "created_at <= %(until)s"),
        ("category", category, "category = %(category)s"),
    ):
        if value is not None:
            clauses.append(clause)
            params[name] = value
    return " AND ".join(clauses), params


def similarity(
    value: Any,
    vector: Vector | None,
    *,
    stored: VectorKind,
    similarity_range: tuple[float, float] = (0.0, 1.0),
) -> float | None:
    """Return a row's relevance on the vector leg, on [0, 1].

    The cosine (pgvector's, or computed from float4[]) mapped through the
    embedder's ``similarity_range`` (:func:`~policies.relevance.calibrate`:
    where its cosines mean unrelated and the same), as the SQLite store does.

    Args:
        value: What the query read: pgvector's similarity, or the stored array.
        vector: The unit query vector (``None``: no vector leg).
        stored: How vectors are stored.
        similarity_range: The embedder's ``(unrelated, same)`` cosines.
    """
    if value is None or vector is None:
        return None
    if stored == "pgvector":
        return calibrate(float(value), *similarity_range)
    row = unit_vector(value)
    if row is None or row.shape != vector.shape:
        return None
    return calibrate(float(row @ vector), *similarity_range)


def rank_candidates(
    rows: Sequence[Sequence[Any]],
    vector: Vector | None,
    *,
    stored: VectorKind,
    query: str,
    similarity_range: tuple[float, float] = (0.0, 1.0),
    stats: TermStats | None = None,
    threads: Mapping[RowKey, Sequence[RowKey]] | None = None,
) -> list[MemoryEntry]:
    """Merge keyword and vector candidate rows into scored entries, ranked.

    Each row is :data:`COLUMNS`, the vector column, the stored token count,
    which of the query words searched for the row holds, and a keyword rank
    (the last three ``NULL`` for a vector-only candidate). Ranking and the
    score are separate, as on SQLite:

    - the order: the keyword candidates by BM25 (FTS5's ``k1`` and ``b``, each
      word's IDF from ``stats``, the scope's; lengths and frequencies counted
      on the key and content, the average length the candidates'), the newest
      first among rows holding the same query words within
      :data:`~policies.relevance.UPDATE_BAND` of the best of them
      (:func:`~policies.relevance.newer_first`: the newer fact wins), each
      BM25 first lent along ``threads`` (each keyword candidate's conversation
      neighbours, :func:`~policies.threads.lend_along_threads`: a neighbour no
      keyword found is a candidate of this leg, read as a vector candidate
      is); the
      vector candidates by similarity; the legs fused by reciprocal rank
      (:data:`~policies.relevance.RRF_K`, equal weights), so neither leg's
      scale decides; equal places by the score, the stronger first, then the
      newer;
    - the score (what the ``[recall] min_relevance`` floor is compared to): a
      keyword candidate's score as SQLite's keyword gate takes it
      (:func:`~policies.relevance.keyword_score`: the IDF-weighted share of the
      query's words it holds, each word's IDF from ``stats``, with the gate's
      allowances for small scopes, :func:`~policies.relevance.gate_weights`,
      the other subjects being those of the other keyword candidates), a
      vector-only candidate's 0, blended with the calibrated cosine
      (:func:`similarity`, :func:`blend`), discounted by the share of the
      query's weight no scoped row holds
      (:func:`~policies.relevance.absent_share` on ``stats``); a keyword
      score lent along a thread is the greater of the row's own and half its
      best neighbour's. Rows with neither a positive keyword score nor a
      positive vector relevance are dropped.

    With ``stats``, BM25 and the gate weigh the words it counted (the query
    words searched for); without it, every content word of the query weighs
    the same and counts fully.
    """
    words = list(stats.counts) if stats is not None else list(content_terms(query))
    found: dict[tuple[str, str], _Candidate] = {}
    for row in rows:
        candidate = found.setdefault((row[0], row[1]), _Candidate(entry=row_entry(row)))
        if row[-1] is not None and candidate.held is None:
            _measure(candidate, words, row[-3], row[-2])
        cosine = similarity(
            row[-4], vector, stored=stored, similarity_range=similarity_range
        )
        if cosine is not None:
            candidate.similarity = cosine
    weights = {  # each word's IDF on the scope: BM25's and the gate's
        w: term_weight(stats.rows, stats.counts[w]) if stats else 1.0 for w in words
    }
    _keyword_scores(list(found.values()), weights, stats)
    lent = lend_along_threads(_bm25(found, weights), threads or {})
    own = {k: c.keyword or 0.0 for k, c in found.items()}
    for key in lent.ranks.keys() & found.keys():  # a borrower is read with them
        found[key].keyword = lent.score(key, lambda k: own.get(k, 0.0))
    kept = [c for c in found.values() if _has_evidence(c)]
    places = _rank_places(kept, lent.ranks)
    absent = absent_share(weights, stats.counts, stats.rows) if stats else 0.0
    scores = [blend(c.keyword or 0.0, c.similarity, absent) for c in kept]
    ranked = sorted(  # equal places: the stronger evidence, then the newer first
        range(len(kept)),
        key=lambda i: (
            -places[i],
            -scores[i],
            -kept[i].entry.updated_at.timestamp(),
            kept[i].entry.key,
        ),
    )
    return [msgspec.structs.replace(kept[i].entry, score=scores[i]) for i in ranked]


THREAD_LENDERS: Final = 64
"""How many keyword candidates lend along their threads (SQLite's rescoring
pool: the rows that can still rank once lent to)."""


def thread_lenders(
    rows: Sequence[Sequence[Any]], stats: TermStats | None
) -> list[RowKey]:
    """Return the ``conversation`` keyword candidates most likely to rank.

    At most :data:`THREAD_LENDERS`, by BM25 at a frequency of 1 (the IDF of the
    words each holds times the length's saturation, the candidates' average
    length), as SQLite picks the pool it rescores; the candidates ``rows``
    are the keyword query's (:data:`KEYWORD`).
    """
    keyword = [row for row in rows if row[-1] is not None]
    if stats is None or not keyword:
        return []
    words = list(stats.counts)
    weights = [term_weight(stats.rows, stats.counts[w]) for w in words]
    lengths = [
        row[-3] if row[-3] is not None else token_count(row[1], row[3])
        for row in keyword
    ]
    average = sum(lengths) / len(lengths)
    held = [
        sum(w for w, holds in zip(weights, row[-2] or (), strict=False) if holds)
        * bm25_term(1.0, 1, length, average)
        for row, length in zip(keyword, lengths, strict=True)
    ]
    ranked = sorted(range(len(keyword)), key=lambda i: -held[i])
    return [
        (keyword[i][0], keyword[i][1])
        for i in ranked
        if keyword[i][4] == THREAD_CATEGORY
    ][:THREAD_LENDERS]


def _measure(
    candidate: _Candidate,
    words: Sequence[str],
    tokens: int | None,
    held: Sequence[bool] | None,
) -> None:
    """Take a keyword candidate's length, the query words it holds and how often.

    Which words it holds is the tsvector's answer (``held``, one per word of
    ``words``, asked in the keyword query), its length the count stored at
    write time (:func:`~policies.relevance.token_count`); how often it holds a
    word is counted as SQLite counts it, as a substring of the lowercased key
    and content (at least once). A row written before lengths were stored is
    tokenised here.
    """
    entry = candidate.entry
    text = f"{entry.key} {entry.content}"
    if tokens is None or held is None or len(held) != len(words):
        counts = Counter(word_tokens(text))
        candidate.length = counts.total()
        candidate.held = frozenset(w for w in words if counts[w] > 0)
        candidate.counts = Counter({w: counts[w] for w in candidate.held})
        return
    lowered = normalize(text)
    candidate.length = tokens
    candidate.held = frozenset(w for w, holds in zip(words, held, strict=True) if holds)
    candidate.counts = Counter({w: max(1, lowered.count(w)) for w in candidate.held})


def _keyword_scores(
    candidates: Sequence[_Candidate],
    weights: dict[str, float],
    stats: TermStats | None,
) -> None:
    """Score the keyword candidates with the keyword gate, as SQLite does.

    Without ``stats`` every word is counted as held by some row of a scope
    large enough to count every word fully.
    """
    found = [c for c in candidates if c.held is not None]
    if stats is None:
        rows, counts = ABSENT_FULL_ROWS, dict.fromkeys(weights, 1)
    else:
        rows, counts = stats.rows, stats.counts
    gate = KeywordGate(weights, counts, rows, (c.held for c in found if c.held))
    for candidate in found:
        held = candidate.held
        assert held is not None  # noqa: S101 - found holds keyword candidates
        candidate.keyword = gate.score(held, candidate.counts, candidate.length)


def _bm25(
    found: Mapping[RowKey, _Candidate], weights: dict[str, float]
) -> dict[RowKey, float]:
    """Return each keyword candidate's BM25.

    Over the words of ``weights`` (their IDF on the scope); the average length
    is the kept keyword candidates' (those with a positive score on either leg).
    """
    keyword = {
        k: c for k, c in found.items() if c.held is not None and _has_evidence(c)
    }
    average = sum(c.length for c in keyword.values()) / max(1, len(keyword))
    return {
        k: sum(
            bm25_term(weight, c.counts[w], c.length, average)
            for w, weight in weights.items()
            if c.counts[w] > 0
        )
        for k, c in keyword.items()
    }


def _rank_places(
    kept: Sequence[_Candidate], bm25: Mapping[RowKey, float]
) -> list[float]:
    """Each candidate's reciprocal-rank place: its keyword rank's, its vector's.

    The keyword leg ranks the rows ``bm25`` ranks (lent along threads).
    """
    ranks = {i: bm25[k] for i, c in enumerate(kept) if (k := _key(c)) in bm25}
    places = [0.0] * len(kept)
    by_bm25 = sorted(
        ranks, key=lambda i: (-ranks[i], -kept[i].entry.updated_at.timestamp())
    )
    by_bm25 = newer_first(  # the newer fact wins among near-duplicates
        # a borrower holds no word: the near-duplicate of no row
        [
            (i, kept[i].held if kept[i].held is not None else i, ranks[i])
            for i in by_bm25
        ],
        recency=lambda i: kept[i].entry.updated_at,
    )
    for rank, i in enumerate(by_bm25, 1):
        places[i] += reciprocal_rank(rank)
    near = [i for i, c in enumerate(kept) if (c.similarity or 0.0) > 0.0]
    near.sort(key=lambda i: -(kept[i].similarity or 0.0))
    for rank, i in enumerate(near, 1):
        places[i] += reciprocal_rank(rank)
    return places
