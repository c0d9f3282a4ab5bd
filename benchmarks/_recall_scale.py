"""Recall latency at scale: the quality store grown to N rows, every mode timed.

The quality store (facts and distractors written through the memory service,
embedded by the local model) is grown with filler rows up to ``--rows``
(100,000 by default). Embedding 100k rows with MiniLM would take many minutes,
so each filler row repeats a distractor's text, and its vector is that
distractor's stored vector plus a little noise (renormalised; so scores do not
tie). Filler rows are applied to the memory file directly
(``SQLiteMemory.apply`` of ``memory.stored`` events, in pages), not appended to
the ledger: this part measures recall, not writes.

The queries are the data set's questions plus template questions about the
distractors' subjects (their words occur in thousands of rows, so the keyword
leg does real work), all distinct. Timed per query, wall clock and CPU
(``time.process_time``, this process's threads), on the same grown store:

- ``raw_fts5``: FTS5 bm25 over every live row (OR of the query's words);
- ``keyword``: ``SQLiteMemory`` in ``bm25`` mode;
- ``embed``: the local embedder alone on the query (``embed([query])``);
- ``local``: ``embedding`` mode (the query embedding included);
- ``hybrid``: ``hybrid`` mode (the query embedding included);
- ``hybrid-v``: hybrid with the query's vector computed beforehand: what
  hybrid costs besides the query embedding (keyword leg, vector leg, fusion);
- ``local-ivf``, ``hybrid-ivf``: ``local`` and ``hybrid`` searching inverted
  lists (``[embedding] index = "ivf"``); ``lists`` is the first recall of
  ``local-ivf`` (loading the matrix, training the lists, arranging the
  rows), timed apart.
"""

from __future__ import annotations

import random
import sqlite3
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from uuid import UUID

import numpy as np
from _recall_data import SUBJECTS

from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import MemoryStored
from turnledger.projections.memory.embedding import Embedder, EmbeddingIdentity
from turnledger.projections.memory.sqlite import SQLiteMemory
from turnledger.projections.memory.sqlite._ivf import IVF_MIN_ROWS, list_count

PAGE = 5_000
NOISE = 0.05  # the filler vector's noise, relative to the unit vector
_STREAM = UUID(int=0xF111)
_T0 = datetime(2026, 1, 1, tzinfo=UTC)

_LEADS = [
    "when is",
    "what is the status of",
    "who has to sign off",
    "any news about",
    "what did Sam say about",
    "remind me about",
    "is there a deadline for",
    "what happened with",
]
_TAILS = ["", "this week", "before Friday", "in April"]


def template_queries(count: int, seed: int) -> list[str]:
    """Distinct questions about the distractors' subjects."""
    every = [
        f"{lead} {topic} {tail}".strip()
        for lead in _LEADS
        for topic in SUBJECTS
        for tail in _TAILS
    ]
    random.Random(seed).shuffle(every)
    return every[:count]


class PoolEmbedder:
    """Returns a stored text's vector plus noise (for filler rows only).

    Args:
        identity: The local embedder's identity (so the store keeps its vectors).
        pool: ``{text: unit vector}`` of the rows filler repeats.
        seed: The noise seed.
    """

    def __init__(
        self, identity: EmbeddingIdentity, pool: dict[str, np.ndarray], seed: int
    ) -> None:
        self._identity = identity
        self._pool = pool
        self._rng = np.random.default_rng(seed)

    @property
    def identity(self) -> EmbeddingIdentity:
        return self._identity

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        base = np.stack([self._pool[t] for t in texts])
        dims = base.shape[1]
        noisy = base + self._rng.standard_normal(base.shape) * (NOISE / dims**0.5)
        noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)
        vectors: list[list[float]] = noisy.tolist()
        return vectors


class GivenEmbedder:
    """Returns vectors computed beforehand (``hybrid-v``: no model in the timing).

    It offers the model's ``int8_product`` (if any), so the vector index
    searches as it does for ``hybrid``.
    """

    def __init__(
        self,
        identity: EmbeddingIdentity,
        known: dict[str, list[float]],
        product: object = None,
    ) -> None:
        self._identity = identity
        self._known = known
        self.int8_product = product

    @property
    def identity(self) -> EmbeddingIdentity:
        return self._identity

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._known[t] for t in texts]


