"""Keyword search: safe FTS5 queries that stay fast on frequent words.

A query is never passed to FTS5 as syntax. It is split into word tokens the way
the ``unicode61`` tokenizer splits text, and each token becomes a quoted phrase
(``"token"``, or ``"token"*`` for a trailing ``*``), so quotes, operators,
column filters and SQL text are only ever searched for. Stop words and
one-character tokens are left out (a query of nothing else matches nothing).

Ranking and the gate are separate. Rows are ranked by BM25 (FTS5's formula,
``k1`` 1.2, ``b`` 0.75, on the scope's statistics), and among rows holding the
same query terms whose BM25 is within ``UPDATE_BAND`` of the best of them,
the newest first (the newer fact wins), after each candidate of the
``conversation`` category has lent its thread neighbours half its BM25
(:mod:`~policies.threads`: a neighbour no keyword found joins the candidates).
A row's score, which the ``[recall]
min_relevance`` floor is compared to, is its query coverage
(:func:`~policies.relevance.keyword_score`), with two allowances for small
scopes (:func:`~policies.relevance.gate_weights`). Every statistic is taken on
the rows the caller may see, never the whole table: the scope's row count, each
term's count among the scope's rows and the scope's average row length, so one
agent's rows never move another agent's ranking. A row's length is its key and
content's count of word tokens, stored with it when written and read with the
row while matching (FTS5's ``docsize`` record for a row written before); which
terms a row holds is asked of FTS5; how often it holds them is its text's count
of each term as a substring (the text lowercased by SQLite's ``lower``, read
once per row; ``str.count``, no tokenising). Nothing is tokenised in Python at
recall but the query.

Stop-word safety. Matching a frequent word walks its whole doclist (~120 ms at
100k rows for a query of frequent words). So each term's rows in the scope are
read up to :data:`MATCH_BUDGET` (the count, and the rows, exact), and above that
its count is estimated on the scope's newest :data:`SAMPLE_ROWS` rows. Then:

1. terms no scoped row holds are dropped (they cannot match);
2. the candidates are every scoped row holding one of the rarest terms whose
   counts together fit :data:`MATCH_BUDGET` (all the terms, in small stores);
3. if even the rarest term alone exceeds the budget (a query of very frequent
   words only), the candidates are the newest scoped rows holding the three
   rarest terms (or the rarest alone when no row holds all three);
4. every candidate is scored over every live term, frequent ones included,
   each term counted once; the best :data:`RESCORE_POOL` (or the window, if
   larger) are scored again with how often they hold each term.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, Final, NamedTuple, TypeAlias, TypeVar

from turnledger.policies.relevance import (
    MIN_TERM_CHARS,
    KeywordGate,
    absent_share,
    bm25_term,
    is_content_term,
    newer_first,
    term_weight,
    word_tokens,
)
from turnledger.policies.threads import lend_along_threads
from turnledger.projections.memory.sqlite._scope import Scope, newest_sql, scope_sql
from turnledger.projections.memory.sqlite._threads import entry_ids, thread_neighbours

MATCH_BUDGET: Final = 1_000
"""The most scoped rows the candidate terms may cover together."""

SAMPLE_ROWS: Final = 5_000
"""How many of the newest rows a frequent token's document count is estimated on."""

MAX_TERMS: Final = 16
"""How many distinct tokens of a query are used (the longest, when more)."""

RESCORE_POOL: Final = 64
"""The smallest candidate pool scored with term frequencies (substring counts)."""

FREQUENT_AND_TERMS: Final = 3
"""How many of the rarest tokens a stop-word-only query ANDs."""


class KeywordMatches(NamedTuple):
    """What the keyword leg found for a query.

    Attributes:
        rows: ``{rowid: (entry id, score)}``, best first, every score above 0.
        absent: The share of the query's weight no scoped row holds
            (:func:`~policies.relevance.absent_share`), which discounts the
            vector leg's score.
    """

    rows: dict[int, tuple[str, float]]
    absent: float


NOTHING: Final = KeywordMatches({}, 0.0)
"""No keyword match, and nothing known of the query's words."""


