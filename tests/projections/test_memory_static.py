"""The static model shipped in the package: its table, its checks, its wiring.

The table is read from the package's data folder (numpy only); one test
distils it again from the packaged all-MiniLM-L6-v2 (about 30 s, where torch
and sentence-transformers are installed) and compares.
"""

from __future__ import annotations

import itertools
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.contracts.memory_contract import T0
from turnledger.ledger.store import open_store
from turnledger.pipeline.config import ConfigError, parse_config
from turnledger.pipeline.memory import MemoryService
from turnledger.projections.memory.embedding._static_distill import (
    distill,
    project,
    sif_weights,
)
from turnledger.projections.memory.embedding.static import (
    DATA,
    MAX_STATIC_DIMS,
    STATIC_MODEL,
    TABLE_DIMS,
    TABLE_FILE,
    TABLE_ROWS,
    VOCAB_FILE,
    StaticEmbedder,
    StaticTableError,
    load_table,
)
from turnledger.projections.memory.embedding.windows import (
    whole_text_vector,
    window_texts,
)
from turnledger.projections.memory.protocol import NewMemory
from turnledger.projections.memory.sqlite import SQLiteMemory


@pytest.fixture(scope="module")
def static() -> StaticEmbedder:
    return StaticEmbedder()


def test_the_shipped_table_loads_with_its_identity(static):
    assert load_table().shape == (TABLE_ROWS, TABLE_DIMS)
    assert static.identity == ("local", STATIC_MODEL, 128)
    texts = ["which text editor do I program in", "Helix is the editor I use"]
    assert StaticEmbedder().embed(texts) == static.embed(texts)


def test_fewer_dims_are_the_first_columns_of_the_table(static):
    texts = ["my dog Biscuit", "the budget review"]
    full = np.array(static.embed(texts))
    short = np.array(StaticEmbedder(16).embed(texts))
    expected = full[:, :16] / np.linalg.norm(full[:, :16], axis=1, keepdims=True)
    assert np.allclose(short, expected)


def test_the_shipped_table_is_todays_distillation(static):
    library = pytest.importorskip("sentence_transformers")
    local = pytest.importorskip("turnledger.projections.memory.embedding.local")
    fresh = distill(local.packaged_model_path(), TABLE_DIMS, library)
    shipped = load_table()
    norms = np.linalg.norm(fresh, axis=1) * np.linalg.norm(shipped, axis=1)
    cosines = (fresh * shipped).sum(axis=1)[norms > 0] / norms[norms > 0]
    assert cosines.min() > 0.9998  # int8 with a scale per row
    texts = ["what is my puppy called", "My dog is named Biscuit, a beagle"]
    vectors = np.array(static.embed(texts))
    assert np.isclose(np.linalg.norm(vectors, axis=1), 1.0).all()


def test_vectors_are_unit_length_and_a_text_without_tokens_is_zero(static):
    vectors = np.array(static.embed(["My dog is named Biscuit", "", "   "]))
    assert vectors.shape == (3, 128)
    assert np.isclose(np.linalg.norm(vectors[0]), 1.0)
    assert not vectors[1:].any()
    assert static.embed([]) == []


def test_a_paraphrase_is_nearer_than_an_unrelated_text(static):
    query, same, other = np.array(
        static.embed(
            [
                "what is my puppy called",
                "My dog is named Biscuit, a three year old beagle",
                "The quarterly budget review moved to Friday afternoon",
            ]
        )
    )
    assert query @ same > query @ other


def test_long_texts_are_not_truncated(static):
    head = "the release train leaves on Thursday. " * 200
    assert static.embed([head + "kangaroo"]) != static.embed([head + "spreadsheet"])


def test_windows_of_a_long_text_cover_it_whole(static):
    text = "the release train leaves on Thursday. " * 100
    spans = static.window_spans(text)
    assert len(spans) > 1
    assert spans[0][0] == 0
    assert spans[-1][1] == len(text.rstrip())
    assert all(b[0] < a[1] for a, b in itertools.pairwise(spans))


_PIECES = ["unbelievably", "tokenization", "release", "Thursday.", "é", "中", "[CLS]"]


@settings(max_examples=200, deadline=None)
@given(
    text=st.one_of(
        st.lists(st.sampled_from(_PIECES), max_size=40).map(" ".join),
        st.text(max_size=120),
    ),
    window=st.integers(min_value=1, max_value=9),
)
def test_windowed_gives_the_windows_and_their_texts_vectors(text, window):
    """Tokenising once (windows of word-start tokens take their ids, the others
    their text's) gives what the two calls give: the spans, then each window's
    text embedded."""
    static = StaticEmbedder()
    static.window = window
    spans, vectors = static.windowed(text)
    assert spans == static.window_spans(text)
    expected = static.embed(window_texts(spans, text))
    np.testing.assert_allclose(vectors, expected, rtol=0, atol=1e-12)


