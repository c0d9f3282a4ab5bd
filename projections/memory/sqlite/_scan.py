"""How a vector search reads the matrix: on two threads, and screened in int8.

A brute-force search over 100k x 384 float32 rows reads 150 MB per query, and
it is bound by memory bandwidth, not arithmetic. Two things cut its time:

- :class:`Scanner` runs the float32 product (no screen) in a few pieces that
  the calling thread and one helper thread take from either end. The caller
  never waits for a piece the helper has not started, and recomputes one it
  has not finished; numpy's ``einsum`` releases the GIL. (Not BLAS's own pool:
  OpenBLAS keeps its threads spinning after a call, taking the CPU from
  whatever runs next; on a 2-core machine, measured, the local model's next
  query embedding took twice as long.)
- a :class:`Screen`: each row quantised to int8 with its own scale (a quarter
  of the bytes), multiplied by an exact integer kernel (:data:`Product`,
  offered by an embedder that runs on torch: ``int8_product``;
  :func:`checked_product` verifies it is exact before it is used). Each row
  also keeps the length of its quantisation error, so a screened score comes
  with a bound: ``|cosine - screened| <= |q'| * r_row + r_query`` (q' the
  quantised query, r the error lengths; Cauchy-Schwarz). Every row whose upper
  bound reaches the window's highest lower bounds is re-scored exactly
  (float64 over the float32 rows), and only those are ranked. So the screen
  changes no result: at least ``window`` rows have exact scores >= that lower
  bound ``L``, so every row of the exact top window has exact score, hence
  upper bound, >= ``L``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

import numpy as np
import numpy.typing as npt

Product = Callable[[npt.NDArray[np.int8], npt.NDArray[np.int8]], npt.ArrayLike]
"""``matrix @ vector`` of int8 rows and an int8 vector, exact (integers)."""

PIECES: Final = 4
"""How many pieces a shared product is cut into (few: each is a GIL hand-over)."""

SHARE_ROWS: Final = 16_384
"""From this many rows on, a product is shared with the helper thread and a
screen (when there is one) is used."""

_LEVELS: Final = 127
_STORE_ROWS: Final = 1_024  # rows quantised at a time (temporaries in cache)
_MARGIN: Final = 1e-5  # float32 rounding of the bound's own arithmetic and rows


def quantize(
    rows: npt.NDArray[np.floating[Any]],
) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """Return each row's int8 codes, scale and error length ``|row - scale*codes|``.

    Computed in float64, stored in float32 (the bound's margin covers the
    rounding). A zero row gets scale 0, codes 0 and error 0.
    """
    values = np.atleast_2d(rows).astype(np.float64)
    peak = np.abs(values).max(axis=1)
    scales = peak / _LEVELS
    safe = np.where(scales > 0, scales, 1.0)
    codes = np.clip(np.rint(values / safe[:, None]), -_LEVELS, _LEVELS)
    error = np.linalg.norm(values - codes * scales[:, None], axis=1)
    return codes.astype(np.int8), scales.astype(np.float32), error.astype(np.float32)


def checked_product(product: Product | None, dims: int) -> Product | None:
    """Return ``product`` if it is exact on a seeded sample (with extremes).

    Returns None (no screen) when it is None, fails, or is not exact.
    """
    if product is None or dims <= 0:
        return None
    rng = np.random.default_rng(dims)
    rows = rng.integers(-_LEVELS, _LEVELS + 1, (257, dims)).astype(np.int8)
    rows[0], rows[1] = _LEVELS, -_LEVELS
    vector = rng.integers(-_LEVELS, _LEVELS + 1, dims).astype(np.int8)
    vector[0] = _LEVELS
    try:
        found = np.asarray(product(rows, vector))
    except Exception:  # noqa: BLE001 - a kernel that fails is not used
        return None
    exact = rows.astype(np.int64) @ vector.astype(np.int64)
    ok = found.shape == exact.shape and bool(np.array_equal(found, exact))
    return product if ok else None


class Screen:
    """The rows in int8, their scales and error lengths, beside a float32 matrix.

    Args:
        dims: The vector length.
        product: The exact int8 kernel (see :func:`checked_product`).
        capacity: Rows to allocate.
    """

    def __init__(self, dims: int, product: Product, capacity: int) -> None:
        self._product = product
        self.codes = np.zeros((capacity, dims), dtype=np.int8)
        self.scales = np.zeros(capacity, dtype=np.float32)
        self.errors = np.zeros(capacity, dtype=np.float32)

    def store(self, start: int, rows: npt.NDArray[np.float32]) -> None:
        """Quantise ``rows`` into slots ``start`` onwards.

        In pieces of :data:`_STORE_ROWS` rows (each row is quantised on its
        own, so the result is the same): the float64 temporaries of a whole
        matrix at once (100k x 384: several of 300 MB) took 3.9 s of a 4.7 s
        first load; in pieces that stay in cache, the load took 1.0 s.
        """
        for offset in range(0, rows.shape[0], _STORE_ROWS):
            piece = rows[offset : offset + _STORE_ROWS]
            first = start + offset
            stop = first + piece.shape[0]
            codes, scales, errors = quantize(piece)
            self.codes[first:stop], self.scales[first:stop] = codes, scales
            self.errors[first:stop] = errors

    def resized(self, keep: npt.NDArray[np.intp] | int, capacity: int) -> None:
        """Keep the rows ``keep`` (slots, or the first N), in ``capacity`` slots."""
        old = (self.codes, self.scales, self.errors)
        self.codes = np.zeros((capacity, old[0].shape[1]), dtype=np.int8)
        self.scales = np.zeros(capacity, dtype=np.float32)
        self.errors = np.zeros(capacity, dtype=np.float32)
        picked = [a[:keep] if isinstance(keep, int) else a[keep] for a in old]
        n = picked[1].shape[0]
        self.codes[:n], self.scales[:n], self.errors[:n] = picked

    def survivors(
        self,
        slots: npt.NDArray[np.intp],
        rows: int,
        unit: npt.NDArray[np.float64],
        window: int,
    ) -> npt.NDArray[np.intp]:
        """The slots among ``slots`` that may be in the exact top ``window``.

        One kernel call over every row in use, on this thread: shared with
        the helper thread (in 2 or 4 pieces) the whole hybrid recall was
        slower on a busy 2-core machine (p50 31-34 ms vs 25 ms, interleaved),
        the hand-overs costing more than the second thread's bandwidth.

        Args:
            slots: The rows in scope (sorted slot numbers).
            rows: How many slots are in use (the product covers them all).
            unit: The unit query (float64).
            window: How many rows the search keeps.
        """
        if slots.size <= window:
            return slots
        codes, scale, error = quantize(unit)
        # In float32: exact up to 1,040 dimensions (sums below 2**24), and
        # within the margin beyond.
        dots = np.asarray(self._product(self.codes[:rows], codes[0]), np.float32)
        whole = slots.size == rows  # every row in scope: no gathering
        scales = self.scales[:rows] if whole else self.scales[slots]
        errors = self.errors[:rows] if whole else self.errors[slots]
        screened = (dots if whole else dots[slots]) * (scales * scale[0])
        length = np.float32(np.linalg.norm(codes[0] * np.float64(scale[0])))
        bound = errors * length + np.float32(float(error[0]) + _MARGIN)
        lower = screened - bound
        floor = np.partition(lower, slots.size - window)[slots.size - window]
        kept: npt.NDArray[np.intp] = slots[screened + bound >= floor]
        return kept


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
        step = -(-rows // PIECES)
        pieces = [(s, min(rows, s + step)) for s in range(0, rows, step)]
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
