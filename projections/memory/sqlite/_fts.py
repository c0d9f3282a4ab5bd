"""Keyword search: safe FTS5 queries that stay fast on frequent words.

A query is never passed to FTS5 as syntax. It is split into word tokens the way
the ``unicode61`` tokenizer splits text, and each token becomes a quoted phrase
(``"token"``, or ``"token"*`` for a trailing ``*``), so quotes, operators,
column filters and SQL text are only ever searched for. Stop words and
one-character tokens are left out (a query of nothing else matches nothing).

Scores are query coverage (:func:`~policies.relevance.coverage_score`): the
IDF-weighted share of the query's terms a row contains, comparable across
queries; BM25 only chooses the candidates and breaks ties.

Stop-word safety. A ranked MATCH costs one BM25 evaluation (a few µs) per
matching row, and a query of frequent words matches most of the table (~120 ms
at 100k rows; reading a frequent word's count from ``fts5vocab`` alone costs
~9 ms, as it walks the whole doclist). So each token's document count is taken
by counting its matches up to :data:`MATCH_BUDGET` (cheap: no ranking), and
estimated from the newest :data:`SAMPLE_ROWS` rows above that. Then:

1. tokens that occur nowhere are dropped (they cannot match);
2. if the tokens' document counts sum to at most :data:`MATCH_BUDGET`, the
   query is the OR of all of them ranked by FTS5's BM25 (the reference
   behaviour, and the only case small stores ever see);
3. otherwise the rarest tokens whose counts fit the budget are OR-ed and ranked
   by FTS5's BM25 to pick a bounded candidate pool, which is then re-scored in
   Python over every token, so the frequent words still count;
4. if even the rarest token alone exceeds the budget (a query of very
   frequent words only), the candidates are the newest rows matching the AND
   of the three rarest tokens (or the rarest alone when that AND matches nothing), again
   re-scored over every token.

Every query carries the read scope inside, so the budget and pools are computed
on the rows the caller may see.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Sequence
from typing import Any, Final, NamedTuple, TypeAlias

from turnledger.policies.relevance import (
    MIN_TERM_CHARS,
    is_content_term,
    keyword_score,
    term_weight,
    word_tokens,
)
from turnledger.projections.memory.sqlite._scope import Scope, scope_sql

MATCH_BUDGET: Final = 1_000
"""The most documents the OR-ed terms of one ranked MATCH may cover."""

SAMPLE_ROWS: Final = 5_000
"""How many of the newest rows a frequent token's document count is estimated on."""

MAX_TERMS: Final = 16
"""How many distinct tokens of a query are used (the longest, when more)."""

RESCORE_POOL: Final = 64
"""The smallest candidate pool re-scored in Python."""

FREQUENT_AND_TERMS: Final = 3
"""How many of the rarest tokens a stop-word-only query ANDs."""


class Term(NamedTuple):
    """One query token: its normalised text and whether it is a prefix."""

    text: str
    prefix: bool = False

    @property
    def phrase(self) -> str:
        """The token as an FTS5 phrase (tokens never contain quotes)."""
        return f'"{self.text}"*' if self.prefix else f'"{self.text}"'


class Plan(NamedTuple):
    """How to run a keyword query.

    Attributes:
        expression: The MATCH expression.
        ranked: ``True``: candidates by FTS5 BM25; ``False``: newest matches.
        rescore: Tokens to re-score the candidates with in Python (empty: the
            FTS5 BM25 is the score).
    """

    expression: str
    ranked: bool
    rescore: tuple[Term, ...] = ()


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


FrequentTerms: TypeAlias = dict[str, tuple[int, int]]
"""Estimated counts of frequent phrases: ``{phrase: (count, row count then)}``."""

_FREQUENT_CACHE: Final = 4_096
_STALE_SHARE: Final = 0.1


def document_counts(
    db: sqlite3.Connection,
    terms: Sequence[Term],
    total: int,
    frequent: FrequentTerms | None = None,
) -> dict[Term, int]:
    """Return how many rows contain each term (a prefix: any completion).

    Counts are exact up to :data:`MATCH_BUDGET`; above it they are estimated
    from the newest :data:`SAMPLE_ROWS` rows (and never below the budget + 1).
    Estimates are kept in ``frequent`` and reused while the table has grown or
    shrunk by less than a tenth: stop words recur in almost every query.

    Args:
        db: The memory database.
        terms: The query's terms.
        total: The number of indexed rows (see :func:`row_count`).
        frequent: The caller's cache of estimates (updated in place).
    """
    cache: FrequentTerms = {} if frequent is None else frequent
    counts: dict[Term, int] = {}
    for term in terms:
        known = cache.get(term.phrase)
        if known is not None and abs(total - known[1]) <= _STALE_SHARE * known[1]:
            counts[term] = known[0]
            continue
        found = _count(db, term.phrase, MATCH_BUDGET + 1)
        if found > MATCH_BUDGET:
            found = max(found, _estimate(db, term.phrase, total))
            if len(cache) >= _FREQUENT_CACHE:
                cache.clear()
            cache[term.phrase] = (found, total)
        counts[term] = found
    return counts


