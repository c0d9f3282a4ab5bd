"""Relevance scores that mean the same thing for every query (pure).

A keyword score is the share of the query's *information* an entry contains:
``sum(idf(t) for t matched) / sum(idf(t) for every query term)``, over the
query's content terms (stop words and one-character tokens removed). It does
not depend on which other rows were found, so ``0.4`` means "about 40% of what
the query asked for is here" on every query; the SQLite backend takes the
inverse document frequencies on the rows the caller may see, never the whole
table, and ranks by BM25 on the same statistics (:func:`bm25_term`): the score
is what a relevance floor is compared to, the ranking is the order. The
reference divided by the best hit of the batch instead, so the best hit of any
batch scored 1.0 and a relevance floor filtered nothing.

A query with no content term ("what is it", "a") matches nothing: no keyword
hit, no substring hit and no vector hit.

Hybrid scores are a weighted probabilistic OR of both legs (:func:`fuse`), each
row measured on both (a row no keyword matched has keyword score 0; a row
without a vector is scored on keywords alone).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from typing import Any, Final, Generic, TypeVar

_STOP_WORD_TEXT: Final = """
    a about above after again against all am an and any anyone anything are aren
    as at be because been before being below between both but by can could d did
    didn do does doesn doing don done down during each either else ever every
    few for from further get gets got had has have having he her here hers
    herself him himself his how i if in into is isn it its itself just know let
    like ll m may me might mine more most much must my myself no nor not nothing
    now of off on once one only or other ought our ours ourselves out over own
    please re recall remember s same shall she should so some someone something
    such t tell than that the their theirs them themselves then there these they
    thing things this those though through thus to too under until up upon us ve
    very was wasn we were weren what whatever when where whether which while who
    whom whose why will with won would yet you your yours yourself yourselves
"""
STOP_WORDS: Final = frozenset(_STOP_WORD_TEXT.split())
"""English function words: never matched, never weighed (lowercase)."""

MIN_TERM_CHARS: Final = 2
"""Tokens shorter than this are ignored (``a``, ``x``, a stray digit)."""

_TOKEN: Final = re.compile(r"[^\W_]+")
_Term = TypeVar("_Term", bound=Hashable)


def normalize(text: str) -> str:
    """Lowercase and strip diacritics (as FTS5 ``unicode61 remove_diacritics 2``)."""
    if text.isascii():
        return text.lower()
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).lower()


def word_tokens(text: str) -> list[str]:
    """Return a text's word tokens, normalised (letters and digits, no ``_``)."""
    return _TOKEN.findall(normalize(text))


def token_count(key: str, content: str) -> int:
    """Return an entry's length in word tokens, key and content (:func:`word_tokens`).

    What the SQLite and PostgreSQL memories store with each entry for BM25.
    """
    return len(word_tokens(f"{key} {content}"))


def is_content_term(token: str) -> bool:
    """Return whether a normalised token carries meaning (not a stop word)."""
    return len(token) >= MIN_TERM_CHARS and token not in STOP_WORDS


def content_terms(query: str) -> tuple[str, ...]:
    """Return a query's distinct content terms, in order."""
    return tuple(dict.fromkeys(t for t in word_tokens(query) if is_content_term(t)))


def is_meaningful_query(query: str) -> bool:
    """Return whether a query has at least one content term (else: no match)."""
    return bool(content_terms(query))


def term_weight(total: int, docs: int) -> float:
    """Return a term's inverse document frequency, always positive.

    ``ln(1 + (N - n + 0.5) / (n + 0.5))`` with ``n`` at least 1 (a term that
    occurs nowhere weighs as much as one that occurs once, so an unknown word
    lowers the score of every row without swamping the query) and ``N`` at least
    ``n``.

    Args:
        total: The number of rows (``N``).
        docs: The number of rows containing the term (``n``).
    """
    n = max(1, docs)
    rows = max(total, n)
    return math.log(1.0 + (rows - n + 0.5) / (n + 0.5))


