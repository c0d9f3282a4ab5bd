"""The inverted-list vector search (``[embedding] index = "ivf"``).

Approximate in one way only: a row of the exact top window in an unprobed list
may be missed. Everything else must hold as for the exact search: no row
outside the scope, every score the row's exact cosine, rows written since the
lists were arranged (the tail) always scored, replaced and dropped rows
followed, and with every list probed the exact search's results, ids and
scores, after puts, drops, compaction, rearrangement and retraining.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from uuid import UUID

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.contracts.memory_contract import T0
from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import MemoryStored
from turnledger.pipeline.config import ConfigError, parse_config
from turnledger.pipeline.memory.wiring import MemoryWiring
from turnledger.projections.memory.embedding import EmbeddingIdentity
from turnledger.projections.memory.sqlite import SQLiteMemory
from turnledger.projections.memory.sqlite._ivf import (
    DEFAULT_PROBES,
    IVF_MIN_ROWS,
    InvertedLists,
    list_count,
    tail_limit,
    train,
)
from turnledger.projections.memory.sqlite._scope import Scope, make_scope
from turnledger.projections.memory.sqlite._vectors import VectorIndex, VectorRow

DIMS = 12
ROWS = 2 * IVF_MIN_ROWS + 8_000  # two agents' rows, or a session's, use the lists
EVERY_LIST = 10**6  # probes beyond the list count: every list is scored


def clustered(count: int, seed: int, *, first_rowid: int = 1) -> list[VectorRow]:
    """Rows in 60 loose clusters, three agents, sessions and durable rows."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((60, DIMS))
    vectors = (
        centres[rng.integers(0, 60, count)] + rng.standard_normal((count, DIMS)) * 0.4
    )
    return [
        VectorRow(
            rowid=first_rowid + i,
            entry_id=f"e{first_rowid + i:07d}",
            agent="abc"[i % 3],
            session=None if i % 4 else f"s{i % 5}",
            category="core" if i % 7 else "conversation",
            created_us=i,
            vector=vectors[i].astype("<f4").tobytes(),
        )
        for i in range(count)
    ]


def loaded(rows: list[VectorRow], probes: int | None) -> VectorIndex:
    index = VectorIndex(DIMS, probes=probes)
    index.load([tuple(r) for r in rows])
    return index


@pytest.fixture(scope="module", name="rows")
def _rows() -> list[VectorRow]:
    return clustered(ROWS, seed=1)


@pytest.fixture(scope="module", name="exact")
def _exact(rows):
    return loaded(rows, None)


@pytest.fixture(scope="module", name="approximate")
def _approximate(rows):
    return loaded(rows, DEFAULT_PROBES)


@pytest.fixture(scope="module", name="indexes")
def _indexes(rows, exact, approximate):
    return rows, exact, approximate


def in_scope(row: VectorRow, scope: Scope) -> bool:
    if row.agent not in scope.agents:
        return False
    if scope.session is not None and row.session != scope.session:
        durable = row.session is None and row.category == "core"
        if scope.strict or not durable:
            return False
    if scope.since_us is not None and row.created_us < scope.since_us:
        return False
    return scope.until_us is None or row.created_us <= scope.until_us


def cosine(row: VectorRow, query: np.ndarray) -> float:
    vector = np.frombuffer(row.vector, dtype="<f4").astype(np.float64)
    return float(vector @ query / np.linalg.norm(vector) / np.linalg.norm(query))


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)  # the rows' created_us is their index
SCOPE = st.builds(
    make_scope,
    st.lists(st.sampled_from("abcz"), min_size=1, max_size=3, unique=True),
    session=st.none() | st.sampled_from(["s1", "s2", "s9"]),
    since=st.none() | st.sampled_from([EPOCH + timedelta(microseconds=5_000)]),
    until=st.none() | st.sampled_from([EPOCH + timedelta(microseconds=35_000)]),
    strict=st.booleans(),
)


@settings(max_examples=40, deadline=None)
@given(scope=SCOPE, seed=st.integers(0, 2**32 - 1), window=st.integers(1, 60))
def test_scopes_never_leak_and_scores_are_exact(indexes, scope, seed, window):
    rows, exact, approximate = indexes
    query = np.random.default_rng(seed).standard_normal(DIMS)
    by_id = {r.entry_id: r for r in rows}
    hits = approximate.search(query, scope, window)
    allowed = sum(in_scope(r, scope) for r in rows)
    assert len(hits) <= window
    for rowid, entry_id, score in hits:
        row = by_id[entry_id]
        assert row.rowid == rowid
        assert in_scope(row, scope), (entry_id, scope)
        assert score == pytest.approx(cosine(row, query), abs=1e-6)
        assert score > 0
    assert [(-s, e) for _, e, s in hits] == sorted((-s, e) for _, e, s in hits)
    truth = exact.search(query, scope, window)
    if len(truth) == window:  # what beats the exact window's last is in it
        cutoff = truth[-1][2]
        assert {e for _, e, sc in hits if sc > cutoff} <= {e for _, e, _ in truth}
    if allowed >= IVF_MIN_ROWS and truth:
        assert hits  # probes double until the scope fills the window