class Term(NamedTuple):
    """One query token: its normalised text and whether it is a prefix."""

    text: str
    prefix: bool = False

    @property
    def phrase(self) -> str:
        """The token as an FTS5 phrase (tokens never contain quotes)."""
        return f'"{self.text}"*' if self.prefix else f'"{self.text}"'


def tokens(text: str) -> list[str]:
    """Return the word tokens of a text, normalised."""
    return word_tokens(text)


def query_terms(query: str) -> list[Term]:
    """Return a query's distinct content tokens, in order.

    Stop words and one-character tokens are dropped
    (:func:`~policies.relevance.is_content_term`). A whitespace-separated word
    ending in ``*`` makes its last token a prefix.
    A query with more than :data:`MAX_TERMS` distinct tokens (a whole user
    message) keeps the longest ones, which are the likeliest to be specific.
    """
    found: dict[Term, None] = {}
    for word in query.split():
        words = tokens(word)
        for i, text in enumerate(words):
            prefix = word.endswith("*") and i == len(words) - 1
            if is_content_term(text) or (prefix and len(text) >= MIN_TERM_CHARS):
                found.setdefault(Term(text, prefix))
    terms = list(found)
    if len(terms) <= MAX_TERMS:
        return terms
    longest = sorted(range(len(terms)), key=lambda i: (-len(terms[i].text), i))
    return [terms[i] for i in sorted(longest[:MAX_TERMS])]


FrequentTerms: TypeAlias = dict[tuple[Scope, str], tuple[int, int]]
"""Estimated scoped counts of frequent phrases:
``{(scope, phrase): (count, scope rows then)}``."""

_FREQUENT_CACHE: Final = 4_096
_STALE_SHARE: Final = 0.1


class ScopeStats(NamedTuple):
    """The statistics BM25 needs, taken on the caller's scope only.

    Attributes:
        rows: How many rows the scope holds.
        average: Their average length in tokens (on the newest
            :data:`LENGTH_SAMPLE` of them), at least 1.
    """

    rows: int
    average: float


_VARINT_FULL_BYTE: Final = 9  # a varint's ninth byte carries eight bits

LENGTH_SAMPLE: Final = 1_000
"""How many of the scope's newest rows its average row length is taken on."""


StatsCache: TypeAlias = dict[Scope, tuple[tuple[int, int], ScopeStats]]
"""Scope statistics by scope, with the database version they were taken at."""


EdgeCache: TypeAlias = dict[Scope, tuple[tuple[int, int], int | None]]
"""Sample edges (:func:`sample_edge`) by scope, with the database version they
were taken at."""

_T = TypeVar("_T")


def _version(db: sqlite3.Connection) -> tuple[int, int]:
    """The database's version as this connection sees it.

    SQLite's ``data_version`` (moved by other connections' commits) and this
    connection's ``total_changes`` (moved by its own).
    """
    return int(db.execute("PRAGMA data_version").fetchone()[0]), db.total_changes


def _while_unchanged(
    db: sqlite3.Connection,
    scope: Scope,
    cache: dict[Scope, tuple[tuple[int, int], _T]] | None,
    take: Callable[[], _T],
) -> _T:
    """Return ``take()`` for the scope, reused while the database has not changed.

    ``cache`` keeps each scope's value with the database's :func:`_version`
    when it was taken (at most :data:`_FREQUENT_CACHE` scopes, then it starts
    over).
    """
    version = _version(db)
    known = None if cache is None else cache.get(scope)
    if known is not None and known[0] == version:
        return known[1]
    value = take()
    if cache is not None:
        if len(cache) >= _FREQUENT_CACHE:
            cache.clear()
        cache[scope] = (version, value)
    return value


def cached_stats(
    db: sqlite3.Connection, scope: Scope, cache: StatsCache | None = None
) -> ScopeStats:
    """Return :func:`scope_stats`, reused while the database has not changed."""
    return _while_unchanged(db, scope, cache, lambda: scope_stats(db, scope))