def coverage_score(
    weights: Mapping[_Term, float], matched: Collection[_Term] | Iterable[_Term]
) -> float:
    """Return the weighted share of the query's terms an entry contains.

    Args:
        weights: Each query term's weight (see :func:`term_weight`).
        matched: The terms the entry contains.

    Returns:
        A score in [0, 1]; 0.0 when there are no weights.
    """
    total = sum(weights.values())
    if not total > 0:
        return 0.0
    found = sum(weights[t] for t in set(matched) if t in weights)
    return min(1.0, max(0.0, found / total))


COVERAGE_EXPONENT: Final = 1.5
"""Keyword scores grow faster than coverage: half of a query found scores 0.35
(under the default 0.4 floor: one shared word of two is not evidence), three
quarters 0.65, all of it about 1 (chosen on benchmarks/bench_recall_quality.py,
where it takes keyword-only abstention precision from 75% to 100%)."""

STRENGTH_SHARE: Final = 0.1
"""How much of a keyword score rests on the strength of the evidence (how often
a term occurs, in how long an entry) rather than on coverage alone."""

REFERENCE_LENGTH: Final = 16
"""The entry length (tokens) at which BM25's length normalisation is neutral."""

BM25_K1: Final = 1.2
BM25_B: Final = 0.75


def term_strength(frequency: int, length: int) -> float:
    """Return BM25's saturated term frequency, scaled to [0, 1).

    ``tf (k1 + 1) / (tf + k1 (1 - b + b len / L)) / (k1 + 1)`` with the
    reference length ``L`` fixed (:data:`REFERENCE_LENGTH`), so it does not
    depend on the other rows.
    """
    if frequency <= 0:
        return 0.0
    norm = BM25_K1 * (1 - BM25_B + BM25_B * max(length, 1) / REFERENCE_LENGTH)
    return frequency / (frequency + norm)


def keyword_score(
    weights: Mapping[_Term, float], frequencies: Mapping[_Term, int], length: int
) -> float:
    """Return an entry's keyword score for a query, on [0, 1].

    ``coverage ** 1.5 * (1 - s + s * strength)``: the IDF-weighted share of the
    query's terms found (:func:`coverage_score`, raised to
    :data:`COVERAGE_EXPONENT`), discounted by up to
    :data:`STRENGTH_SHARE` when the evidence is weak (each found term's
    :func:`term_strength`, IDF-weighted). Nothing depends on other rows.

    Args:
        weights: Each query term's weight.
        frequencies: How often each query term occurs in the entry.
        length: The entry's length in tokens.
    """
    matched = [t for t in weights if frequencies.get(t, 0) > 0]
    coverage = coverage_score(weights, matched)
    if not matched:
        return 0.0
    found = sum(weights[t] for t in matched)
    strength = (
        sum(weights[t] * term_strength(frequencies[t], length) for t in matched) / found
        if found > 0
        else 0.0
    )
    shaped = float(coverage**COVERAGE_EXPONENT)
    return shaped * (1.0 - STRENGTH_SHARE + STRENGTH_SHARE * strength)


ABSENT_FULL_ROWS: Final = 100
"""From how many scoped rows the keyword gate counts two kinds of query term
fully against a row (below, in proportion to the scope's rows): a term no
scoped row holds, and a term of another subject (held by a candidate sharing no
query term with the row). In a small store a missing word ("use" in "which
editor do I use", one entry) says little, and "my editor and my shell" is
answered by two rows; in a large one both are the best sign that the row is
about something else (not counting other subjects at any size took LoCoMo
abstention on the development split, ``--split dev``, from 57% to 26%). A
question most of whose words no row holds is not one the store knows: then
its missing words count fully at any size (:func:`mostly_unheld`)."""


