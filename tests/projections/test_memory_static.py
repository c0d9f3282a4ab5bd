"""The static model distilled from the packaged all-MiniLM-L6-v2, and its cache.

The distillation is real (the packaged weights, about 30 s on two cores), once
for the module, into a temporary cache folder; the other tests load that file.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from tests.contracts.memory_contract import T0
from turnledger.ledger.store import open_store
from turnledger.pipeline.config import ConfigError, parse_config
from turnledger.pipeline.memory import MemoryService
from turnledger.pipeline.memory.wiring import MemoryAccessError
from turnledger.projections.memory.embedding import EmbedderError
from turnledger.projections.memory.embedding._static_distill import project, sif_weights
from turnledger.projections.memory.embedding.static import (
    MAX_STATIC_DIMS,
    STATIC_MODEL,
    StaticEmbedder,
    read_table,
    write_table,
)
from turnledger.projections.memory.protocol import NewMemory
from turnledger.projections.memory.sqlite import SQLiteMemory

pytest.importorskip("sentence_transformers")

HEADER = {"source": "s", "recipe": "r", "rows": 5, "dims": 3}


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("static-cache")


@pytest.fixture(scope="module")
def static(cache: Path) -> StaticEmbedder:
    return StaticEmbedder(cache_dir=cache)


def test_the_first_load_distills_and_the_next_reads_the_same_table(static, cache):
    assert static.distilled is True
    assert static.table_path.parent == cache
    again = StaticEmbedder(cache_dir=cache)
    assert again.distilled is False
    texts = ["which text editor do I program in", "Helix is the editor I use"]
    assert again.embed(texts) == static.embed(texts)
    assert static.identity == ("local", STATIC_MODEL, 128)


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


def test_a_damaged_table_is_never_used_it_is_distilled_again(static, tmp_path):
    folder = tmp_path / "damaged"
    folder.mkdir()
    copy = folder / static.table_path.name
    shutil.copyfile(static.table_path, copy)
    data = bytearray(copy.read_bytes())
    data[-1] ^= 0xFF  # one byte of the last vector
    copy.write_bytes(bytes(data))
    rebuilt = StaticEmbedder(cache_dir=folder)
    assert rebuilt.distilled is True
    assert copy.read_bytes() == static.table_path.read_bytes()
    assert rebuilt.embed(["beagle"]) == static.embed(["beagle"])


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[:-4],  # truncated
        lambda data: data + b"\0" * 4,  # longer
        lambda data: data[:40] + b"x" + data[41:],  # header broken
        lambda data: b"something else\n" + data,  # not ours
        lambda data: b"",  # empty
    ],
)
def test_a_cut_or_foreign_table_file_reads_as_absent(tmp_path, damage):
    path = tmp_path / "t.table"
    table = np.arange(15, dtype=np.float32).reshape(5, 3)
    write_table(path, HEADER, table)
    assert np.array_equal(read_table(path, HEADER), table)
    path.write_bytes(damage(path.read_bytes()))
    assert read_table(path, HEADER) is None


@pytest.mark.parametrize("field", ["source", "recipe", "rows", "dims"])
def test_a_table_made_otherwise_reads_as_absent(tmp_path, field):
    path = tmp_path / "t.table"
    write_table(path, HEADER, np.zeros((5, 3), dtype=np.float32))
    changed = {**HEADER, field: 7 if field in {"rows", "dims"} else "other"}
    assert read_table(path, changed) is None
    assert read_table(tmp_path / "missing.table", HEADER) is None


def test_a_cache_path_that_is_a_file_is_a_typed_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(EmbedderError, match=r"Expected to write .*t\.table"):
        write_table(blocker / "t.table", HEADER, np.zeros((5, 3), np.float32))
    assert list(tmp_path.iterdir()) == [blocker]


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


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        ("dims = 382", "embedding.dims: expected 1 to 381"),
        ("threads = 2", "embedding.threads: expected 1 with model"),
    ],
)
def test_the_static_model_refuses_what_it_cannot_honour(lines, expected):
    text = f'[embedding]\nprovider = "local"\nmodel = "{STATIC_MODEL}"\n{lines}\n'
    with pytest.raises(ConfigError, match=expected):
        parse_config(text)


@contextmanager
def _service(
    tmp_path: Path, cache_dir: Path, env: pytest.MonkeyPatch
) -> Iterator[MemoryService]:
    """A memory service over a new ledger, configured with the static model."""
    env.setenv("TURNLEDGER_CACHE_DIR", str(cache_dir))
    config = parse_config(
        f'[embedding]\nprovider = "local"\nmodel = "{STATIC_MODEL}"\n'
    )
    ledger = str(tmp_path / "ledger.db")
    with open_store(ledger) as store:
        service = MemoryService(store, config, ledger_url=ledger)
        try:
            yield service
        finally:
            service.close()


def test_the_configured_static_model_stores_and_recalls_through_the_service(
    tmp_path, cache, static, monkeypatch
):
    with _service(tmp_path, cache, monkeypatch) as service:
        service.store_entry("a", "pet", "My dog is named Biscuit", category="core")
        service.store_entry(
            "a", "budget", "The budget review is on Friday", category="core"
        )
        found = service.recall("a", "what is my dog called")
    assert [entry.key for entry in found][:1] == ["pet"]
    assert all(found[0].score > other.score for other in found[1:])
    with sqlite3.connect(tmp_path / "ledger.memory.db") as db:
        meta = dict(db.execute("SELECT name, value FROM memory_meta").fetchall())
        vectors = db.execute("SELECT count(embedding) FROM memories").fetchone()[0]
    assert set(meta.values()) >= {"local", STATIC_MODEL, "128"}  # identity recorded
    assert vectors == 2
    assert static.table_path.parent == cache  # the distilled table was reused


def test_an_unwritable_static_cache_is_refused_by_the_wiring(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with (
        _service(tmp_path, blocker, monkeypatch) as service,
        pytest.raises(MemoryAccessError, match="embedding: Expected to write"),
    ):
        service.store_entry("a", "k", "text", category="core")


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
