"""Inverted lists over the vector matrix: an approximate search (opt-in).

The reference scans every vector ([gap]: no ANN index). An exact scan of 100k
rows reads the whole matrix (150 MB at 384 dims), bound by memory bandwidth.
With ``[embedding] index = "ivf"`` the rows are partitioned into about
``sqrt(rows)`` lists by spherical k-means (each row belongs to the list of its
nearest centroid), and the matrix is kept in list order, so each list is one
contiguous block: a query ranks the centroids and multiplies only the blocks
of its ``probes`` nearest lists, reading a few percent of the matrix, without
copying it. Two blocks are always scored: the rows written since the last
arrangement (the tail), and the outliers, the 1/32 of the rows least similar
to their own centroid. A centroid says little about a row far from it: in a
store of many near-repeated rows and a few unique facts (bench_recall_quality
at 100k rows), k-means spends its lists on the repeated rows, and without the
outlier block the lists (16 probes) found 72% of the evidence where the exact
search found 91%. The price is recall all the same: a row of the exact top window
that sits in an unprobed list is missed.

Scopes are not approximated: the probed rows outside the scope are dropped
before ranking, and when fewer than the window remain the probes double until
they reach it or every list is probed (a scope smaller than
:data:`IVF_MIN_ROWS` is searched exactly).

Training is seeded by the number of rows, so the same rows give the same
lists. It runs on the first search that needs it, again once the live rows
have doubled or halved since, and after every reload of the matrix (another
connection wrote); the rows are rearranged in list order then and once the
tail reaches :func:`tail_limit` rows (a dead-row compaction makes every row
tail). bench_vector_index times the training and arrangement.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt

IVF_MIN_ROWS: Final = 16_384
"""Below this many rows in scope a search is exact (a full scan is cheap)."""

DEFAULT_PROBES: Final = 32
"""Lists a query scores by default: a tenth of the lists at 100k rows.

Chosen on bench_vector_index.py (100k docstring sentences, 2026-12-03): 16
probes found 85-86% of the exact top 10, 32 found 91-93% in about half the
exact search's time with the transformer, 64 found 97% in 0.84-0.99x of it.
A fixed number, not a share of the lists: on the first 25k and 50k of those
sentences 32 probes found 93% (0.77x and 0.63x the exact time), a tenth of
the lists (16 and 22 probes) 86% and 90%.
"""

_SAMPLE_PER_LIST: Final = 64  # k-means trains on at most this many rows a list
_ITERATIONS: Final = 8
_CHUNK: Final = 8_192  # rows assigned per matrix product (bounds the temporary)
_TAIL_SHARE: Final = 32  # rearrange once the tail holds 1/32 of the rows...
_TAIL_MIN: Final = 2_048  # ...and at least this many
_OUTLIER_SHARE: Final = 32  # the 1/32 of rows least like their centroid

Matrix = npt.NDArray[np.float32]
Slots = npt.NDArray[np.intp]


def check_probes(probes: int | None, name: str = "probes") -> None:
    """Refuse a probe count below 1 (None: exact search, allowed).

    Raises:
        ValueError: Naming ``name`` and the value found.
    """
    if probes is not None and probes < 1:
        msg = f"Expected {name} >= 1 (or None: exact), found {probes}"
        raise ValueError(msg)


def list_count(rows: int) -> int:
    """How many lists ``rows`` rows are partitioned into (about sqrt, >= 1)."""
    return max(1, round(float(np.sqrt(rows))))


def tail_limit(rows: int) -> int:
    """How many rows the unarranged tail may hold before a rearrangement."""
    return max(_TAIL_MIN, rows // _TAIL_SHARE)


def train(matrix: Matrix, alive: Slots) -> Matrix:
    """Return unit centroids of the rows ``alive`` (unit) by spherical k-means.

    Seeded by the row count: deterministic for the same rows in the same order.
    A list left empty by an iteration is re-seeded with a sampled row.
    """
    n = alive.size
    k = min(n, list_count(n))
    rng = np.random.default_rng(n)
    size = min(n, k * _SAMPLE_PER_LIST)
    sample = matrix[alive[np.sort(rng.choice(n, size, replace=False))]]
    every = np.arange(size)
    centroids: Matrix = sample[rng.choice(size, k, replace=False)].copy()
    for _ in range(_ITERATIONS):
        owner = assign(sample, every, centroids)[0]
        members = np.zeros((k, size), dtype=np.float32)
        members[owner, every] = 1.0
        sums = members @ sample  # each list's sum, one matrix product
        empty = np.flatnonzero(np.bincount(owner, minlength=k) == 0)
        sums[empty] = sample[rng.choice(size, empty.size, replace=False)]
        norms = np.linalg.norm(sums, axis=1)
        norms[norms == 0] = 1.0
        centroids = (sums / norms[:, None]).astype(np.float32)
    return centroids


def arrangement(
    matrix: Matrix, alive: Slots, centroids: Matrix | None
) -> tuple[Matrix, npt.NDArray[np.int32]]:
    """Centroids (trained when None) and each live row's block (``k``: outliers).

    Args:
        matrix: The rows (unit), slots as the index keeps them.
        alive: The live slots, ascending.
        centroids: The current lists' centroids, or None to train new ones.
    """
    if centroids is None:
        centroids = train(matrix, alive)
    owner, fit = assign(matrix, alive, centroids)
    outliers = alive.size // _OUTLIER_SHARE
    if outliers:
        cut = np.argpartition(fit, outliers - 1)[:outliers]
        owner[cut] = centroids.shape[0]
    return centroids, owner


def assign(
    matrix: Matrix, slots: Slots, centroids: Matrix
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.float32]]:
    """Each row's nearest centroid (highest dot product), and that product."""
    owner = np.empty(slots.size, dtype=np.int32)
    fit = np.empty(slots.size, dtype=np.float32)
    for start in range(0, slots.size, _CHUNK):
        block = matrix[slots[start : start + _CHUNK]] @ centroids.T
        best = np.argmax(block, axis=1)
        stop = start + block.shape[0]
        owner[start:stop] = best
        fit[start:stop] = block[np.arange(block.shape[0]), best]
    return owner, fit