@pytest.mark.parametrize(
    "scope",
    [
        make_scope(["a", "b", "c"]),
        make_scope(["a", "b"]),
        make_scope(["a", "c"], session="s1"),
    ],
)
def test_every_list_probed_is_the_exact_search(rows, exact, scope):
    full = loaded(rows, EVERY_LIST)
    rng = np.random.default_rng(4)
    for _ in range(20):
        query = rng.standard_normal(DIMS)
        for window in (1, 10, 50):
            assert full.search(query, scope, window) == exact.search(
                query, scope, window
            )


def test_the_nearest_lists_find_most_of_the_exact_top_ten(rows, exact, approximate):
    """On clustered rows the default probes agree with the exact search."""
    rng = np.random.default_rng(9)
    scope = make_scope(["a", "b", "c"])
    agreement = []
    for _ in range(100):
        query = rng.standard_normal(DIMS)
        truth = {e for _, e, _ in exact.search(query, scope, 10)}
        found = {e for _, e, _ in approximate.search(query, scope, 10)}
        agreement.append(len(truth & found) / 10)
    assert np.mean(agreement) >= 0.9
    one = VectorIndex(DIMS, probes=1)
    one.load([tuple(r) for r in rows])
    single = np.mean(
        [
            len(
                {e for _, e, _ in exact.search(q, scope, 10)}
                & {e for _, e, _ in one.search(q, scope, 10)}
            )
            / 10
            for q in np.random.default_rng(9).standard_normal((100, DIMS))
        ]
    )
    assert single < np.mean(agreement)  # fewer lists, fewer of the nearest


def test_a_small_scope_is_searched_exactly(rows, exact, approximate):
    scope = make_scope(["a"], session="s2", strict=True)  # about 500 rows
    assert sum(in_scope(r, scope) for r in rows) < IVF_MIN_ROWS
    one = loaded(rows, 1)
    query = np.random.default_rng(3).standard_normal(DIMS)
    assert one.search(query, scope, 30) == exact.search(query, scope, 30)


def test_writes_after_the_lists_are_followed():
    rows = clustered(ROWS, seed=2)
    exact, approximate = loaded(rows, None), loaded(rows, 2)
    full = loaded(rows, EVERY_LIST)
    scope = make_scope(["a", "b", "c"])
    probe = np.random.default_rng(5).standard_normal(DIMS)
    for index in (exact, approximate, full):
        index.search(probe, scope, 10)  # trains and arranges the lists
    far = np.zeros(DIMS)
    far[0] = 1.0
    newcomer = VectorRow(
        10**7, "new", "a", None, "core", 1, far.astype("<f4").tobytes()
    )
    moved = rows[5_000]._replace(vector=(-far).astype("<f4").tobytes())
    for index in (exact, approximate, full):
        index.put(newcomer)  # the tail: always scored
        index.put(moved)  # replaced: out of its old list, into the tail
        index.drop([r.rowid for r in rows[:3_000]])  # dead rows: compaction
    top = approximate.search(far, scope, 1)
    assert top[0][1] == "new"
    assert approximate.search(-far, scope, 1)[0][1] == moved.entry_id
    hits = approximate.search(probe, scope, 200)
    assert not {e for _, e, _ in hits} & {r.entry_id for r in rows[:3_000]}
    rng = np.random.default_rng(6)
    for _ in range(10):
        query = rng.standard_normal(DIMS)
        assert full.search(query, scope, 25) == exact.search(query, scope, 25)


def put_and_compare(
    exact: VectorIndex, full: VectorIndex, rows: list[VectorRow], query: np.ndarray
) -> InvertedLists:
    """Put ``rows`` in both; the same results; the lists of ``full`` after."""
    for index in (exact, full):
        for row in rows:
            index.put(row)
    scope = make_scope(["a", "b", "c"])
    assert full.search(query, scope, 30) == exact.search(query, scope, 30)
    lists = full._ivf
    assert lists is not None
    return lists


def test_the_tail_is_rearranged_and_doubling_retrains():
    rows = clustered(ROWS, seed=3)
    exact, full = loaded(rows, None), loaded(rows, EVERY_LIST)
    scope = make_scope(["a", "b", "c"])
    query = np.random.default_rng(8).standard_normal(DIMS)
    full.search(query, scope, 5)
    lists = full._ivf
    assert lists is not None
    assert lists.centroids.shape[0] == list_count(ROWS)
    extra = clustered(tail_limit(ROWS) + 1, seed=4, first_rowid=10**6)
    rearranged = put_and_compare(exact, full, extra, query)
    assert rearranged.arranged == len(full)  # the tail was filed into lists
    assert rearranged.centroids is lists.centroids  # not retrained
    more = clustered(ROWS + 5_000, seed=5, first_rowid=2 * 10**6)
    retrained = put_and_compare(exact, full, more, query)
    assert retrained.centroids.shape[0] == list_count(len(full))