def scope_stats(db: sqlite3.Connection, scope: Scope) -> ScopeStats:
    """Return the scope's row count and average row length (in word tokens).

    A row's length is the one stored with it, or its FTS5 ``docsize`` record
    for a row written before lengths were stored.
    """
    where, params = scope_sql(scope)
    rows = int(
        db.execute(
            f"SELECT count(*) FROM memories AS m WHERE {where}", list(params)
        ).fetchone()[0]
    )
    newest, newest_params = newest_sql(
        scope, LENGTH_SAMPLE, "m.rowid AS rowid, m.tokens AS tokens", by_rowid=True
    )
    sizes = db.execute(
        f"SELECT n.tokens, d.sz FROM ({newest}) AS n "
        "LEFT JOIN memories_fts_docsize AS d ON d.id = n.rowid AND n.tokens IS NULL",
        newest_params,
    ).fetchall()
    total = sum(doc_length(size) if n is None else n for n, size in sizes)
    return ScopeStats(rows, max(1.0, total / len(sizes)) if sizes else 1.0)


def doc_length(size: bytes | None) -> int:
    """Return a row's token count from its FTS5 ``docsize`` record.

    The record is one SQLite varint per column (``key``, ``content``): seven
    bits a byte, high bit set on every byte but the last (the ninth byte, if
    any, carries eight).
    """
    if not size:
        return 0
    if size.isascii():  # every varint one byte (each column under 128 tokens)
        return sum(size)
    total = value = count = 0
    for byte in size:
        count += 1
        if count == _VARINT_FULL_BYTE:
            total += (value << 8) | byte
            value = count = 0
        elif byte & 0x80:
            value = (value << 7) | (byte & 0x7F)
        else:
            total += (value << 7) | byte
            value = count = 0
    return total


def scoped_counts(
    db: sqlite3.Connection,
    terms: Sequence[Term],
    scope: Scope,
    rows: int,
    *,
    frequent: FrequentTerms | None = None,
    edges: EdgeCache | None = None,
    lengths: dict[int, int | None] | None = None,
) -> tuple[dict[Term, int], dict[Term, frozenset[int]]]:
    """Return how many of the scope's rows hold each term, and which.

    A term held by at most :data:`MATCH_BUDGET` rows of the scope is counted
    exactly and its rows returned; above that its count is estimated on the
    scope's newest :data:`SAMPLE_ROWS` rows (never below the budget + 1) and
    kept in ``frequent`` while the scope has grown or shrunk by less than a
    tenth: common words recur in almost every query. Nothing outside the scope
    is counted.

    Args:
        db: The memory database.
        terms: The query's terms.
        scope: The rows the caller may see.
        rows: The scope's row count.
        frequent: The caller's cache of estimates (updated in place).
        edges: The caller's cache of sample edges (updated in place).
        lengths: Receives the stored length (``tokens``) of every row
            returned, ``None`` for a row written before lengths were stored.
    """
    cache: FrequentTerms = {} if frequent is None else frequent
    where, params = scope_sql(scope)
    counts: dict[Term, int] = {}
    held: dict[Term, frozenset[int]] = {}
    for term in terms:
        known = cache.get((scope, term.phrase))
        if known is not None and abs(rows - known[1]) <= _STALE_SHARE * known[1]:
            counts[term] = known[0]
            continue
        found = _matching(db, term.phrase, where, params, MATCH_BUDGET + 1)
        if len(found) <= MATCH_BUDGET:
            counts[term] = len(found)
            held[term] = frozenset(found)
            if lengths is not None:
                lengths.update(found)
            continue
        edge = sample_edge(db, scope, edges)
        estimate = max(MATCH_BUDGET + 1, _estimate(db, term.phrase, scope, rows, edge))
        if len(cache) >= _FREQUENT_CACHE:
            cache.clear()
        cache[(scope, term.phrase)] = (estimate, rows)
        counts[term] = estimate
    return counts, held


def _matching(
    db: sqlite3.Connection,
    expression: str,
    where: str,
    params: Sequence[Any],
    cap: int,
    *,
    extra: str = "",
    extra_params: Sequence[Any] = (),
) -> dict[int, int | None]:
    """The scoped rows matching: each one's stored length, in rowid order."""
    sql = (
        "SELECT m.rowid, m.tokens FROM memories_fts CROSS JOIN memories AS m "
        "ON m.rowid = memories_fts.rowid "
        f"WHERE memories_fts MATCH ? AND {where}{extra} LIMIT ?"
    )
    return dict(db.execute(sql, [expression, *params, *extra_params, cap]).fetchall())