def grow(path: Path, identity: EmbeddingIdentity, rows: int, agent: str) -> int:
    """Add filler rows to the memory file until it has ``rows``; return how many."""
    db = sqlite3.connect(path)
    stored = db.execute(
        "SELECT content, embedding FROM memories WHERE key LIKE 'note_%' "
        "AND embedding IS NOT NULL AND superseded_by IS NULL"
    ).fetchall()
    have = db.execute("SELECT count(*) FROM memories").fetchone()[0]
    db.close()
    missing = rows - have
    if missing <= 0 or not stored:
        return 0
    pool = {str(t): np.frombuffer(v, dtype="<f4").astype(np.float64) for t, v in stored}
    texts = sorted(pool)
    rng = random.Random(rows)
    memory = SQLiteMemory(
        path, embedder=PoolEmbedder(identity, pool, rows), cache_size=0
    )
    try:
        position = memory.applied_position()
        for start in range(0, missing, PAGE):
            page = [
                Recorded(
                    stream_id=_STREAM,
                    version=i + 1,
                    position=position + i + 1,
                    recorded_at=_T0,
                    event=MemoryStored(
                        agent=agent,
                        key=f"fill_{i}",
                        content=rng.choice(texts),
                        category="core",
                        entry_id=f"fill-{i:07d}",
                    ),
                )
                for i in range(start, min(missing, start + PAGE))
            ]
            memory.apply(page, page[-1].position)
        # The background thread embeds after the writes: every filler row gets
        # its vector here, or the searches would scan only those embedded so far.
        memory.embed_pending()
        if memory.pending_vectors:
            msg = f"grow: {memory.pending_vectors} filler rows still lack a vector"
            raise RuntimeError(msg)
    finally:
        memory.close()
    return missing


class Timing:
    """Per-query wall-clock and CPU milliseconds of one mode."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.wall: list[float] = []
        self.cpu: list[float] = []

    @staticmethod
    def pct(values: Sequence[float], q: float) -> float:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]


def timed(
    name: str,
    run: Callable[[str], object],
    queries: Sequence[str],
    *,
    warm: bool = True,
) -> Timing:
    """Run every query once, timing each (after two warm-up calls if ``warm``)."""
    if warm:
        run("warm up the caches")
        run("and the matrix")
    timing = Timing(name)
    for query in queries:
        started, cpu = time.perf_counter(), time.process_time()
        run(query)
        timing.cpu.append((time.process_time() - cpu) * 1000)
        timing.wall.append((time.perf_counter() - started) * 1000)
    return timing


def given_embedder(embedder: Embedder, queries: Sequence[str]) -> GivenEmbedder:
    """The queries' vectors, computed now by ``embedder``, served from memory."""
    known = dict(zip(queries, embedder.embed(list(queries)), strict=True))
    for warm in ("warm up the caches", "and the matrix"):
        known[warm] = embedder.embed([warm])[0]
    product = getattr(embedder, "int8_product", None)
    return GivenEmbedder(embedder.identity, known, product)


def report(timings: Sequence[Timing], rows: int, goal_ms: float) -> None:
    """Print p50/p95 per mode (wall and CPU) and the p95 goal's verdicts."""
    print()
    print(f"recall latency at {rows:,} rows, {len(timings[0].wall)} distinct queries")
    print(f"{'mode':<10} {'p50ms':>7} {'p95ms':>7} {'cpu p50':>8} {'cpu p95':>8}")
    by_name = {t.name: t for t in timings}
    for t in timings:
        if t.name == "lists":  # one recall: the info line below
            continue
        print(
            f"{t.name:<10} {t.pct(t.wall, 50):>7.2f} {t.pct(t.wall, 95):>7.2f} "
            f"{t.pct(t.cpu, 50):>8.2f} {t.pct(t.cpu, 95):>8.2f}"
        )
    hybrid, embed = by_name["hybrid"], by_name["embed"]
    rest = by_name["hybrid-v"]
    print()
    for t in (hybrid, by_name["hybrid-ivf"], by_name["keyword"], rest):
        p95 = t.pct(t.wall, 95)
        verdict = "PASS" if p95 <= goal_ms else "MISS"
        print(
            f"goal: {t.name} recall p95 at {rows:,} rows: {p95:.2f} ms "
            f"(cpu p95 {t.pct(t.cpu, 95):.2f} ms); goal <= {goal_ms:g} ms -> {verdict}"
        )
    lists = by_name["lists"]
    if rows >= IVF_MIN_ROWS:
        print(
            f"info: local-ivf's first recall (loading the matrix from the file, "
            f"training {list_count(rows)} lists, arranging the rows) took "
            f"{lists.wall[0]:.0f} ms ({lists.cpu[0]:.0f} ms CPU); "
            "bench_vector_index times the training alone"
        )
    else:
        print(f"info: below {IVF_MIN_ROWS:,} rows the ivf modes search exactly")
    embed_p95 = embed.pct(embed.wall, 95)
    if embed_p95 > goal_ms:
        print(
            f"note: the query embedding alone has p95 {embed_p95:.2f} ms "
            f"(p50 {embed.pct(embed.wall, 50):.2f} ms) on this machine: over the "
            f"{goal_ms:g} ms budget by itself"
        )