def mostly_unheld(counts: Mapping[_Term, int], terms: Collection[_Term]) -> bool:
    """Return whether more than half of the query's ``terms`` are in no scoped row.

    Then the keyword gate counts the terms no row holds fully, however small
    the scope (:func:`gate_weights`): the allowance forgives a missing word, not
    a missing question. In a store of seven messages, "how fast does a cheetah
    run" found "our deploys run on Thursday evenings" at 0.78, "fast" and
    "cheetah" weighing 7/100 of their weight; measured on the first 5 and 20
    messages of each public conversation (``bench_recall_public.py --first``),
    see the memory guide.

    Args:
        counts: How many of the scope's rows hold each term.
        terms: The query's terms.
    """
    unheld = sum(1 for t in terms if counts.get(t, 0) <= 0)
    return unheld * 2 > len(terms)


def other_subjects(
    held: frozenset[_Term], subjects: Iterable[frozenset[_Term]]
) -> frozenset[_Term]:
    """Return the query terms other candidates hold that share none with ``held``.

    A query about two subjects ("my editor and my shell") is answered by rows
    holding either: in a small scope the gate counts the other subject's terms
    against a row only in part (:data:`ABSENT_FULL_ROWS`).

    Args:
        held: The query terms the row holds.
        subjects: The query terms each candidate holds.
    """
    others: set[_Term] = set()
    for subject in subjects:
        if not subject & held:
            others |= subject
    return frozenset(others)


def gate_weights(
    weights: Mapping[_Term, float],
    counts: Mapping[_Term, int],
    rows: int,
    others: Collection[_Term],
) -> dict[_Term, float]:
    """Return the weights a row's keyword score is taken with (the gate's).

    Each query term's weight (:func:`term_weight`), in full, except for a term
    no scoped row holds (``counts`` 0) and a term of another subject
    (``others``, :func:`other_subjects`): those weigh in proportion to the
    scope's ``rows``, in full from :data:`ABSENT_FULL_ROWS` rows; a term no
    scoped row holds weighs in full at any size when more than half of the
    query's terms are in no scoped row (:func:`mostly_unheld`). SQLite and
    PostgreSQL score their keyword candidates with these
    (:func:`keyword_score`).

    Args:
        weights: Each query term's weight.
        counts: How many of the scope's rows hold each term.
        rows: How many rows the scope holds.
        others: The terms of the query's other subjects, for this row.
    """
    partial = min(1.0, rows / ABSENT_FULL_ROWS)
    unheld = 1.0 if mostly_unheld(counts, weights.keys()) else partial
    return {
        t: w * (unheld if counts.get(t, 0) <= 0 else partial if t in others else 1.0)
        for t, w in weights.items()
    }


class KeywordGate(Generic[_Term]):
    """The keyword gate of one query on one scope: each row's score.

    :func:`keyword_score` with :func:`gate_weights` (computed once for each set
    of terms held). SQLite and PostgreSQL score their keyword candidates with
    it.

    Args:
        weights: Each query term's weight (:func:`term_weight` on the scope).
        counts: How many of the scope's rows hold each term.
        rows: How many rows the scope holds.
        subjects: The query terms each candidate holds (for
            :func:`other_subjects`).
    """

    def __init__(
        self,
        weights: Mapping[_Term, float],
        counts: Mapping[_Term, int],
        rows: int,
        subjects: Iterable[frozenset[_Term]],
    ) -> None:
        self.weights = weights
        self.counts = counts
        self.rows = rows
        self.subjects = frozenset(subjects)
        self._gates: dict[frozenset[_Term], dict[_Term, float]] = {}

    def score(
        self, held: frozenset[_Term], frequencies: Mapping[_Term, int], length: int
    ) -> float:
        """Return the score of a row holding ``held``, ``frequencies`` times each.

        Args:
            held: The query terms the row holds.
            frequencies: How often it holds each.
            length: Its length in tokens.
        """
        gate = self._gates.get(held)
        if gate is None:
            others = other_subjects(held, self.subjects)
            gate = gate_weights(self.weights, self.counts, self.rows, others)
            self._gates[held] = gate
        return keyword_score(gate, frequencies, length)


