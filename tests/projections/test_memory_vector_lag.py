"""Vectors as a derived view: computed off the write path, windowed, lagging.

A write commits its row and keywords at once; vectors come later (the
background thread, ``embed_pending``, ``reindex`` or the bounded drain at
close). Rows not yet embedded are found by keywords. A long entry is embedded
as overlapping windows of the embedder's tokens and scored by its best one.
"""

from __future__ import annotations

import itertools
import random
import re
import threading
import time
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.contracts.memory_contract import T0
from turnledger.projections.memory.embedding import EmbeddingIdentity
from turnledger.projections.memory.embedding.backfill import SETTLE_SECONDS
from turnledger.projections.memory.embedding.windows import (
    token_windows,
    window_texts,
)
from turnledger.projections.memory.protocol import NewMemory
from turnledger.projections.memory.sqlite import SQLiteMemory
from turnledger.projections.memory.sqlite._embedding import vector_blob
from turnledger.projections.memory.sqlite._ivf import IVF_MIN_ROWS
from turnledger.projections.memory.sqlite._scope import make_scope
from turnledger.projections.memory.sqlite._vectors import VectorIndex, VectorRow

STAGE = "turnledger.projections.memory.embedding.backfill"


def word_offsets(text: str) -> list[tuple[int, int]]:
    """The ``(start, end)`` characters of each whitespace-separated word."""
    return [match.span() for match in re.finditer(r"\S+", text)]


VOCABULARY = ("zephyr", "probe", "lorem", "ipsum", "garden", "tomato")


class WordWindows:
    """Bag-of-words over :data:`VOCABULARY`, windows of ``window`` words."""

    def __init__(self, window: int = 8) -> None:
        self.window = window
        self.calls: list[list[str]] = []

    @property
    def identity(self) -> EmbeddingIdentity:
        return EmbeddingIdentity("test", "vocabulary-bow", len(VOCABULARY))

    def window_spans(self, text: str) -> list[tuple[int, int]]:
        return token_windows(word_offsets(text), self.window)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return [[float(t.split().count(w)) for w in VOCABULARY] for t in texts]


class Whole(WordWindows):
    """The same vectors, every text embedded whole (no ``window_spans``)."""

    window_spans = None  # type: ignore[assignment]


def entry(key: str, content: str) -> NewMemory:
    return NewMemory(agent="a", key=key, content=content, entry_id=f"e-{key}", at=T0)


def vector_rows(memory: SQLiteMemory) -> int:
    row = memory._db.conn.execute(
        "SELECT count(*) FROM memories WHERE embedding IS NOT NULL"
    ).fetchone()
    return int(row[0])


def test_a_row_not_yet_embedded_is_found_by_keywords_then_by_both():
    embedder = WordWindows()
    # Equal weights: at 0.7/0.3 this one-word match is a confident keyword leg
    # (policies.relevance.KEYWORD_CONFIDENT), which the fusion keeps as it is.
    memory = SQLiteMemory(
        ":memory:",
        embedder=embedder,
        background_vectors=False,
        vector_weight=0.5,
        keyword_weight=0.5,
    )
    with SQLiteMemory(":memory:", background_vectors=False) as keyword_only:
        keyword_only.store(entry("k", "tomato garden notes"))
        (alone,) = keyword_only.recall("tomato", agents=["a"])
    memory.store(entry("k", "tomato garden notes"))
    assert embedder.calls == []  # nothing embedded on the write path
    assert memory.pending_vectors == 1
    (before,) = memory.recall("tomato", agents=["a"])
    assert (before.key, before.score) == ("k", alone.score)  # the keyword leg alone
    vectors_only = SQLiteMemory(
        ":memory:", embedder=embedder, search_mode="embedding", background_vectors=False
    )
    vectors_only.store(entry("k", "tomato garden notes"))
    assert memory.embed_pending() == 1
    assert vectors_only.embed_pending() == 1
    assert memory.pending_vectors == 0
    (after,) = memory.recall("tomato", agents=["a"])
    assert after.key == "k"
    assert after.score != before.score  # the vector leg measured it too
    assert after.score == pytest.approx(1 - (1 - 2**-0.5) * (1 - before.score))
    (vector,) = vectors_only.recall("tomato", agents=["a"])
    assert (vector.key, vector.score) == ("k", pytest.approx(2**-0.5))  # cosine
    memory.close()
    vectors_only.close()