def sample_edge(
    db: sqlite3.Connection, scope: Scope, cache: EdgeCache | None = None
) -> int | None:
    """Return the rowid of the scope's :data:`SAMPLE_ROWS`-th newest row.

    ``None`` when the scope holds fewer rows (the whole scope is the sample).
    Walking the scope's newest rows to it takes milliseconds at 100,000 rows
    (one index walk per agent, then a sort), and every frequent term's
    estimate needs it: it is reused while the database has not changed.
    """

    def take() -> int | None:
        newest, newest_params = newest_sql(
            scope, SAMPLE_ROWS, "m.rowid AS rowid", by_rowid=True
        )
        found = db.execute(
            f"SELECT rowid FROM ({newest}) LIMIT 1 OFFSET ?",
            [*newest_params, SAMPLE_ROWS - 1],
        ).fetchone()
        return None if found is None else int(found[0])

    return _while_unchanged(db, scope, cache, take)


def _estimate(
    db: sqlite3.Connection, expression: str, scope: Scope, rows: int, edge: int | None
) -> int:
    where, params = scope_sql(scope)
    if edge is None:  # the whole scope is the sample
        return len(_matching(db, expression, where, params, rows + 1))
    found = _matching(
        db,
        expression,
        where,
        params,
        SAMPLE_ROWS,
        extra=" AND memories_fts.rowid >= ?",  # FTS5 seeks to it
        extra_params=[edge],
    )
    return round(len(found) * rows / SAMPLE_ROWS)


def _join(terms: Sequence[Term], operator: str) -> str:
    return f" {operator} ".join(t.phrase for t in terms)


def selective_terms(
    counts: dict[Term, int], budget: int = MATCH_BUDGET
) -> tuple[list[Term], list[Term]]:
    """Return the rarest live terms whose counts fit the budget, and every live term.

    Both lists run rarest first (ties by text); a term no row holds is not live.
    """
    live = sorted((t for t, n in counts.items() if n > 0), key=lambda t: (counts[t], t))
    selective: list[Term] = []
    covered = 0
    for term in live:
        if covered + counts[term] > budget:
            break
        selective.append(term)
        covered += counts[term]
    return selective, live


