"""The vector search's scan: shared with a helper thread, screened in int8.

Neither may change a result: the screened index must return exactly what the
plain float32 index returns (ids and scores), whatever the scope, after puts,
drops and compaction; the shared product must cover every row once stored,
and the caller must not wait for a helper that is stuck.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import pytest

from tests.contracts.memory_contract import T0
from turnledger.projections.memory.embedding import EmbeddingIdentity
from turnledger.projections.memory.protocol import NewMemory
from turnledger.projections.memory.sqlite import SQLiteMemory
from turnledger.projections.memory.sqlite._scan import (
    PIECES,
    SHARE_ROWS,
    Scanner,
    Screen,
    checked_product,
    quantize,
)
from turnledger.projections.memory.sqlite._scope import make_scope
from turnledger.projections.memory.sqlite._vectors import VectorIndex, VectorRow

DIMS = 16


def int8_product(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """An exact int8 kernel in numpy."""
    found: np.ndarray = matrix.astype(np.int64) @ vector.astype(np.int64)
    return found


def test_quantizing_keeps_the_error_it_reports():
    rng = np.random.default_rng(2)
    rows = rng.standard_normal((50, DIMS)).astype(np.float32)
    rows[3] = 0.0
    codes, scales, errors = quantize(rows)
    assert codes.dtype == np.int8
    assert np.abs(codes).max() == 127
    rebuilt = codes * scales[:, None]
    assert np.allclose(np.linalg.norm(rows - rebuilt, axis=1), errors)
    assert errors[3] == 0.0
    assert scales[3] == 0.0


def test_a_screen_stores_in_pieces_what_quantize_gives_whole():
    rows = np.random.default_rng(4).standard_normal((2_500, DIMS)).astype(np.float32)
    screen = Screen(DIMS, int8_product, capacity=3_000)
    screen.store(7, rows)  # three pieces, from slot 7 on
    codes, scales, errors = quantize(rows)
    assert np.array_equal(screen.codes[7:2_507], codes)
    assert np.array_equal(screen.scales[7:2_507], scales)
    assert np.array_equal(screen.errors[7:2_507], errors)
    assert not screen.codes[:7].any()
    assert not screen.codes[2_507:].any()


def test_a_kernel_is_used_only_if_it_is_exact():
    assert checked_product(int8_product, DIMS) is int8_product
    assert checked_product(None, DIMS) is None

    def rounding(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
        return int8_product(matrix, vector).astype(np.float32).astype(np.float16)

    def wrapping(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
        return matrix.astype(np.int16) @ vector.astype(np.int16)  # overflows

    def failing(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
        raise RuntimeError(matrix.shape, vector.shape)

    assert checked_product(rounding, DIMS) is None
    assert checked_product(wrapping, 384) is None
    assert checked_product(failing, DIMS) is None


def rows_with_near_duplicates(count: int, seed: int) -> list[VectorRow]:
    """Vectors in tight clusters (many near-ties), two agents, sessions, times."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((40, DIMS))
    picks = rng.integers(0, 40, count)
    vectors = centres[picks] + rng.standard_normal((count, DIMS)) * 0.01
    vectors[::97] = vectors[0]  # exact duplicates too: ties broken by id
    return [
        VectorRow(
            rowid=i + 1,
            entry_id=f"e{i:06d}",
            agent="a" if i % 5 else "b",
            session=None if i % 3 else f"s{i % 4}",
            category="core",
            created_us=i,
            vector=vectors[i].astype("<f4").tobytes(),
        )
        for i in range(count)
    ]