def bm25_term(weight: float, frequency: int, length: int, average: float) -> float:
    """Return one matched term's BM25 contribution (FTS5's ``k1`` and ``b``).

    ``w * tf (k1 + 1) / (tf + k1 (1 - b + b len / avg))``.

    Args:
        weight: The term's inverse document frequency (:func:`term_weight`).
        frequency: How often the term occurs in the row (at least 1 counts).
        length: The row's length in tokens.
        average: The scope's average row length in tokens.
    """
    tf = max(1, frequency)
    ratio = max(length, 1) / average if average > 0 else 1.0
    return weight * tf * (BM25_K1 + 1) / (tf + BM25_K1 * (1 - BM25_B + BM25_B * ratio))


def scope_scores(query: str, texts: Sequence[str]) -> list[float]:
    """Return each text's keyword score for a query, the texts being a whole scope.

    The keyword gate of SQLite and PostgreSQL (:class:`KeywordGate`: the
    IDF-weighted share of the query's content terms a text holds, with the
    gate's small-scope allowances), each term's IDF counted on these texts,
    for a scope read whole (Markdown's files, the ledger's memory as of a past
    point). Lengths and frequencies are word tokens (:func:`word_tokens`); a
    query of stop words only scores 0 everywhere.

    Args:
        query: The query.
        texts: Every text of the scope (an entry's key and content).
    """
    terms = content_terms(query)
    if not terms:
        return [0.0] * len(texts)
    counted = [Counter(word_tokens(text)) for text in texts]
    held = [frozenset(t for t in terms if counts[t] > 0) for counts in counted]
    docs = {t: sum(t in h for h in held) for t in terms}
    weights = {t: term_weight(len(texts), docs[t]) for t in terms}
    gate = KeywordGate(weights, docs, len(texts), (h for h in held if h))
    return [
        gate.score(h, {t: counts[t] for t in h}, counts.total()) if h else 0.0
        for h, counts in zip(held, counted, strict=True)
    ]


UNRELATED_SCORE: Final = 0.001
"""What a cosine at the embedder's unrelated floor scores (:func:`calibrate`).

A cosine under the floor scores less, in proportion, and still more than 0: the
row is ranked by its cosine (ranking and the injection floor are separate
decisions), and not injected (``[recall] min_relevance`` is 0.4 by default);
above the floor, scores are at most this much higher than a plain linear map.
Until 2026-12-05 such rows scored 0 and were left out of recall. Measured the
same day with the static model, before -> after: ``bench_recall_quality.py``'s
hybrid found 58% -> 81% of the evidence in its top ten (2,054 rows; 56% -> 70%
at 100,000), abstention and latest-wins 100% either way; ``bench_recall_public``
(default mode) any@10 on LoCoMo 0.641 -> 0.652 and on BEAM-100K 0.565 -> 0.576,
abstention on LoCoMo 33.4% -> 37.2% and on BEAM 30% either way, the evidence
injected on LoCoMo 32.1% -> 31.7% (BEAM's unchanged), off-topic questions
injecting nothing 99.6% (LoCoMo) and 99.4% -> 99.5% (BEAM). With the
transformer, the first benchmark's hybrid found 88% either way. At 0.01
instead of 0.001, BEAM abstention fell to 27.5%."""


def calibrate(cosine: float, floor: float = 0.0, ceiling: float = 1.0) -> float:
    """Map an embedder's cosine onto relevance: ``floor`` -> 0.001, ``ceiling`` -> 1.

    Models differ in where unrelated texts land (all-MiniLM-L6-v2: about 0.1 to
    0.35; paraphrases: 0.45 to 0.8), so a raw cosine means nothing against a
    0.4 floor; an embedder may declare its range (``similarity_range``).
    Between a positive ``floor`` and ``ceiling`` the map is linear, from
    :data:`UNRELATED_SCORE` to 1; under that floor, a positive cosine scores
    in proportion up to :data:`UNRELATED_SCORE` (ranked, not injected); a
    cosine at or under 0 scores 0. A floor at or under 0 leaves no positive
    cosine under it: the range maps linearly onto 0 to 1. An empty or inverted
    range only clamps. The map never decreases.
    """
    if not ceiling > floor:
        return min(1.0, max(0.0, cosine))
    if floor <= 0.0:
        return min(1.0, max(0.0, (cosine - floor) / (ceiling - floor)))
    if cosine <= 0.0:
        return 0.0
    if cosine < floor:
        return UNRELATED_SCORE * cosine / floor
    linear = (cosine - floor) / (ceiling - floor)
    return min(1.0, UNRELATED_SCORE + (1.0 - UNRELATED_SCORE) * linear)