class InvertedLists:
    """Centroids and the list blocks of a list-ordered matrix.

    Args:
        centroids: The ``k`` lists' unit centroids.
        counts: How many rows each block holds (``k + 1``: the lists, then
            the outliers); block ``i``'s rows are the slots
            ``[starts[i], starts[i + 1])``, the arranged part is
            ``[0, sum(counts))`` and later slots are the tail.
        trained_rows: The live rows the centroids were trained on.
    """

    def __init__(
        self, centroids: Matrix, counts: npt.NDArray[np.intp], trained_rows: int
    ) -> None:
        self.centroids = centroids
        self.starts = np.concatenate(([0], np.cumsum(counts))).astype(np.intp)
        self.arranged = int(self.starts[-1])
        self.trained_rows = trained_rows

    def stale(self, live: int, size: int) -> tuple[bool, bool]:
        """``(retrain, rearrange)``: rows doubled/halved; the tail is full."""
        retrain = not self.trained_rows // 2 <= live <= 2 * self.trained_rows
        return retrain, retrain or size - self.arranged > tail_limit(live)

    def probe(
        self,
        matrix: Matrix,
        in_scope: npt.NDArray[np.bool_],
        unit: npt.NDArray[np.float64],
        probes: int,
        window: int,
    ) -> tuple[Slots, npt.NDArray[np.float32]]:
        """The in-scope slots of the nearest lists and the tail, with their products.

        Args:
            matrix: The list-ordered rows, ``in_scope.size`` of them in use.
            in_scope: Which slots may match (the scope, live rows only).
            unit: The unit query.
            probes: How many lists to score at first.
            window: How many rows the search keeps; the probes double until at
                least this many in-scope rows are scored or every list is.
        """
        query = unit.astype(np.float32)
        k = self.centroids.shape[0]
        order = np.argsort(-(self.centroids @ query), kind="stable")
        blocks = [(self.starts[k], in_scope.size)]  # outliers and tail: always
        slots: list[Slots] = []
        sims: list[npt.NDArray[np.float32]] = []
        done, take = 0, min(k, probes)
        while True:
            blocks += [(self.starts[i], self.starts[i + 1]) for i in order[done:take]]
            for start, stop in blocks:
                if stop > start:
                    kept = np.flatnonzero(in_scope[start:stop])
                    if kept.size:
                        part = np.einsum("ij,j->i", matrix[start:stop], query)
                        slots.append(kept + start)
                        sims.append(part[kept])
            blocks, done = [], take
            if sum(s.size for s in slots) >= window or take >= k:
                break
            take = min(k, 2 * take)
        if not slots:
            return np.empty(0, dtype=np.intp), np.empty(0, dtype=np.float32)
        return np.concatenate(slots), np.concatenate(sims)