def keyword_search(
    db: sqlite3.Connection,
    query: str,
    scope: Scope,
    window: int,
    *,
    frequent: FrequentTerms | None = None,
    stats_cache: StatsCache | None = None,
    edge_cache: EdgeCache | None = None,
) -> KeywordMatches:
    """Return the scope's best keyword matches, ranked by BM25, scored by the gate.

    Every statistic is the scope's own: its row count, each term's count among
    its rows and its average row length (:func:`scoped_counts`,
    :func:`scope_stats`), so rows the caller may not see change nothing. The
    candidates are every scoped row holding one of the rarest terms that fit
    :data:`MATCH_BUDGET` (or, when even the rarest term is over it, the newest
    rows holding the three rarest); which other terms each holds is asked of
    FTS5, its length is the one stored with it (read while matching; FTS5's
    ``docsize`` record for a row written before), and how often the term
    occurs counted as a substring of the best :data:`RESCORE_POOL` (no Python
    tokenising). The order is the scope's BM25 (FTS5's ``k1`` and ``b``),
    then the entry id, the newest first among near-duplicates
    (:func:`newer_first`), each rescored ``conversation`` candidate's BM25
    first lent to its thread neighbours
    (:func:`~policies.threads.lend_along_threads`; a neighbour outside the
    rescored pool, usually one no keyword found, is returned too, ranked and
    scored by what it was lent alone). The score,
    which the ``[recall] min_relevance``
    floor is compared to, is the gate: :func:`~policies.relevance.keyword_score`
    (the IDF-weighted share of the query's terms found, on [0, 1]) with the
    gate's weights (:func:`~policies.relevance.gate_weights`: a term no scoped
    row holds and the terms of another subject of the query weigh in
    proportion to the scope's size, up to
    :data:`~policies.relevance.ABSENT_FULL_ROWS` rows), or half a thread
    neighbour's when that is greater. Rows scoring 0 are left out. Beside the
    rows, the share of the query's weight that no scoped row
    holds (:func:`~policies.relevance.absent_share`), known whether or not a
    row matched: the hybrid discounts the vector leg's score by it.

    Args:
        db: The memory database.
        query: The user's query text.
        scope: The rows that may match.
        window: How many candidates to return at most.
        frequent: The caller's cache of frequent-term estimates.
        stats_cache: The caller's cache of scope statistics.
        edge_cache: The caller's cache of sample edges (:func:`sample_edge`).

    Returns:
        At most ``window`` rows, and the share of the query's weight no
        scoped row holds (the rows found or not).
    """
    terms = query_terms(query)
    if not terms:
        return NOTHING
    where, params = scope_sql(scope)
    stats = cached_stats(db, scope, stats_cache)
    if stats.rows == 0:
        return NOTHING
    stored: dict[int, int | None] = {}  # the rows' lengths read on the way
    counts, held = scoped_counts(
        db,
        terms,
        scope,
        stats.rows,
        frequent=frequent,
        edges=edge_cache,
        lengths=stored,
    )
    weights = {t: term_weight(stats.rows, counts[t]) for t in terms}
    absent = absent_share(weights, counts, stats.rows)
    selective, live = selective_terms(counts, MATCH_BUDGET)
    if not live:
        return KeywordMatches({}, absent)
    pool = max(window, RESCORE_POOL)
    if selective:
        candidates = sorted(set().union(*(held[t] for t in selective)))
    else:
        stored = _newest_holding(db, live, where, params, pool)
        candidates = list(stored)
    if not candidates:
        return KeywordMatches({}, absent)
    holding = {t: _holding(db, t, held, candidates) for t in live}
    lengths = _lengths(db, candidates, stored)

    def bm25(rowid: int) -> float:
        length = lengths[rowid]
        return sum(
            bm25_term(weights[t], frequencies[rowid].get(t, 1), length, stats.average)
            for t in matched[rowid]
        )

    held_weight = dict.fromkeys(candidates, 0.0)  # BM25 with each term once
    for term in live:
        for rowid in holding[term]:
            held_weight[rowid] += weights[term]
    at_tf1 = {  # BM25 at tf 1 of a unit weight, by length (few distinct)
        n: bm25_term(1.0, 1, n, stats.average) for n in set(lengths.values())
    }
    first = sorted(  # the weights held times g(length): BM25 at tf 1
        candidates, key=lambda r: (-held_weight[r] * at_tf1[lengths[r]], r)
    )[:pool]
    ids, frequencies = _frequencies(db, live, holding, first)
    matched = {r: frozenset(t for t in live if r in holding[t]) for r in first}
    ranks = {r: rank for r in first if (rank := bm25(r)) > 0}
    lent = lend_along_threads(ranks, thread_neighbours(db, ranks, scope))
    ids |= entry_ids(db, lent.ranks.keys() - ids.keys())  # the borrowers
    ranked = sorted(lent.ranks.items(), key=lambda s: (-s[1], ids[s[0]]))
    order = newer_first(  # a borrower has no terms of its own: no row's duplicate
        [(r, matched.get(r, r), rank) for r, rank in ranked], recency=int
    )[:window]
    gate = KeywordGate(weights, counts, stats.rows, matched.values())
    own = _gate_scores(gate, matched, frequencies, lengths)
    scores = {r: lent.score(r, own) for r in order}
    return KeywordMatches(
        {r: (ids[r], scores[r]) for r in order if scores[r] > 0}, absent
    )


def _gate_scores(
    gate: KeywordGate[Term],
    matched: dict[int, frozenset[Term]],
    frequencies: dict[int, dict[Term, int]],
    lengths: dict[int, int],
) -> Callable[[int], float]:
    """Return a row's own gate score, computed once, when asked.

    A row outside the rescored pool (a borrower: usually one that holds no
    term) scores 0 of its own.
    """

    @functools.cache
    def own(r: int) -> float:
        held = matched.get(r)
        if held is None:
            return 0.0
        return gate.score(held, {t: frequencies[r].get(t, 1) for t in held}, lengths[r])

    return own