@pytest.fixture(scope="module", name="indexes")
def _indexes():
    rows = rows_with_near_duplicates(SHARE_ROWS + 3 * SHARE_ROWS // PIECES, seed=3)
    plain, screened = VectorIndex(DIMS), VectorIndex(DIMS, int8_product)
    shared = VectorIndex(DIMS, blas_pool=False)  # numpy's loop, two threads
    assert screened.screened
    assert not plain.screened
    for index in (plain, screened, shared):
        index.load([tuple(r) for r in rows])
    yield plain, screened, shared
    for index in (plain, screened, shared):
        index.close()


SCOPES = [
    make_scope(["a", "b"]),
    make_scope(["a"]),
    make_scope(["a", "b"], session="s1"),
    make_scope(["b"], session="s2"),
]


@pytest.mark.parametrize("scope", SCOPES)
def test_the_screen_and_the_shared_loop_change_no_result(indexes, scope):
    plain, screened, shared = indexes
    rng = np.random.default_rng(11)
    for _ in range(25):
        query = rng.standard_normal(DIMS)
        for window in (1, 10, 40):
            expected = plain.search(query, scope, window)
            assert screened.search(query, scope, window) == expected
            assert shared.search(query, scope, window) == expected


def test_the_screen_follows_puts_drops_and_compaction():
    rows = rows_with_near_duplicates(SHARE_ROWS + 100, seed=5)
    plain, screened = VectorIndex(DIMS), VectorIndex(DIMS, int8_product)
    rng = np.random.default_rng(6)
    try:
        for index in (plain, screened):
            index.load([tuple(r) for r in rows])
            index.drop(range(1, 3_000))  # over the dead-row limit: compacted
            for row in rows[5_000:5_050]:  # replaced in place
                index.put(row._replace(vector=rows[0].vector))
            for i in range(200):  # appended
                extra = rows[i]._replace(rowid=10**6 + i, entry_id=f"x{i}")
                index.put(extra)
        assert len(plain) == len(screened)
        for _ in range(20):
            query = rng.standard_normal(DIMS)
            assert screened.search(query, SCOPES[0], 20) == plain.search(
                query, SCOPES[0], 20
            )
    finally:
        plain.close()
        screened.close()


@pytest.mark.parametrize(
    "rows", [0, 1, SHARE_ROWS - 1, SHARE_ROWS, SHARE_ROWS * PIECES + 7]
)
def test_a_shared_product_covers_every_row(rows):
    scanner = Scanner()
    seen = np.zeros(rows, dtype=np.int64)
    lock = threading.Lock()

    def part(start: int, stop: int) -> None:
        with lock:
            seen[start:stop] += 1

    try:
        scanner.run(rows, part)
    finally:
        scanner.close()
    assert np.all(seen >= 1)  # a chunk may be computed twice, never skipped


def test_the_caller_does_not_wait_for_a_stuck_helper():
    scanner = Scanner()
    rows = 4 * SHARE_ROWS
    release = threading.Event()
    done = np.zeros(rows, dtype=np.bool_)
    caller = threading.get_ident()

    def part(start: int, stop: int) -> None:
        if threading.get_ident() != caller:
            release.wait()  # the helper is stuck until the caller returned
        done[start:stop] = True

    scanner.run(rows, part)
    assert done.all()  # the caller computed the helper's chunk itself
    release.set()
    scanner.close()


class NotingEmbedder:
    """Vectors from a text's letters; notes the thread of each call."""

    def __init__(self) -> None:
        self.threads: list[str] = []

    @property
    def identity(self) -> EmbeddingIdentity:
        return EmbeddingIdentity("test", "noting", 4)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.threads.append(threading.current_thread().name)
        return [[1.0 + t.count(c) for c in "abno"] for t in texts]


def test_embedding_mode_embeds_the_query_on_the_callers_thread():
    embedder = NotingEmbedder()
    memory = SQLiteMemory(
        ":memory:", embedder=embedder, cache_size=0, search_mode="embedding"
    )
    for key, text in (("k0", "banana boat"), ("k1", "other note")):
        memory.store(NewMemory(agent="a", key=key, content=text, entry_id=key, at=T0))
    found = memory.recall("banana", agents=["a"], limit=2)
    assert embedder.threads[-1] == threading.current_thread().name  # no hand-over
    assert found[0].key == "k0"
    memory.close()