def test_the_background_thread_embeds_writes_without_being_asked():
    memory = SQLiteMemory(":memory:", embedder=WordWindows())
    for n in range(100):
        memory.store(entry(f"k{n}", f"garden note {n} tomato"))
    deadline = time.monotonic() + 20
    while memory.pending_vectors and time.monotonic() < deadline:
        time.sleep(0.01)
    assert memory.pending_vectors == 0
    assert vector_rows(memory) == 100
    memory.close()


def _write_for(memory: SQLiteMemory, seconds: float, every: float) -> int:
    """Store a row every ``every`` seconds for ``seconds``; return how many."""
    written = 0
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        memory.store(entry(f"w{written}", f"garden note {written} tomato"))
        written += 1
        time.sleep(every)
    return written


def test_the_background_thread_waits_for_the_writes_to_pause(monkeypatch):
    """Its tokenising would take the GIL from a writer: while rows keep coming
    (here one every 10 ms, the pause it waits for 3 s, far above any gap),
    nothing is embedded; once they stop, everything is."""
    monkeypatch.setattr(f"{STAGE}.SETTLE_SECONDS", 3.0)
    monkeypatch.setattr(f"{STAGE}.MAX_DEFER_SECONDS", 60.0)
    memory = SQLiteMemory(":memory:", embedder=WordWindows())
    try:
        written = _write_for(memory, 1.5, 0.01)
        assert vector_rows(memory) == 0
        deadline = time.monotonic() + 20
        while memory.pending_vectors and time.monotonic() < deadline:
            time.sleep(0.01)
        assert vector_rows(memory) == written
    finally:
        memory.close()


def test_writes_that_never_pause_still_get_vectors(monkeypatch):
    """However busy the writes, a batch is embedded every MAX_DEFER_SECONDS."""
    monkeypatch.setattr(f"{STAGE}.SETTLE_SECONDS", 60.0)
    monkeypatch.setattr(f"{STAGE}.MAX_DEFER_SECONDS", 0.2)
    memory = SQLiteMemory(":memory:", embedder=WordWindows())
    try:
        _write_for(memory, 1.5, 0.005)
        assert vector_rows(memory) > 0
    finally:
        memory.close()


def test_close_drains_and_a_later_handle_embeds_the_rest(tmp_path):
    path = tmp_path / "m.db"
    with SQLiteMemory(path, embedder=WordWindows(), background_vectors=False) as m:
        m.store(entry("k", "tomato garden"))
    with SQLiteMemory(path) as keyword_only:  # no embedder: nothing is embedded
        assert vector_rows(keyword_only) == 1  # the drain at close embedded it
        keyword_only.store(entry("j", "zephyr probe"))
    with SQLiteMemory(path, embedder=WordWindows()) as reopened:
        assert reopened.pending_vectors == 1  # opening embeds nothing
        reopened.store(entry("i", "garden"))  # a write wakes the thread: all rows
        deadline = time.monotonic() + 20
        while reopened.pending_vectors and time.monotonic() < deadline:
            time.sleep(0.01)
        assert vector_rows(reopened) == 3
    with SQLiteMemory(path, embedder=WordWindows()) as again:
        again.store(entry("h", "probe"))
    with SQLiteMemory(path) as keyword_only:
        assert vector_rows(keyword_only) == 4  # at the latest, the drain at close


HANG_GUARD = 30.0  # seconds: a hang guard, not a bound
STOP_RACES = 150
"""Closes timed around the thread's settle: a lost stop hung about 1 in 40."""