def _newest_holding(
    db: sqlite3.Connection,
    live: Sequence[Term],
    where: str,
    params: Sequence[Any],
    limit: int,
) -> dict[int, int | None]:
    # Every live term is over the budget: the newest rows holding the rarest
    # (with their stored lengths).
    for chosen in (live[:FREQUENT_AND_TERMS], live[:1]):
        found = db.execute(
            "SELECT m.rowid, m.tokens FROM memories_fts CROSS JOIN memories AS m "
            "ON m.rowid = memories_fts.rowid "
            f"WHERE memories_fts MATCH ? AND {where} "
            "ORDER BY memories_fts.rowid DESC LIMIT ?",
            [_join(chosen, "AND"), *params, limit],
        ).fetchall()
        if found:
            return dict(found)
    return {}


def _holding(
    db: sqlite3.Connection,
    term: Term,
    held: dict[Term, frozenset[int]],
    candidates: Sequence[int],
) -> frozenset[int]:
    # Which candidates hold the term. FTS5 reads the term's rows within the
    # candidates' rowid range, and SQLite keeps those in the list (``+rowid``:
    # not handed to FTS5, which answers a rowid list one lookup at a time,
    # each parsing the expression again: about 0.1 ms a candidate, 100-180 ms
    # for 1,500 at 100,000 rows, against about 4 ms this way).
    if term in held:
        return held[term] & frozenset(candidates)
    marks = ",".join("?" * len(candidates))
    found = db.execute(
        "SELECT rowid FROM memories_fts WHERE memories_fts MATCH ? "
        f"AND rowid >= ? AND rowid <= ? AND +rowid IN ({marks})",
        [term.phrase, min(candidates), max(candidates), *candidates],
    )
    return frozenset(int(rowid) for (rowid,) in found)


def _lengths(
    db: sqlite3.Connection,
    candidates: Sequence[int],
    stored: dict[int, int | None],
) -> dict[int, int]:
    """Each candidate's length: stored with its row, else FTS5's ``docsize``.

    A row written before lengths were stored (``tokens`` ``NULL``), or one
    whose length was not read on the way, has its ``docsize`` record read.
    """
    lengths = {r: n for r in candidates if (n := stored.get(r)) is not None}
    missing = [r for r in candidates if r not in lengths]
    if not missing:
        return lengths
    marks = ",".join("?" * len(missing))
    sizes = dict(
        db.execute(
            f"SELECT id, sz FROM memories_fts_docsize WHERE id IN ({marks})", missing
        ).fetchall()
    )
    lengths.update((rowid, doc_length(sizes.get(rowid))) for rowid in missing)
    return lengths


def _frequencies(
    db: sqlite3.Connection,
    live: Sequence[Term],
    holding: dict[Term, frozenset[int]],
    rows: Sequence[int],
) -> tuple[dict[int, str], dict[int, dict[Term, int]]]:
    # How often each held term occurs: its non-overlapping occurrences as a
    # substring of the key and content lowercased by SQLite's lower() (at least
    # 1: FTS5 found it as a word). Counted by str.count on the text read once:
    # SQL's length(replace()) per term re-lowered the text for every term (5 ms
    # a recall on BEAM's long messages, against about 1 ms).
    marks = ",".join("?" * len(rows))
    ids: dict[int, str] = {}
    frequencies: dict[int, dict[Term, int]] = {r: {} for r in rows}
    counted = [t for t in live if holding[t].intersection(rows)]
    found = db.execute(
        "SELECT rowid, id, lower(key || ' ' || content) FROM memories "
        f"WHERE rowid IN ({marks})",
        rows,
    )
    for rowid, entry_id, text in found:
        ids[rowid] = str(entry_id)
        for term in counted:
            if rowid in holding[term]:
                frequencies[rowid][term] = max(1, text.count(term.text))
    return ids, frequencies
