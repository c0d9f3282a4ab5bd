"""An in-memory matrix of the stored vectors, searched by brute-force cosine.

Loading every vector from SQLite on each recall would cost far more than the
search itself (150 MB at 100k x 384), so the backend keeps the unit-normalised
vectors in one float32 matrix, with the columns a scope filters on (agent,
session, durable flag, creation time) as parallel arrays. The backend updates it
row by row after its own writes and drops it when another connection has written
(``PRAGMA data_version``), to reload it on the next vector query.

A row's vector BLOB holds one or more windows (``dims`` float32 each, see
``embedding.windows``): each window is one matrix row, several matrix rows may
belong to one stored row, and a search ranks the stored rows by their best
window (the matrix rows scanned are widened by the most windows a row has, so
the best ``window`` stored rows are always among them).

A search masks the rows outside the scope BEFORE ranking, so disallowed rows
can neither crowd out nor outrank allowed ones. The similarities are one
matrix-vector product; with an int8 kernel, from :data:`SHARE_ROWS` rows on,
an int8 copy of the rows is read instead and re-scored exactly where it
matters (see :mod:`._vector_scan`: the results are the exact ones). With
``probes`` set, a search whose scope holds :data:`IVF_MIN_ROWS` rows or more
scores only the rows of the query's nearest inverted lists (see
:mod:`._vector_ivf`: approximate, opt-in).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final, NamedTuple

import numpy as np
import numpy.typing as npt

from turnledger.projections.memory.protocol import DURABLE_GLOBAL_CATEGORIES
from turnledger.projections.memory.sqlite._ivf import (
    IVF_MIN_ROWS,
    InvertedLists,
    arrangement,
    check_probes,
)
from turnledger.projections.memory.sqlite._scan import (
    SHARE_ROWS,
    Product,
    Scanner,
    Screen,
    checked_product,
)
from turnledger.projections.memory.sqlite._scope import Scope

Matrix = npt.NDArray[np.float32]
"""Rows of unit-normalised vectors."""

_INITIAL: Final = 1024
_NO_SESSION: Final = -1
_SUBSET_SHARE: Final = 0.5  # below this share of rows, multiply only the subset
_ARRAYS: Final = (
    "_matrix",
    "_rowids",
    "_agents",
    "_sessions",
    "_durable",
    "_created",
    "_alive",
)


class VectorRow(NamedTuple):
    """One stored row's vector and the columns a scope filters on."""

    rowid: int
    entry_id: str
    agent: str
    session: str | None
    category: str
    created_us: int
    vector: bytes