def test_training_is_deterministic_with_unit_centroids():
    rows = np.stack(
        [np.frombuffer(r.vector, dtype="<f4") for r in clustered(5_000, seed=7)]
    )
    rows = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    every = np.arange(rows.shape[0])
    first, second = train(rows, every), train(rows, every)
    assert np.array_equal(first, second)
    assert first.shape == (list_count(5_000), DIMS)
    assert np.allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-5)


def test_probes_must_be_positive():
    with pytest.raises(ValueError, match="probes >= 1"):
        VectorIndex(DIMS, probes=0)
    with pytest.raises(ValueError, match="vector_probes >= 1"):
        SQLiteMemory(":memory:", vector_probes=0)


class TableEmbedder:
    """Vectors by text from a table (the memory path's own embedder calls)."""

    def __init__(self, table: dict[str, list[float]]) -> None:
        self._table = table

    @property
    def identity(self) -> EmbeddingIdentity:
        return EmbeddingIdentity("table", "table-v1", DIMS)

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [self._table[t] for t in texts]


def test_a_sqlite_memory_with_probes_recalls_through_the_lists(tmp_path: Path):
    rows = clustered(IVF_MIN_ROWS + 2_000, seed=11)
    table = {
        f"note {r.entry_id}": np.frombuffer(r.vector, dtype="<f4").tolist()
        for r in rows
    }
    path = tmp_path / "memory.db"
    events = [
        Recorded(
            stream_id=UUID(int=0x1F),
            version=i + 1,
            position=i + 1,
            recorded_at=T0,
            event=MemoryStored(
                agent="a",
                key=r.entry_id,
                content=f"note {r.entry_id}",
                category="core",
                entry_id=r.entry_id,
            ),
        )
        for i, r in enumerate(rows)
    ]
    embedder = TableEmbedder(table)
    with SQLiteMemory(path, embedder=embedder, cache_size=0) as memory:
        for start in range(0, len(events), 5_000):
            page = events[start : start + 5_000]
            memory.apply(page, page[-1].position)
    query = rows[7].vector
    table["which note"] = np.frombuffer(query, dtype="<f4").tolist()
    with (
        SQLiteMemory(path, embedder=embedder, search_mode="embedding") as exact,
        SQLiteMemory(
            path, embedder=embedder, search_mode="embedding", vector_probes=8
        ) as approximate,
    ):
        want = exact.recall("which note", agents=["a"], limit=5)
        got = approximate.recall("which note", agents=["a"], limit=5)
    assert got[0].key == rows[7].entry_id
    assert got[0].key == want[0].key


def test_the_config_turns_the_lists_on_and_rejects_what_would_be_ignored(
    tmp_path: Path,
):
    base = '[embedding]\nprovider = "openai-compatible"\n'
    on = parse_config(base + 'index = "ivf"\nprobes = 4\n')
    assert (on.embedding.index, on.embedding.probes) == ("ivf", 4)
    default = parse_config(base + 'index = "ivf"\n')
    assert default.embedding.probes is None
    with pytest.raises(
        ConfigError, match=r'embedding\.probes: expected only with index = "ivf"'
    ):
        parse_config(base + "probes = 4\n")
    with pytest.raises(ConfigError, match=r"embedding\.probes: expected 1 to"):
        parse_config(base + 'index = "ivf"\nprobes = 0\n')
    with pytest.raises(
        ConfigError, match=r'embedding\.index: expected "exact" with provider'
    ):
        parse_config('[embedding]\nprovider = "none"\nindex = "ivf"\n')
    assert parse_config('[embedding]\nindex = "ivf"\n').embedding.index == "ivf"
    with pytest.raises(ConfigError, match="index"):
        parse_config(base + 'index = "hnsw"\n')


@pytest.mark.parametrize(
    ("setting", "probes"), [("probes = 4\n", 4), ("", DEFAULT_PROBES), (None, None)]
)
def test_the_configured_probes_reach_the_sqlite_memory(
    tmp_path: Path, setting: str | None, probes: int | None
):
    text = '[embedding]\nprovider = "openai-compatible"\n'
    if setting is not None:  # None: index left at "exact"
        text += f'index = "ivf"\n{setting}'
    ledger = str(tmp_path / "ledger.db")
    wiring = MemoryWiring(parse_config(text), ledger_url=ledger)
    try:
        backend = wiring.served("a")[1]
        assert isinstance(backend, SQLiteMemory)
        assert backend._embedding.vectors.probes == probes
    finally:
        wiring.close()