def test_a_close_during_the_settle_never_hangs():
    # A close landing as the background thread's settle wait ends once cleared
    # the stop's wake with the stop unseen: the thread slept, close joined it
    # forever. The closes here land before, during and after that moment.
    rng = random.Random(5)
    for n in range(STOP_RACES):
        memory = SQLiteMemory(":memory:", embedder=WordWindows())
        memory.store(entry("k", f"tomato {n}"))
        time.sleep(SETTLE_SECONDS * rng.uniform(0.8, 1.2))
        closing = threading.Thread(target=memory.close, daemon=True)
        closing.start()
        closing.join(HANG_GUARD)
        assert not closing.is_alive(), f"close {n} hung"
        assert not memory._embedding.backfill.running


def test_writes_from_several_threads_start_one_background_thread():
    before = set(threading.enumerate())
    memory = SQLiteMemory(":memory:", embedder=WordWindows())
    start = threading.Barrier(4)

    def write(t: int) -> None:
        start.wait()
        for n in range(20):
            memory.store(entry(f"k{t}-{n}", f"garden {n}"))

    writers = [threading.Thread(target=write, args=(t,)) for t in range(4)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
    started = set(threading.enumerate()) - before
    running = [t for t in started if t.name == "memory-vectors"]
    assert len(running) == 1
    memory.close()
    assert not running[0].is_alive()


def test_reindex_reports_progress_and_drains():
    memory = SQLiteMemory(":memory:", embedder=WordWindows(), background_vectors=False)
    for n in range(150):
        memory.store(entry(f"k{n}", f"tomato {n}"))
    seen: list[tuple[int, int]] = []
    assert memory.reindex(progress=lambda at, total: seen.append((at, total))) == 150
    assert seen == [(64, 150), (128, 150), (150, 150)]
    assert memory.pending_vectors == 0
    memory.close()


def test_a_fact_at_the_end_of_a_long_entry_is_found_by_the_vector_leg():
    filler = " ".join(random.Random(7).choice(["lorem", "ipsum"]) for _ in range(2000))
    text = f"{filler} zephyr probe"
    windowed = SQLiteMemory(":memory:", embedder=WordWindows(), search_mode="embedding")
    whole = SQLiteMemory(":memory:", embedder=Whole(), search_mode="embedding")
    for memory in (windowed, whole):
        memory.store(entry("long", text))
        memory.embed_pending()
    (found,) = windowed.recall("zephyr probe", agents=["a"])
    assert found.key == "long"
    assert found.score == pytest.approx(1 / (1 + 3 * 3 / 2) ** 0.5, abs=0.2)
    blob = windowed._db.conn.execute("SELECT embedding FROM memories").fetchone()[0]
    assert len(blob) // (4 * len(VOCABULARY)) == len(
        token_windows(word_offsets(text), 8)
    )
    # Embedded whole, the fact is diluted by 2,000 words: cosine ~0.0007.
    (diluted,) = whole.recall("zephyr probe", agents=["a"])
    assert diluted.score is not None
    assert found.score > 100 * diluted.score
    windowed.close()
    whole.close()


@settings(max_examples=200, deadline=None)
@given(
    words=st.lists(st.integers(1, 6), max_size=300),
    gaps=st.integers(1, 3),
    size=st.integers(1, 64),
)
def test_windows_cover_every_token(words: list[int], gaps: int, size: int):
    """Each token lies in a window; no window holds more than ``size`` tokens."""
    offsets, at = [], 0
    for length in words:
        offsets.append((at, at + length))
        at += length + gaps
    spans = token_windows(offsets, size)
    assert (spans == []) == (offsets == [])
    for start, end in offsets:
        assert any(a <= start and end <= b for a, b in spans)
    for a, b in spans:
        inside = [t for t in offsets if a <= t[0] and t[1] <= b]
        assert 1 <= len(inside) <= size
    if spans:
        assert spans[0][0] == offsets[0][0]
        assert spans[-1][1] == offsets[-1][1]
    if size >= 4:  # a quarter of the window overlaps the next one
        assert all(
            next_start < end for (_, end), (next_start, _) in itertools.pairwise(spans)
        )
    text = "x" * at
    assert len(window_texts(spans, text)) == max(1, len(spans))