class VectorIndex:
    """The vectors of the live rows, with their scope columns.

    Args:
        dims: The vector length; rows of another length are ignored.
        product: An exact int8 kernel (checked at the first load); with one, the index
            also keeps the rows in int8 (a quarter as many bytes again, plus
            two floats a row) to screen large searches with.
        blas_pool: Whether a float32 product may be one BLAS call (off beside
            a model running in this process, whose next query OpenBLAS's
            spinning threads slowed twofold on 2 cores: numpy's loop then
            runs, shared with a helper thread). bench_memory at 100k, load
            3.7-4: 1.05x/1.27x numpy's p50 with BLAS, 1.56x/1.40x shared.
        probes: None: every search is exact. A number: searches of
            :data:`IVF_MIN_ROWS` rows in scope or more score only the rows of
            the query's ``probes`` nearest inverted lists (approximate).
    """

    _matrix: Matrix
    _screen: Screen | None
    _rowids: npt.NDArray[np.int64]
    _agents: npt.NDArray[np.int32]
    _sessions: npt.NDArray[np.int32]
    _durable: npt.NDArray[np.bool_]
    _created: npt.NDArray[np.int64]
    _alive: npt.NDArray[np.bool_]
    _ivf: InvertedLists | None
    _slots: dict[int, list[int]]
    _ids: list[str]
    _agent_codes: dict[str, int]
    _session_codes: dict[str, int]

    def __init__(
        self,
        dims: int,
        product: Product | None = None,
        *,
        blas_pool: bool = True,
        probes: int | None = None,
    ) -> None:
        check_probes(probes)
        self.dims = dims
        self.probes = probes
        self.loaded = False
        self._blas_pool = blas_pool
        # Checked at the first load (the kernel may load a model: only a
        # search needs it, not a handle that never searches).
        self._offered = product
        self._product: Product | None = None
        self._scanner = Scanner()
        self._changes = 0  # bumped by every change of rows (the scope cache's key)
        self._last_scope: (
            tuple[Scope, int, npt.NDArray[np.bool_], npt.NDArray[np.intp]] | None
        ) = None
        self._reset_arrays(_INITIAL)

    @property
    def screened(self) -> bool:
        """Whether large searches are screened in int8 (checks the kernel)."""
        self._check_kernel()
        return self._product is not None

    def _check_kernel(self) -> None:
        """Keep the offered int8 kernel if exact (once: :func:`checked_product`)."""
        if self._offered is not None:
            self._product = checked_product(self._offered, self.dims)
            self._offered = None

    def close(self) -> None:
        """Stop the helper thread (if a large search started it)."""
        self._scanner.close()

    def reset(self) -> None:
        """Drop everything; the next search needs :meth:`load` again."""
        self.loaded = False
        self._reset_arrays(_INITIAL)

    def load(self, rows: Sequence[Sequence[Any]]) -> None:
        """Replace the contents with ``rows`` (the live rows with vectors).

        Args:
            rows: ``(rowid, entry id, agent, session, category, created_us,
                vector)`` tuples; the vector is one or more windows of
                ``dims`` float32; a vector of another length is skipped.
        """
        width = 4 * self.dims
        usable = [r for r in rows if r[6] and width and len(r[6]) % width == 0]
        counts = [len(r[6]) // width for r in usable]
        n = sum(counts)
        self._check_kernel()
        self._reset_arrays(max(_INITIAL, n + n // 8))
        if n:
            raw = np.frombuffer(b"".join(r[6] for r in usable), dtype="<f4")
            self._store_normalized(raw.reshape(n, self.dims))

            def each(values: list[Any]) -> list[Any]:
                return [
                    v for v, k in zip(values, counts, strict=True) for _ in range(k)
                ]

            self._rowids[:n] = each([r[0] for r in usable])
            self._ids = each([r[1] for r in usable])
            self._agents[:n] = each(
                [self._code(self._agent_codes, r[2]) for r in usable]
            )
            self._sessions[:n] = each([self._session_code(r[3]) for r in usable])
            self._durable[:n] = each(
                [r[3] is None and r[4] in DURABLE_GLOBAL_CATEGORIES for r in usable]
            )
            self._created[:n] = each([r[5] for r in usable])
            self._alive[:n] = True
            self._slots = _group(self._rowids[:n])
            self._most_windows = max(counts)
            self._size = n
        self.loaded = True

    def _store_normalized(self, raw: npt.NDArray[np.float32]) -> None:
        n = raw.shape[0]
        # einsum: the squared norms without an n x dims temporary.
        norms = np.sqrt(np.einsum("ij,ij->i", raw, raw))
        norms[norms == 0] = np.inf  # zero vectors stay zero (cosine 0)
        np.divide(raw, norms[:, None], out=self._matrix[:n])
        if self._screen is not None:
            self._screen.store(0, self._matrix[:n])

    def put(self, row: VectorRow) -> None:
        """Insert or replace a row; a row without a usable vector is dropped.

        Its windows (re)join at the tail (in the inverted lists' tail too).
        """
        self._changes += 1
        self.drop([row.rowid])
        width = 4 * self.dims
        if not row.vector or not width or len(row.vector) % width:
            return
        windows = np.frombuffer(row.vector, dtype="<f4").reshape(-1, self.dims)
        slots = self._slots[row.rowid] = []
        self._most_windows = max(self._most_windows, windows.shape[0])
        for vector in windows:
            slot = self._append()
            slots.append(slot)
            self._rowids[slot] = row.rowid
            norm = float(np.linalg.norm(vector))
            self._matrix[slot] = vector / norm if norm > 0 else 0.0
            if self._screen is not None:
                self._screen.store(slot, self._matrix[slot : slot + 1])
            self._ids[slot] = row.entry_id
            self._agents[slot] = self._code(self._agent_codes, row.agent)
            self._sessions[slot] = self._session_code(row.session)
            self._durable[slot] = _durable(row)
            self._created[slot] = row.created_us
            self._alive[slot] = True

    def drop(self, rowids: Iterable[int]) -> None:
        """Remove rows (unknown rowids are ignored)."""
        self._changes += 1
        for rowid in rowids:
            for slot in self._slots.pop(rowid, ()):
                self._alive[slot] = False
                self._dead += 1
        if self._dead > max(_INITIAL, self._size - self._dead):
            self._compact()

    def __len__(self) -> int:
        """How many stored rows have vectors (not windows)."""
        return len(self._slots)

    def search(
        self, query: npt.ArrayLike, scope: Scope, window: int
    ) -> list[tuple[int, str, float]]:
        """Return the scope's rows most similar to ``query``.

        Args:
            query: The query vector.
            scope: The rows that may match (applied before ranking).
            window: How many rows at most.

        Returns:
            ``(rowid, entry id, cosine)`` with cosine in (0, 1], best first,
            ties by entry id; a row's cosine is its best window's.
        """
        q = np.asarray(query, dtype=np.float64)
        norm = float(np.linalg.norm(q))
        if q.shape[0] != self.dims or not norm > 0:
            return []
        candidates = self._scope_rows(scope)[1]
        if candidates.size == 0:
            return []
        unit = q / norm
        reach = window * self._most_windows  # holds the best ``window`` rows
        if self.probes is not None and candidates.size >= IVF_MIN_ROWS:
            lists = self._arranged()
            in_scope = self._scope_rows(scope)[0]  # the slots may have moved
            picked, sims = lists.probe(self._matrix, in_scope, unit, self.probes, reach)
            return self._top(picked, sims, unit, window)
        if candidates.size < _SUBSET_SHARE * self._size:
            sims = self._product_of(self._matrix[candidates], unit)
            return self._top(candidates, sims, unit, window)
        if self._screen is not None and self._size >= SHARE_ROWS:
            survivors = self._screen.survivors(candidates, self._size, unit, reach)
            return self._ranked(survivors, unit, window)
        sims = self._product_of(self._matrix[: self._size], unit)
        if candidates.size < self._size:
            sims = sims[candidates]
        return self._top(candidates, sims, unit, window)

    def similarities(
        self, query: npt.ArrayLike, rowids: Iterable[int]
    ) -> dict[int, tuple[str, float]]:
        """Return the exact cosine of ``query`` with each of these rows.

        Rows without a vector (or unknown) are left out; cosines are in [0, 1],
        a row's its best window's.
        """
        q = np.asarray(query, dtype=np.float64)
        norm = float(np.linalg.norm(q))
        if q.shape[0] != self.dims or not norm > 0:
            return {}
        found: dict[int, tuple[str, float]] = {}
        for rowid in rowids:
            slots = self._slots.get(rowid)
            if slots:
                sims = self._matrix[slots].astype(np.float64) @ q
                sim = float(sims.max()) / norm
                found[rowid] = (self._ids[slots[0]], min(1.0, max(0.0, sim)))
        return found

    def _product_of(
        self, matrix: Matrix, unit: npt.NDArray[np.float64]
    ) -> npt.NDArray[np.float32]:
        """``matrix @ unit`` in float32: one BLAS call, or shared numpy loops.

        BLAS (its own thread pool) unless ``blas_pool`` is off; then numpy's
        loop, shared with the helper thread when large.
        """
        query = unit.astype(np.float32)
        if self._blas_pool:
            found: npt.NDArray[np.float32] = np.matmul(matrix, query)
            return found
        sims = np.empty(matrix.shape[0], dtype=np.float32)

        def part(start: int, stop: int) -> None:  # the final values in one copy
            sims[start:stop] = np.einsum("ij,j->i", matrix[start:stop], query)

        self._scanner.run(matrix.shape[0], part)
        return sims

    def _top(
        self,
        candidates: npt.NDArray[np.intp],
        sims: npt.NDArray[np.float32],
        q: npt.NDArray[np.float64],
        window: int,
    ) -> list[tuple[int, str, float]]:
        reach = window * self._most_windows  # holds the best ``window`` rows
        if sims.size > reach:
            # Keep every row tied with the window's last score, so the id
            # tie-break below decides, not argpartition's arbitrary order.
            floor = np.partition(sims, sims.size - reach)[sims.size - reach]
            candidates = candidates[sims >= floor]
        return self._ranked(candidates, q, window)

    def _ranked(
        self, slots: npt.NDArray[np.intp], q: npt.NDArray[np.float64], window: int
    ) -> list[tuple[int, str, float]]:
        # Re-score in float64, as the reference does (row by row, so a row's
        # score does not depend on how many rows are re-scored); only rows
        # that can be in the window (ties with its last score kept) are listed.
        exact = np.minimum(
            np.einsum("ij,j->i", self._matrix[slots].astype(np.float64), q), 1.0
        )
        positive = exact > 0
        slots, exact = slots[positive], exact[positive]
        if self._most_windows > 1:  # a row's best window only
            order = np.lexsort((-exact, self._rowids[slots]))
            rowids = self._rowids[slots[order]]
            first = np.ones(order.size, dtype=np.bool_)
            first[1:] = rowids[1:] != rowids[:-1]
            slots, exact = slots[order[first]], exact[order[first]]
        if exact.size > window:
            floor = np.partition(exact, exact.size - window)[exact.size - window]
            kept = exact >= floor
            slots, exact = slots[kept], exact[kept]
        found = [
            (int(self._rowids[slot]), self._ids[int(slot)], float(sim))
            for slot, sim in zip(slots, exact, strict=True)
        ]
        found.sort(key=lambda hit: (-hit[2], hit[1]))
        return found[:window]

    def _arranged(self) -> InvertedLists:
        """The inverted lists, (re)trained and the rows rearranged when stale."""
        lists, live = self._ivf, self._size - self._dead
        kept, trained = None, live  # train new centroids on the live rows...
        if lists is not None:
            retrain, rearrange = lists.stale(live, self._size)
            if not rearrange:
                return lists
            if not retrain:  # ...or keep the lists' and refile the rows
                kept, trained = lists.centroids, lists.trained_rows
        alive = np.flatnonzero(self._alive[: self._size])
        centroids, owner = arrangement(self._matrix, alive, kept)
        self._compact(alive[np.argsort(owner, kind="stable")])
        counts = np.bincount(owner, minlength=centroids.shape[0] + 1).astype(np.intp)
        arranged = InvertedLists(centroids, counts, trained)
        self._ivf = arranged
        return arranged

    def _scope_rows(
        self, scope: Scope
    ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.intp]]:
        """The scope's mask over the slots in use, and its slots.

        The last scope's are kept until the rows change.
        """
        cached = self._last_scope
        if cached is not None and cached[0] == scope and cached[1] == self._changes:
            return cached[2], cached[3]
        mask = self._mask(scope)
        slots = np.flatnonzero(mask)
        self._last_scope = (scope, self._changes, mask, slots)
        return mask, slots

    def _mask(self, scope: Scope) -> npt.NDArray[np.bool_]:
        n = self._size
        wanted = [self._agent_codes[a] for a in scope.agents if a in self._agent_codes]
        allowed = np.zeros(len(self._agent_codes) + 1, dtype=np.bool_)
        allowed[wanted] = True
        mask = self._alive[:n] & allowed[self._agents[:n]]
        if scope.session is not None:
            code = self._session_codes.get(scope.session)
            own = (
                self._sessions[:n] == code
                if code is not None
                else np.zeros(n, dtype=np.bool_)
            )
            mask &= own if scope.strict else own | self._durable[:n]
        if scope.since_us is not None:
            mask &= self._created[:n] >= scope.since_us
        if scope.until_us is not None:
            mask &= self._created[:n] <= scope.until_us
        return mask

    def _reset_arrays(self, capacity: int) -> None:
        self._changes += 1
        self._size = 0
        self._dead = 0
        self._most_windows = 1
        self._slots = {}
        self._ids = []
        self._rowids = np.zeros(capacity, dtype=np.int64)
        self._agent_codes = {}
        self._session_codes = {}
        self._matrix = np.zeros((capacity, self.dims), dtype=np.float32)
        self._screen = None
        if self._product is not None:
            self._screen = Screen(self.dims, self._product, capacity)
        self._agents = np.zeros(capacity, dtype=np.int32)
        self._sessions = np.full(capacity, _NO_SESSION, dtype=np.int32)
        self._durable = np.zeros(capacity, dtype=np.bool_)
        self._created = np.zeros(capacity, dtype=np.int64)
        self._alive = np.zeros(capacity, dtype=np.bool_)
        self._ivf = None

    def _append(self) -> int:
        if self._size == self._matrix.shape[0]:
            self._grow(2 * self._matrix.shape[0])
        slot = self._size
        self._size += 1
        self._ids.append("")
        return slot

    def _grow(self, capacity: int) -> None:
        def grown(array: npt.NDArray[Any], fill: object = 0) -> npt.NDArray[Any]:
            bigger = np.full((capacity, *array.shape[1:]), fill, dtype=array.dtype)
            bigger[: array.shape[0]] = array
            return bigger

        if self._screen is not None:
            self._screen.resized(self._matrix.shape[0], capacity)
        self._matrix = grown(self._matrix)
        self._rowids = grown(self._rowids)
        self._agents = grown(self._agents)
        self._sessions = grown(self._sessions, _NO_SESSION)
        self._durable = grown(self._durable, fill=False)
        self._created = grown(self._created)
        self._alive = grown(self._alive, fill=False)

    def _compact(self, keep: npt.NDArray[np.intp] | None = None) -> None:
        """Keep the live rows (or the slots ``keep``, in that order) at the front.

        Without ``keep``, the inverted lists keep their centroids and every
        row becomes tail (rearranged by the next search that uses them).
        """
        lists = self._ivf
        if keep is None:
            keep = np.flatnonzero(self._alive[: self._size])
        ids = [self._ids[int(slot)] for slot in keep]
        capacity = max(_INITIAL, 2 * keep.size)
        arrays = {name: getattr(self, name)[keep] for name in _ARRAYS}
        agent_codes, session_codes = self._agent_codes, self._session_codes
        screen, most = self._screen, self._most_windows
        self._reset_arrays(capacity)
        self._most_windows = most
        self._agent_codes, self._session_codes = agent_codes, session_codes
        if lists is not None:
            none = np.zeros(lists.centroids.shape[0] + 1, dtype=np.intp)
            self._ivf = InvertedLists(lists.centroids, none, lists.trained_rows)
        if screen is not None:
            screen.resized(keep, capacity)
            self._screen = screen
        for name, values in arrays.items():
            getattr(self, name)[: keep.size] = values
        self._ids = ids
        self._size = int(keep.size)
        self._slots = _group(self._rowids[: self._size])

    def _session_code(self, session: str | None) -> int:
        if session is None:
            return _NO_SESSION
        return self._code(self._session_codes, session)

    @staticmethod
    def _code(codes: dict[str, int], value: str) -> int:
        return codes.setdefault(value, len(codes))


def _group(rowids: npt.NDArray[np.int64]) -> dict[int, list[int]]:
    """``{rowid: its slots}`` of the slots in use."""
    slots: dict[int, list[int]] = {}
    for slot, rowid in enumerate(rowids.tolist()):
        slots.setdefault(int(rowid), []).append(slot)
    return slots


def _durable(row: VectorRow) -> bool:
    return row.session is None and row.category in DURABLE_GLOBAL_CATEGORIES