ABSENT_EXPONENT: Final = 1.5
"""How hard the query's words no scoped row holds count against the vector leg
(:func:`discount_absent`): its relevance is multiplied by ``(1 - share) ** 1.5``.

A static embedding puts "how do you say good morning in finnish" near a long
message about a morning schedule (cosine 0.65, relevance 0.67 over the 0.4
floor); the keyword statistics know no row holds "finnish", the query's
rarest word. Fitted on ``bench_recall_public``'s development split (``--split
dev``: LoCoMo's first five conversations, BEAM-100K's first ten), default mode,
re-gating one run's leg scores offline: the smallest exponent of 0.5, 1, 1.5,
2 and 3 with which no off-topic question injects anything. On the held-out
split, the same run, without -> with: off-topic questions injecting something
2 of 250 (LoCoMo) and 3 of 500 (BEAM) -> none; abstention 34.9% -> 53.1%
(LoCoMo) and 30% either way (BEAM); the evidence injected 32.9% -> 28.5%
(LoCoMo) and 33.7% -> 33.1% (BEAM): a paraphrase whose words the store does
not hold is discounted too (``bench_recall_quality``'s paraphrased questions,
static model, 3,000 rows: evidence injected 26% -> 19%). The order (reciprocal
rank fusion of the legs' ranks) does not change."""


def absent_share(
    weights: Mapping[_Term, float], counts: Mapping[_Term, int], rows: int
) -> float:
    """Return the share of the query's weight that no scoped row holds, on [0, 1].

    ``sum(weights of terms counted 0) / sum(weights)``, times the scope's
    ``rows`` over :data:`ABSENT_FULL_ROWS` (at most 1), as the keyword gate
    counts such a term (:func:`gate_weights`): in a small store a missing word
    says little. Unlike the gate, a question most of whose terms no row holds
    (:func:`mostly_unheld`) gets the same allowance: the vectors may find
    its paraphrase (counting those terms fully here too cost four injected
    answers in small public stores and spared one off-topic question of
    3,000).

    Args:
        weights: Each query term's weight (:func:`term_weight` on the scope).
        counts: How many of the scope's rows hold each term.
        rows: How many rows the scope holds.
    """
    total = sum(weights.values())
    if not total > 0 or rows <= 0:
        return 0.0
    absent = sum(w for t, w in weights.items() if counts.get(t, 0) <= 0)
    partial = min(1.0, rows / ABSENT_FULL_ROWS)
    return min(1.0, max(0.0, partial * absent / total))


def discount_absent(relevance: float, absent: float) -> float:
    """Return a vector relevance discounted by the query's absent share.

    ``relevance * (1 - absent) ** ABSENT_EXPONENT`` (:data:`ABSENT_EXPONENT`,
    ``absent`` from :func:`absent_share`), never under the smaller of the
    relevance and :data:`UNRELATED_SCORE`: a row the vectors found stays
    ranked (recall never drops it for this), but is not injected. Never
    increases a relevance; 0 stays 0.
    """
    if not relevance > 0.0:
        return 0.0
    kept = relevance * float((1.0 - min(1.0, max(0.0, absent))) ** ABSENT_EXPONENT)
    return max(kept, min(relevance, UNRELATED_SCORE))


KEYWORD_CONFIDENT: Final = 0.7
"""A keyword score from which the keyword leg counts in full in :func:`fuse`.

From 0.7 (a row holding about 80% of the query's weighted words) the keyword
leg is confident alone, as the heavier vector leg always is: a row answering
one subject of a two-subject question (0.78, its cosine at the embedder's
floor) fused to 0.335 under the 0.4 floor. Measured with the static model on
LoCoMo and BEAM-100K (``bench_recall_public``, default mode, the same runs
with and without it): BEAM abstention (30.0%) and off-topic questions
injecting nothing (99.4%) unchanged, LoCoMo abstention 34.1% -> 33.6%. On the
leg scores of one run re-gated offline, every threshold from 0.7 to 0.9 gave
the same BEAM figures, and 0.65 or below lowered BEAM abstention to 25%."""