def test_the_memory_stores_the_windowed_vectors(static):
    text = "the release train leaves on Thursday, unbelievably. " * 40
    memory = SQLiteMemory(":memory:", embedder=static, background_vectors=False)
    try:
        memory.store(NewMemory(agent="a", key="k", content=text, entry_id="e", at=T0))
        assert memory.embed_pending() == 1
        (blob,) = memory._db.conn.execute("SELECT embedding FROM memories").fetchone()
    finally:
        memory.close()
    expected = static.embed(window_texts(static.window_spans(text), text))
    assert len(expected) > 1
    stored = np.frombuffer(blob, dtype="<f4").reshape(len(expected), -1)
    np.testing.assert_array_equal(stored, np.asarray(expected, dtype="<f4"))


def test_one_vector_per_entry_is_the_mean_of_the_windows_texts_vectors(static):
    """PostgreSQL and Qdrant store ``whole_text_vector``: with the static model it
    takes the windows from ``windowed``, and is what embedding their texts gives."""
    text = "the release train leaves on Thursday, unbelievably. " * 40
    windows = static.embed(window_texts(static.window_spans(text), text))
    assert len(windows) > 1
    mean = np.mean(np.asarray(windows, dtype=np.float64), axis=0)
    np.testing.assert_allclose(
        whole_text_vector(static, text), mean / np.linalg.norm(mean), rtol=0, atol=1e-12
    )


def test_the_static_models_rows_skip_the_cache_and_its_queries_use_it(static):
    memory = SQLiteMemory(":memory:", embedder=static, background_vectors=False)
    try:
        memory.store(
            NewMemory(
                agent="a", key="k", content="the release train", entry_id="e", at=T0
            )
        )
        assert memory.embed_pending() == 1
        assert len(memory._embedding.cache) == 0  # computing costs less
        assert memory.recall("release train", agents=["a"])
        assert len(memory._embedding.cache) == 1  # the query's vector
    finally:
        memory.close()


class _BrokenWindows(StaticEmbedder):
    def windowed(self, text: str) -> tuple[list[tuple[int, int]], list[list[float]]]:
        raise RuntimeError(f"cannot read {len(text)} characters")


def test_a_failing_windowed_embedder_leaves_the_row_for_later():
    memory = SQLiteMemory(
        ":memory:", embedder=_BrokenWindows(), background_vectors=False
    )
    try:
        memory.store(
            NewMemory(
                agent="a", key="k", content="the release train", entry_id="e", at=T0
            )
        )
        assert memory.embed_pending() == 0
        assert memory.pending_vectors == 1
        assert memory.embedding_failures == 1
        assert memory.last_embedding_error == "RuntimeError: cannot read 17 characters"
        assert [e.key for e in memory.recall("release train", agents=["a"])] == ["k"]
    finally:
        memory.close()


def _copy_data(tmp_path: Path) -> Path:
    folder = tmp_path / "data"
    shutil.copytree(DATA, folder)
    return folder


@pytest.mark.parametrize(
    ("name", "damage"),
    [
        (TABLE_FILE, lambda data: data[:-1] + bytes([data[-1] ^ 0xFF])),  # a bit
        (TABLE_FILE, lambda data: data[:-4]),  # truncated
        (TABLE_FILE, lambda data: data + b"\0"),  # longer
        (VOCAB_FILE, lambda data: data.replace(b"[UNK]", b"[UNX]")),
    ],
)
def test_a_damaged_shipped_file_is_refused_with_one_typed_line(tmp_path, name, damage):
    folder = _copy_data(tmp_path)
    path = folder / name
    path.write_bytes(damage(path.read_bytes()))
    embedder = StaticEmbedder(data_dir=folder)  # nothing is read yet
    with pytest.raises(StaticTableError, match=r"^Expected .* with SHA-256 ") as e:
        embedder.embed(["text"])
    assert "\n" not in str(e.value)


def test_a_missing_shipped_file_is_refused(tmp_path):
    folder = _copy_data(tmp_path)
    (folder / TABLE_FILE).unlink()
    with pytest.raises(StaticTableError, match="Expected the static model's file"):
        StaticEmbedder(data_dir=folder).window_spans("text")


