"""How a vector search reads the matrix: on two threads, and screened in bfloat16.

A brute-force search over 100k x 384 float32 rows reads 150 MB per query, and
it is bound by memory bandwidth, not arithmetic. Two things cut its time:

- :class:`Scanner` runs the product in chunks that the calling thread and one
  helper thread take in turn. A thread that is not scheduled takes none, so a
  busy machine costs no more than one thread; numpy's ``einsum`` and torch's
  kernels release the GIL. (Not BLAS's own pool: OpenBLAS keeps its threads
  spinning after a call, taking the CPU from whatever runs next; on a 2-core
  machine, measured, the local model's next query embedding took twice as
  long.)
- a **screen**: the rows rounded to bfloat16 (half the bytes), multiplied by a
  bfloat16 kernel (:data:`Product`, offered by an embedder that runs on torch:
  ``bfloat16_product``). A screened score is within :data:`SCREEN_SLACK` of the
  exact cosine (rounding of both vectors and of the result, float32
  accumulation; :func:`checked_product` verifies a kernel against it before it
  is used). Every row whose screened score is within twice that of the
  window's last one is re-scored exactly (float64 over the float32 rows), and
  only those are ranked. So the screen changes no result: a row of the exact
  top window has exact score >= the window's last screened score minus the
  slack, hence screened score >= it minus twice the slack.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Final

import numpy as np
import numpy.typing as npt

Product = Callable[
    [npt.NDArray[np.int16], npt.NDArray[np.int16]], npt.NDArray[np.float32]
]
"""``matrix @ vector`` in bfloat16 (given as int16 bit patterns), accumulated in
float32; returns float32 (the kernel may round its result to bfloat16)."""

BFLOAT16_UNIT: Final = 2.0**-8
"""The unit roundoff of bfloat16 (8 significant bits, rounding to nearest)."""

SCREEN_SLACK: Final = 3.1 * BFLOAT16_UNIT + 1e-4
"""The most a screened score of two unit vectors differs from their cosine.

The row and the query each move by at most one unit roundoff of their length
when rounded (so the product by at most about twice that), the result's
rounding adds one more; ``1e-4`` covers float32 accumulation over a few
thousand dimensions and the float32 rows' own rounding.
"""

CHUNK_ROWS: Final = 8_192
"""Rows per piece of a shared product."""

SHARE_ROWS: Final = 16_384
"""From this many rows on, a product is shared with the helper thread and a
screen (when there is one) is used."""


def bfloat16_bits(values: npt.NDArray[np.float32]) -> npt.NDArray[np.int16]:
    """Round float32 values to the nearest bfloat16 (ties to even), as int16 bits."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> 16) & np.uint32(1))) >> 16
    return rounded.astype(np.uint16).view(np.int16)


def checked_product(product: Product | None, dims: int) -> Product | None:
    """Return ``product`` if it keeps :data:`SCREEN_SLACK` on a seeded sample.

    Returns None (no screen) when it is None, fails, or misses the bound.
    """
    if product is None or dims <= 0:
        return None
    rng = np.random.default_rng(dims)
    rows = rng.standard_normal((2_048, dims)).astype(np.float32)
    rows[: dims // 2 + 1, 0] = 40.0  # rows near the query's direction: large cosines
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    query = rows[0] + rng.standard_normal(dims).astype(np.float32) * 0.01
    query /= np.linalg.norm(query)
    try:
        screened = np.asarray(
            product(bfloat16_bits(rows), bfloat16_bits(query)), dtype=np.float64
        )
    except Exception:  # noqa: BLE001 - a kernel that fails is not used
        return None
    exact = rows.astype(np.float64) @ query.astype(np.float64)
    if screened.shape != exact.shape:
        return None
    return product if bool(np.all(np.abs(screened - exact) <= SCREEN_SLACK)) else None


class Scanner:
    """Runs a row-wise product in chunks on the calling thread and one helper.

    The caller takes chunks from the front, the helper from the back. The
    caller never waits for the helper: once the two meet, it computes itself
    any chunk the helper has taken but not finished (the same values written
    twice), so a helper that is not scheduled (a busy machine) costs nothing
    but the hand-over, and one that is halves the time.
    """

    def __init__(self) -> None:
        self._helper: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def run(self, rows: int, part: Callable[[int, int], object]) -> None:
        """Call ``part(start, stop)`` over ``[0, rows)``; every row is covered.

        Below :data:`SHARE_ROWS` rows, one call on this thread. A chunk may be
        computed twice (by both threads), and the helper may still be
        finishing such a chunk after this returns: ``part`` must compute its
        values apart and then store them in one copy (never accumulate in
        place), so a second store writes the same bytes.
        """
        if rows < SHARE_ROWS:
            part(0, rows)
            return
        pieces = [(s, min(rows, s + CHUNK_ROWS)) for s in range(0, rows, CHUNK_ROWS)]
        ends = [0, len(pieces)]  # the caller's next chunk; the helper's last taken
        finished = [False] * len(pieces)
        lock = self._lock

        def helper() -> None:
            while True:
                with lock:
                    if ends[1] <= ends[0]:
                        return
                    ends[1] -= 1
                    index = ends[1]
                part(*pieces[index])
                finished[index] = True

        if self._helper is None:
            self._helper = ThreadPoolExecutor(1, thread_name_prefix="memory-scan")
        other = self._helper.submit(helper)
        while True:
            with lock:
                if ends[0] >= ends[1]:
                    break
                index = ends[0]
                ends[0] += 1
            part(*pieces[index])
        other.cancel()  # not started: nothing left for it
        for index in range(ends[1], len(pieces)):
            if not finished[index]:  # taken by the helper, not done yet
                part(*pieces[index])

    def close(self) -> None:
        """Stop the helper thread (after the chunk it may be running)."""
        if self._helper is not None:
            self._helper.shutdown(wait=True)
            self._helper = None