def test_a_window_size_below_one_is_refused():
    with pytest.raises(ValueError, match="window size >= 1"):
        token_windows([(0, 1)], 0)


def test_the_transformer_windows_cover_every_word_piece():
    """The packaged model's own tokenizer: a 2,000-word entry, nothing cut."""
    pytest.importorskip("sentence_transformers")
    from turnledger.projections.memory.embedding.local import (
        LocalEmbedder,
    )

    embedder = LocalEmbedder()
    words = random.Random(3).choices(
        ["garden", "tomato", "2026-12-04", "décembre", "zephyr", "probe!", "x"], k=2000
    )
    text = " ".join(words)
    spans = embedder.window_spans(text)
    pieces = embedder.loaded().model.tokenizer(
        text, add_special_tokens=False, return_offsets_mapping=True, verbose=False
    )["offset_mapping"]
    assert len(pieces) > embedder.window
    for start, end in pieces:
        assert any(a <= start and end <= b for a, b in spans)
    for window in window_texts(spans, text):
        inside = embedder.loaded().model.tokenizer(window, add_special_tokens=False)
        assert len(inside["input_ids"]) <= embedder.window + 2  # fits the model
    memory = SQLiteMemory(":memory:", embedder=embedder, search_mode="embedding")
    memory.store(entry("long", f"{text} The launch code of the probe is tangerine."))
    memory.store(entry("other", "The garden needs water on Mondays."))
    memory.embed_pending()
    found = memory.recall("what is the probe's launch code", agents=["a"], limit=2)
    assert found
    assert found[0].key == "long"
    memory.close()


def _blob(*windows: Sequence[float]) -> bytes:
    return b"".join(vector_blob(w, len(w)) for w in windows)


@pytest.mark.parametrize("how", ["put", "load"])
def test_a_row_scores_its_best_window_and_is_listed_once(how: str):
    rows = [
        (1, "e1", "a", None, "core", 0, _blob([1.0, 0.0], [0.0, 1.0])),
        (2, "e2", "a", None, "core", 0, _blob([0.6, 0.8])),
        (3, "e3", "a", None, "core", 0, _blob([0.8, 0.6], [0.8, 0.6], [0.7, 0.7])),
    ]
    index = VectorIndex(2)
    index.load([] if how == "put" else rows)
    if how == "put":
        for row in rows:
            index.put(VectorRow(*row))
    assert len(index) == 3
    hits = index.search([0.0, 1.0], make_scope(["a"]), 2)
    assert [(rowid, round(sim, 6)) for rowid, _, sim in hits] == [(1, 1.0), (2, 0.8)]
    three = index.search([1.0, 0.0], make_scope(["a"]), 3)
    assert [rowid for rowid, _, _ in three] == [1, 3, 2]  # each row once
    near = index.similarities([1.0, 0.0], [1, 2, 3])
    assert {k: round(v[1], 6) for k, v in near.items()} == {1: 1.0, 2: 0.6, 3: 0.8}
    index.drop([1])
    assert [r for r, _, _ in index.search([0.0, 1.0], make_scope(["a"]), 3)] == [2, 3]


def test_the_inverted_lists_rank_rows_by_their_best_window():
    """With every list probed, the ivf search equals the exact one."""
    generator = np.random.default_rng(5)
    vectors = generator.normal(size=(2 * IVF_MIN_ROWS + 20, 8)).astype("<f4")
    rows = [
        (n + 1, f"e{n:05d}", "a", None, "core", 0, vectors[2 * n : 2 * n + 2].tobytes())
        for n in range(IVF_MIN_ROWS + 10)
    ]
    exact, lists = VectorIndex(8), VectorIndex(8, probes=10_000)
    exact.load(rows)
    lists.load(rows)
    scope = make_scope(["a"])
    for query in generator.normal(size=(5, 8)):
        want = exact.search(query, scope, 10)
        got = lists.search(query, scope, 10)
        assert [r for r, _, _ in got] == [r for r, _, _ in want]
        assert len({r for r, _, _ in got}) == 10