def test_the_projection_fixes_each_axis_sign_and_bounds_dims():
    rng = np.random.default_rng(3)
    outputs = rng.standard_normal((300, 20))
    table = project(outputs, 8)
    flipped = project(-outputs, 8)  # the same axes up to sign
    assert np.allclose(table, -flipped, atol=1e-5) or np.allclose(
        np.abs(table), np.abs(flipped), atol=1e-5
    )
    assert table.shape == (300, 8)
    for dims in (0, 18):
        with pytest.raises(ValueError, match="Expected dims from 1 to 17"):
            project(outputs, dims)


def test_frequent_words_weigh_less_than_rare_ones():
    weights = sif_weights(30_522)
    the, rare, symbol = weights[1996], weights[25_000], weights[1010]
    assert the < 0.02
    assert 0.9 < rare <= 1.0
    assert symbol < 0.5


def test_bad_dims_are_refused_at_construction():
    for dims in (0, MAX_STATIC_DIMS + 1):
        with pytest.raises(ValueError, match="Expected dims from 1"):
            StaticEmbedder(dims)


OLD_SPELLING = f'provider = "local"\nmodel = "{STATIC_MODEL}"'


@pytest.mark.parametrize("spelling", ['provider = "static"', OLD_SPELLING])
@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        ("dims = 129", "embedding.dims: expected 1 to 128"),
        ("threads = 2", "embedding.threads: expected "),
        ('base_url = "http://x"', "embedding.base_url: expected only with"),
    ],
)
def test_the_static_model_refuses_what_it_cannot_honour(spelling, lines, expected):
    with pytest.raises(ConfigError, match=expected):
        parse_config(f"[embedding]\n{spelling}\n{lines}\n")


def test_the_static_provider_refuses_another_model():
    with pytest.raises(ConfigError, match=r"embedding\.model: expected 'all-MiniLM"):
        parse_config('[embedding]\nprovider = "static"\nmodel = "other"\n')


def test_static_is_the_default_provider():
    assert parse_config("").embedding.provider == "static"
    assert parse_config('[embedding]\nprovider = "none"\n').embedding.provider == (
        "none"
    )


@contextmanager
def _service(tmp_path: Path, text: str = "") -> Iterator[MemoryService]:
    """A memory service over a new ledger, with the given config."""
    config = parse_config(text)
    ledger = str(tmp_path / "ledger.db")
    with open_store(ledger) as store:
        service = MemoryService(store, config, ledger_url=ledger)
        try:
            yield service
        finally:
            service.close()


@pytest.mark.parametrize("text", ["", f"[embedding]\n{OLD_SPELLING}\n"])
def test_the_default_config_stores_and_recalls_with_the_static_model(tmp_path, text):
    with _service(tmp_path, text) as service:
        service.store_entry("a", "pet", "My dog is named Biscuit", category="core")
        service.store_entry(
            "a", "budget", "The budget review is on Friday", category="core"
        )
        found = service.recall("a", "what is my dog called")
    assert [entry.key for entry in found][:1] == ["pet"]
    with sqlite3.connect(tmp_path / "ledger.memory.db") as db:
        meta = dict(db.execute("SELECT name, value FROM memory_meta").fetchall())
    assert set(meta.values()) >= {"local", STATIC_MODEL, "128"}  # identity recorded


class _Inline:
    """The static model, declaring it computes in parallel (no worker thread)."""

    computes_in_parallel = True

    def __init__(self, inner: StaticEmbedder) -> None:
        self._inner = inner
        self.identity = inner.identity
        self.similarity_range = inner.similarity_range

    def embed(self, texts: list[str]) -> list[list[float]]:
        return self._inner.embed(texts)


def test_a_search_on_the_worker_thread_finds_what_one_in_line_finds(static, tmp_path):
    path = tmp_path / "memory.db"
    rng = np.random.default_rng(5)
    words = [
        "dog",
        "budget",
        "Friday",
        "editor",
        "Helix",
        "coffee",
        "oat",
        "milk",
        "Porto",
        "Japanese",
        "gym",
    ]
    with SQLiteMemory(path, embedder=static, cache_size=0) as memory:
        for i in range(300):
            text = " ".join(rng.choice(words, 5))
            memory.store(
                NewMemory(
                    agent="a", key=f"k{i}", content=text, entry_id=f"{i:04d}", at=T0
                )
            )
    queries = ["my puppy", "coffee in Porto", "which editor", "gym on Friday"]
    with (
        SQLiteMemory(path, embedder=static, cache_size=0) as worker,
        SQLiteMemory(path, embedder=_Inline(static), cache_size=0) as inline,
    ):
        for query in queries:
            a = worker.recall(query, agents=["a"], limit=10)
            b = inline.recall(query, agents=["a"], limit=10)
            assert [(e.key, e.score) for e in a] == [(e.key, e.score) for e in b]
            assert a