def _count(db: sqlite3.Connection, expression: str, cap: int, after: int = 0) -> int:
    row = db.execute(
        "SELECT count(*) FROM (SELECT rowid FROM memories_fts "
        "WHERE memories_fts MATCH ? AND rowid > ? LIMIT ?)",
        (expression, after, cap),
    ).fetchone()
    return int(row[0])


def _estimate(db: sqlite3.Connection, expression: str, total: int) -> int:
    after = max(0, total - SAMPLE_ROWS)
    found = _count(db, expression, SAMPLE_ROWS, after)
    return found if after == 0 else round(found * total / SAMPLE_ROWS)


def row_count(db: sqlite3.Connection) -> int:
    """Return the highest rowid: the indexed row count, give or take deletions.

    It is O(log n) where ``count(*)`` walks the table, and only feeds estimates
    (inverse document frequencies, sampling windows).
    """
    return int(db.execute("SELECT coalesce(max(rowid), 0) FROM memories").fetchone()[0])


def plan_query(counts: dict[Term, int], budget: int = MATCH_BUDGET) -> Plan | None:
    """Choose the MATCH for a query's terms (see the module docstring).

    Args:
        counts: Each term's document count.
        budget: The most documents one ranked OR may cover.

    Returns:
        The plan, or ``None`` when no term occurs anywhere.
    """
    live = sorted((t for t, n in counts.items() if n > 0), key=lambda t: (counts[t], t))
    if not live:
        return None
    if sum(counts[t] for t in live) <= budget:
        return Plan(_join(live, "OR"), ranked=True)
    selective: list[Term] = []
    covered = 0
    for term in live:
        if covered + counts[term] > budget:
            break
        selective.append(term)
        covered += counts[term]
    if selective:
        return Plan(_join(selective, "OR"), ranked=True, rescore=tuple(live))
    return Plan(
        _join(live[:FREQUENT_AND_TERMS], "AND"), ranked=False, rescore=tuple(live)
    )


def _join(terms: Sequence[Term], operator: str) -> str:
    return f" {operator} ".join(t.phrase for t in terms)


def keyword_search(
    db: sqlite3.Connection,
    query: str,
    scope: Scope,
    window: int,
    frequent: FrequentTerms | None = None,
) -> dict[int, tuple[str, float]]:
    """Return the scope's best keyword matches, scored by query coverage.

    Candidates are chosen by BM25 (see the module docstring); each is then
    scored by :func:`~policies.relevance.keyword_score`: the IDF-weighted share
    of the query's content terms it contains, discounted a little for weak
    evidence, on [0, 1] and independent of the other candidates. Ties go to
    the entry id.

    Args:
        db: The memory database.
        query: The user's query text.
        scope: The rows that may match.
        window: How many candidates to return at most.
        frequent: The caller's cache of frequent-term estimates.

    Returns:
        ``{rowid: (entry id, score)}`` for at most ``window`` rows, best first.
    """
    terms = query_terms(query)
    if not terms:
        return {}
    total = row_count(db)
    counts = document_counts(db, terms, total, frequent)
    plan = plan_query(counts, MATCH_BUDGET)
    if plan is None:
        return {}
    pool = max(window, RESCORE_POOL)
    rows = _candidates(db, plan, scope, pool)
    if not rows and plan.rescore and not plan.ranked:
        rarest = Plan(plan.rescore[0].phrase, ranked=False, rescore=plan.rescore)
        rows = _candidates(db, rarest, scope, pool)
    weights = {t.phrase: term_weight(total, counts[t]) for t in terms}
    scored: dict[int, tuple[str, float]] = {}
    for row in _with_text(db, rows):
        words = tokens(f"{row[3]} {row[4]}")
        seen = Counter(words)
        found = {t.phrase: _frequency(t, seen) for t in terms}
        scored[int(row[0])] = (str(row[1]), keyword_score(weights, found, len(words)))
    best = sorted(scored.items(), key=lambda kv: (-kv[1][1], kv[1][0]))
    return dict(best[:window])


def _candidates(
    db: sqlite3.Connection, plan: Plan, scope: Scope, limit: int
) -> list[tuple[Any, ...]]:
    where, params = scope_sql(scope)
    rank = "bm25(memories_fts)" if plan.ranked else "NULL"
    order = "raw, m.id" if plan.ranked else "memories_fts.rowid DESC"
    sql = (
        f"SELECT m.rowid, m.id, {rank} AS raw FROM memories_fts "
        "JOIN memories AS m ON m.rowid = memories_fts.rowid "
        f"WHERE memories_fts MATCH ? AND {where} ORDER BY {order} LIMIT ?"
    )
    return db.execute(sql, [plan.expression, *params, limit]).fetchall()


def _with_text(
    db: sqlite3.Connection, rows: Sequence[tuple[Any, ...]]
) -> list[tuple[Any, ...]]:
    # Fetched apart, so the ranking above sorts narrow rows.
    if not rows:
        return []
    marks = ",".join("?" * len(rows))
    text = {
        rowid: (key, content)
        for rowid, key, content in db.execute(
            f"SELECT rowid, key, content FROM memories WHERE rowid IN ({marks})",
            [row[0] for row in rows],
        )
    }
    return [(*row, *text[row[0]]) for row in rows]


def _frequency(term: Term, seen: Counter[str]) -> int:
    if term.prefix:
        return sum(n for word, n in seen.items() if word.startswith(term.text))
    return seen[term.text]