def fuse(
    vector: float | None,
    keyword: float | None,
    *,
    vector_weight: float = 0.7,
    keyword_weight: float = 0.3,
) -> float:
    """Fuse one row's legs into a score in [0, 1]: a weighted probabilistic OR.

    ``1 - prod(1 - (w_i / w_max) * s_i)`` over the legs that measured the row,
    ``w_max`` the largest of their weights. One leg alone scores itself; with
    both, the row scores at least its stronger (weighted) leg and agreement
    adds to it, so a paraphrase found by the vectors and half found by the
    keywords is not pulled under the floor by the weaker leg, as a weighted
    mean would (0.7/0.3: a cosine of 0.55 alone scores 0.55, not 0.385). A
    keyword score of at least :data:`KEYWORD_CONFIDENT` counts in full
    whatever its weight (the row scores at least that), when the keyword
    leg's weight is above 0.

    Args:
        vector: The row's cosine similarity, or ``None`` when the row has no
            vector (or vectors are off).
        keyword: The row's keyword score, or ``None`` when the keyword leg is
            off. A live leg that did not match the row passes 0.0.
        vector_weight: The vector leg's weight.
        keyword_weight: The keyword leg's weight.

    Returns:
        The fused score; 0.0 when no leg measured the row.
    """
    legs = [
        (weight, min(1.0, max(0.0, score)))
        for weight, score in ((vector_weight, vector), (keyword_weight, keyword))
        if score is not None and weight > 0
    ]
    if not legs:
        return 0.0
    top = max(weight for weight, _ in legs)
    missed = 1.0
    for weight, score in legs:
        missed *= 1.0 - weight / top * score
    fused = 1.0 - missed
    if keyword is not None and keyword_weight > 0 and keyword >= KEYWORD_CONFIDENT:
        fused = max(fused, keyword)
    return min(1.0, max(0.0, fused))


RRF_K: Final = 60
"""Reciprocal rank fusion's constant (Cormack et al.'s 60)."""


def reciprocal_rank(rank: int) -> float:
    """A result's share of a reciprocal rank fusion: ``1 / (RRF_K + rank)``."""
    return 1.0 / (RRF_K + rank)


UPDATE_BAND: Final = 0.8
"""How close to the best BM25 of the rows holding the same query terms a newer
row must rank to be put first. Wider bands override BM25 among rows merely
sharing the query's words (at 0.5 a one-word query lists such rows newest
first); an update worded like what it updates ranks within 0.8 of it."""

_Row = TypeVar("_Row")


def newer_first(
    ranked: Sequence[tuple[_Row, Hashable, float]],
    *,
    recency: Callable[[_Row], Any],
) -> list[_Row]:
    """Return the rows in rank order, the newest first among near-duplicates.

    Rows holding exactly the same query terms whose rank is at least
    :data:`UPDATE_BAND` times the best of them are near-duplicates for this
    query (an entry and its update, worded alike): they keep the positions they
    occupy together, filled newest (highest ``recency``) first. Every other row
    keeps its position.

    Args:
        ranked: ``(row, terms held, rank)``, best rank first.
        recency: A row's age order (greater: newer).
    """
    best: dict[Hashable, float] = {}
    for _, held, rank in ranked:
        best.setdefault(held, rank)
    groups: dict[Hashable, list[int]] = {}
    for position, (_, held, rank) in enumerate(ranked):
        if rank >= UPDATE_BAND * best[held]:
            groups.setdefault(held, []).append(position)
    order = [row for row, _, _ in ranked]
    for positions in groups.values():
        newest = sorted((order[p] for p in positions), key=recency, reverse=True)
        for position, row in zip(positions, newest, strict=True):
            order[position] = row
    return order
