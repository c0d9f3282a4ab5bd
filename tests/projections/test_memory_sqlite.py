"""SQLite memory: the contract (keyword-only and with vectors), the hybrid formula,
ties, the LIKE fallback, the embedding cache and identity, failing embedders, FTS
escaping and scoping before ranking."""

from __future__ import annotations

import hashlib
import itertools
import math
import re
import sqlite3
from datetime import timedelta
from uuid import UUID

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.contracts.memory_contract import T0, MemoryContract, keys, put
from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import MemoryForgotten, MemoryStored, MemorySuperseded
from turnledger.policies.relevance import KEYWORD_CONFIDENT, keyword_score
from turnledger.projections.memory.embedding import EmbedderError, EmbeddingIdentity
from turnledger.projections.memory.errors import MemoryStoreError
from turnledger.projections.memory.protocol import MemoryBackend, NewMemory
from turnledger.projections.memory.sqlite import SQLiteMemory
from turnledger.projections.memory.sqlite._fts import (
    MATCH_BUDGET,
    Term,
    doc_length,
    query_terms,
    sample_edge,
    scoped_counts,
    selective_terms,
)
from turnledger.projections.memory.sqlite._scope import make_scope

DIMS = 64
STREAM = UUID("00000000-0000-4000-8000-0000000000cc")


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


class HashingEmbedder:
    """A deterministic bag-of-words embedder: each word adds 1 at its hash slot."""

    def __init__(self, dims: int = DIMS, model: str = "hash-bow") -> None:
        self._identity = EmbeddingIdentity("test", model, dims)
        self.calls: list[list[str]] = []

    @property
    def identity(self) -> EmbeddingIdentity:
        return self._identity

    def embed(self, texts):
        self.calls.append(list(texts))
        return [self.vector(t) for t in texts]

    def vector(self, text: str) -> list[float]:
        out = [0.0] * self._identity.dims
        for word in words(text):
            digest = hashlib.sha256(word.encode()).digest()
            out[int.from_bytes(digest[:4], "big") % self._identity.dims] += 1.0
        return out


class TableEmbedder:
    """Returns the vector listed for each text (exact numbers for formula tests)."""

    def __init__(self, table: dict[str, list[float]], dims: int = 2) -> None:
        self.table = table
        self._identity = EmbeddingIdentity("test", "table", dims)

    @property
    def identity(self) -> EmbeddingIdentity:
        return self._identity

    def embed(self, texts):
        return [self.table.get(t, [0.0] * self._identity.dims) for t in texts]


class FailingEmbedder:
    """Always fails, as a provider outage would."""

    def __init__(self, error: Exception | None = None) -> None:
        self.error = error or EmbedderError("provider down")

    @property
    def identity(self) -> EmbeddingIdentity:
        return EmbeddingIdentity("test", "hash-bow", DIMS)

    def embed(self, texts):
        raise self.error


def own_copy(test):
    """A per-class copy of a contract Hypothesis test (HealthCheck.differing_executors)."""
    inner = test.hypothesis.inner_test
    return settings(
        max_examples=25,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )(given(data=st.data())(inner))


LEAK_TEST = MemoryContract.test_no_path_leaks_outside_the_allowlist_or_session


class TestSQLiteMemory(MemoryContract):
    """Keyword-only (the default: no embedder) passes the contract."""

    test_no_path_leaks_outside_the_allowlist_or_session = own_copy(LEAK_TEST)

    @pytest.fixture(name="memory")
    def _memory(self, tmp_path):
        memory = SQLiteMemory(tmp_path / "memory.db")
        yield memory
        memory.close()

    @pytest.fixture(name="reopen")
    def _reopen(self, tmp_path):
        return lambda: SQLiteMemory(tmp_path / "memory.db")

    @pytest.fixture(name="memory_factory")
    def _memory_factory(self):
        return lambda: SQLiteMemory(":memory:")


class TestSQLiteMemoryWithVectors(MemoryContract):
    """With a deterministic embedder, the hybrid and vector paths pass it too."""

    test_no_path_leaks_outside_the_allowlist_or_session = own_copy(LEAK_TEST)

    @pytest.fixture(name="memory")
    def _memory(self, tmp_path):
        memory = SQLiteMemory(tmp_path / "memory.db", embedder=HashingEmbedder())
        yield memory
        memory.close()

    @pytest.fixture(name="reopen")
    def _reopen(self, tmp_path):
        return lambda: SQLiteMemory(tmp_path / "memory.db", embedder=HashingEmbedder())

    @pytest.fixture(name="memory_factory")
    def _memory_factory(self):
        return lambda: SQLiteMemory(":memory:", embedder=HashingEmbedder())

    def test_vectors_are_live(self, memory: MemoryBackend):
        """The capability is declared and rows get vectors."""
        assert memory.capabilities.vectors is True
        put(memory, "k", "alpha beta")
        memory.embed_pending()
        (blob,) = memory._db.conn.execute("SELECT embedding FROM memories").fetchone()
        assert len(blob) == 4 * DIMS


_entry_ids = itertools.count(1)


def new(key, content, *, agent="alice", category="core", session=None, at=T0, **kw):
    return NewMemory(
        agent=agent,
        key=key,
        content=content,
        category=category,
        session=session,
        entry_id=kw.pop("entry_id", f"id-{key}-{next(_entry_ids)}"),
        at=at,
        **kw,
    )


def recorded(position, event, at=T0):
    return Recorded(
        stream_id=STREAM,
        version=position,
        position=position,
        recorded_at=at,
        event=event,
    )


def raw_bm25(memory: SQLiteMemory, expression: str) -> dict[str, float]:
    rows = memory._db.conn.execute(
        "SELECT m.key, -bm25(memories_fts) FROM memories_fts "
        "JOIN memories AS m ON m.rowid = memories_fts.rowid "
        "WHERE memories_fts MATCH ?",
        (expression,),
    )
    return dict(rows.fetchall())


def por(vector: float, keyword: float, wv: float = 0.7, wk: float = 0.3) -> float:
    """The weighted probabilistic OR of two measured legs, written out; a
    confident keyword score (policies.relevance.KEYWORD_CONFIDENT) in full."""
    top = max(wv, wk)
    fused = 1 - (1 - wv / top * vector) * (1 - wk / top * keyword)
    return max(fused, keyword) if wk > 0 and keyword >= KEYWORD_CONFIDENT else fused


def one_term(frequency: int, length: int) -> float:
    """The keyword score of a one-term query found ``frequency`` times."""
    return keyword_score({"t": 1.0}, {"t": frequency}, length)


def vector_count(memory: SQLiteMemory) -> int:
    row = memory._db.conn.execute(
        "SELECT count(*) FROM memories WHERE embedding IS NOT NULL"
    ).fetchone()
    return row[0]


@pytest.fixture(name="keyword_memory")
def _keyword_memory():
    memory = SQLiteMemory(":memory:")
    yield memory
    memory.close()


class TestHybridFormula:
    """final = 1 - prod(1 - w_i / w_max * s_i) over the legs that measured a row."""

    def test_exact_numbers(self):
        """Both modalities, vector only and keyword only, with known inputs."""
        table = {
            "alpha": [1.0, 0.0],  # the query
            "alpha report": [0.6, 0.8],  # cosine 0.6, keyword match
            "bravo report": [0.8, 0.6],  # cosine 0.8, no keyword match
            "charlie report": [0.0, 1.0],  # cosine 0: no vector hit, no keyword
        }
        memory = SQLiteMemory(":memory:", embedder=TableEmbedder(table))
        for i, content in enumerate(list(table)[1:]):
            memory.store(new(f"k{i}", content))
        memory.embed_pending()
        found = memory.recall("alpha", agents=["alice"], limit=5)
        # the order is reciprocal rank fusion: alpha report is first on keywords
        # and second on vectors, bravo report first on vectors only
        assert [(e.content, e.score) for e in found] == [
            ("alpha report", pytest.approx(por(0.6, one_term(1, 3)))),
            ("bravo report", pytest.approx(por(0.8, 0.0))),
        ]

    def test_keyword_scores_do_not_depend_on_the_batch(self):
        """A row scores the same with or without a stronger row beside it."""
        weak_text = "alpha and many other words in this longer line"
        table = {
            "alpha": [1.0, 0.0],
            "alpha alpha alpha": [1.0, 0.0],
            weak_text: [0.0, 1.0],
        }
        memory = SQLiteMemory(":memory:", embedder=TableEmbedder(table))
        memory.store(new("strong", "alpha alpha alpha"))
        memory.store(new("weak", weak_text))
        memory.embed_pending()
        found = {e.key: e.score for e in memory.recall("alpha", agents=["alice"])}
        assert found["strong"] == pytest.approx(por(1.0, one_term(3, 4)))
        # cosine 0 is still a measurement: the weak row's vector leg counts 0
        assert found["weak"] == pytest.approx(por(0.0, one_term(1, 10)))
        alone = SQLiteMemory(":memory:", embedder=TableEmbedder(table))
        alone.store(new("weak", weak_text))
        alone.embed_pending()
        (entry,) = alone.recall("alpha", agents=["alice"])
        assert entry.score == pytest.approx(found["weak"])

    def test_custom_weights(self):
        """The weights are the constructor's."""
        table = {"alpha": [1.0, 0.0], "alpha report": [0.6, 0.8]}
        memory = SQLiteMemory(
            ":memory:",
            embedder=TableEmbedder(table),
            vector_weight=0.5,
            keyword_weight=0.5,
        )
        memory.store(new("k", "alpha report"))
        memory.embed_pending()
        (entry,) = memory.recall("alpha", agents=["alice"])
        assert entry.score == pytest.approx(por(0.6, one_term(1, 3), 0.5, 0.5))

    def test_bm25_mode_skips_vectors_and_embedding_mode_skips_keywords(self):
        """search_mode picks the stages."""
        table = {"alpha": [1.0, 0.0], "alpha report": [0.6, 0.8]}
        bm25 = SQLiteMemory(
            ":memory:", embedder=TableEmbedder(table), search_mode="bm25"
        )
        bm25.store(new("k", "alpha report"))
        assert [e.score for e in bm25.recall("alpha", agents=["alice"])] == [
            pytest.approx(one_term(1, 3))
        ]
        vec = SQLiteMemory(
            ":memory:", embedder=TableEmbedder(table), search_mode="embedding"
        )
        vec.store(new("k", "alpha report"))
        vec.embed_pending()
        assert [e.score for e in vec.recall("alpha", agents=["alice"])] == [
            pytest.approx(0.6)
        ]

    def test_bad_settings_are_refused(self):
        """Weights and modes are validated."""
        with pytest.raises(ValueError, match="non-negative weights"):
            SQLiteMemory(":memory:", vector_weight=-1)
        with pytest.raises(ValueError, match="search mode"):
            SQLiteMemory(":memory:", search_mode="fuzzy")


class TestTies:
    """Rows alike for the query list newest first (the newer fact wins)."""

    @pytest.mark.parametrize(
        "embedder", [None, HashingEmbedder()], ids=["bm25", "hybrid"]
    )
    def test_ties_newest_first(self, embedder):
        memory = SQLiteMemory(":memory:", embedder=embedder)
        for entry_id in ("e3", "e1", "e4", "e2"):
            memory.store(new(f"k_{entry_id}", "same words here", entry_id=entry_id))
        memory.embed_pending()
        found = memory.recall("words", agents=["alice"], limit=3)
        assert [e.id for e in found] == ["e2", "e4", "e1"]
        assert len({e.score for e in found}) == 1

    def test_recent_ties_by_id(self, keyword_memory):
        """Rows updated at the same time list by id."""
        for entry_id in ("b", "a", "c"):
            keyword_memory.store(new(f"k{entry_id}", "x", entry_id=entry_id))
        assert [e.id for e in keyword_memory.recall("", agents=["alice"])] == [
            "a",
            "b",
            "c",
        ]


class TestLikeFallback:
    """When no token matches, substrings are searched in the newest scoped rows."""

    def test_substring_hit_scores_by_share_of_words(self, keyword_memory):
        keyword_memory.store(new("ops", "the deployment finished"))
        (entry,) = keyword_memory.recall("ploym", agents=["alice"])
        assert entry.key == "ops"
        assert entry.score == 0.5
        (entry,) = keyword_memory.recall("ploym zzzq", agents=["alice"])
        assert entry.score == 0.25

    def test_symbols_are_searched_with_a_word(self, keyword_memory):
        """A word with symbols is a substring; symbols alone match nothing."""
        keyword_memory.store(new("mood", "shipped it 🙂 at 100%_finished"))
        assert keys(keyword_memory.recall("0%_fini", agents=["alice"])) == ["mood"]
        assert keys(keyword_memory.recall("100%_finished", agents=["alice"])) == [
            "mood"
        ]
        assert keyword_memory.recall("🙂", agents=["alice"]) == []
        assert keyword_memory.recall("%_", agents=["alice"]) == []
        assert keyword_memory.recall("_%zz", agents=["alice"]) == []

    def test_scoped_before_limit(self, keyword_memory):
        for i in range(12):
            keyword_memory.store(
                new(f"other{i}", "redeployment", agent=f"o{i}", at=T0 + timedelta(1))
            )
        keyword_memory.store(new("mine", "redeployment", at=T0 - timedelta(days=9)))
        found = keyword_memory.recall("eploy", agents=["alice"], limit=1)
        assert keys(found) == ["mine"]

    def test_sessions_and_durable_globals(self, keyword_memory):
        keyword_memory.store(
            new("s1", "xyzzy one", category="conversation", session="s1")
        )
        keyword_memory.store(
            new("s2", "xyzzy two", category="conversation", session="s2")
        )
        keyword_memory.store(new("g", "xyzzy global", category="daily"))
        keyword_memory.store(new("c", "xyzzy chatter", category="conversation"))
        found = keyword_memory.recall("yzz", agents=["alice"], session="s1")
        assert set(keys(found)) == {"s1", "g"}

    def test_prefix_word_must_start_a_word(self, keyword_memory):
        keyword_memory.store(new("a", "ab🙂cd party"))
        keyword_memory.store(new("b", "xab🙂cd inside a word"))
        assert keys(keyword_memory.recall("ab🙂c*", agents=["alice"])) == ["a"]
        assert keys(keyword_memory.recall("ab🙂c", agents=["alice"])) == ["a", "b"]
        assert keyword_memory.recall("lue*", agents=["alice"]) == []


class TestEmbeddingCache:
    """Vectors are cached by content hash, least recently used evicted first."""

    def test_lru_eviction(self):
        embedder = HashingEmbedder()
        memory = SQLiteMemory(
            ":memory:", embedder=embedder, cache_size=2, background_vectors=False
        )

        def store(key: str, content: str) -> None:
            memory.store(new(key, content))
            memory.embed_pending()

        store("a", "apple")
        store("b", "banana")
        store("a2", "apple")  # hit: apple becomes most recent
        store("c", "cherry")  # evicts banana, the least recent
        assert len(memory._embedding.cache) == 2
        embedder.calls.clear()
        store("a3", "apple")
        store("c2", "cherry")
        assert embedder.calls == []
        store("b2", "banana")
        assert embedder.calls == [["banana"]]

    def test_queries_use_the_cache(self):
        embedder = HashingEmbedder()
        memory = SQLiteMemory(":memory:", embedder=embedder, background_vectors=False)
        memory.store(new("a", "apple pie"))
        memory.embed_pending()
        memory.recall("apple", agents=["alice"])
        memory.recall("apple", agents=["alice"])
        assert embedder.calls == [["apple pie"], ["apple"]]

    def test_disabled_cache_embeds_every_time(self):
        embedder = HashingEmbedder()
        memory = SQLiteMemory(
            ":memory:", embedder=embedder, cache_size=0, background_vectors=False
        )
        memory.store(new("a", "apple"))
        memory.embed_pending()
        memory.store(new("b", "apple"))
        memory.embed_pending()
        assert embedder.calls == [["apple"], ["apple"]]
        assert len(memory._embedding.cache) == 0


class TestEmbeddingIdentity:
    """A model change drops the vectors (content kept); the same model keeps them."""

    def test_change_invalidates_vectors_and_recall_degrades_to_keyword(self, tmp_path):
        path = tmp_path / "m.db"
        with SQLiteMemory(path, embedder=HashingEmbedder(model="m1")) as memory:
            memory.store(new("a", "alpha notes"))
            memory.store(new("b", "alpha alpha beta"))
            memory.embed_pending()
            assert vector_count(memory) == 2
        with SQLiteMemory(path, embedder=HashingEmbedder(model="m1")) as same:
            assert vector_count(same) == 2
        other = HashingEmbedder(model="m2")
        with SQLiteMemory(path, embedder=other, background_vectors=False) as changed:
            assert vector_count(changed) == 0
            assert len(changed._embedding.cache) == 0
            assert changed.count(agents=["alice"]) == 2
            found = changed.recall("alpha", agents=["alice"])
            with SQLiteMemory(path) as keyword_only:
                expected = keyword_only.recall("alpha", agents=["alice"])
            assert [(e.key, e.score) for e in found] == [
                (e.key, e.score) for e in expected
            ]
            assert changed.reindex() == 2
            assert vector_count(changed) == 2
            assert changed.identity == other.identity

    def test_keyword_only_handle_records_no_identity_and_keeps_vectors(self, tmp_path):
        path = tmp_path / "m.db"
        with SQLiteMemory(path, embedder=HashingEmbedder()) as memory:
            memory.store(new("a", "alpha"))
        with SQLiteMemory(path) as keyword_only:
            assert vector_count(keyword_only) == 1
            assert keyword_only.capabilities.vectors is False


class TestFailingEmbedder:
    """A failing embedder never loses a write: the row is kept without a vector."""

    @pytest.mark.parametrize(
        "error", [EmbedderError("provider down"), RuntimeError("bug in plug-in")]
    )
    def test_store_keeps_the_row(self, error):
        memory = SQLiteMemory(":memory:", embedder=FailingEmbedder(error))
        entry = memory.store(new("k", "kept despite the outage"))
        assert memory.embed_pending() == 0
        assert entry.content == "kept despite the outage"
        assert vector_count(memory) == 0
        assert memory.embedding_failures == 1
        assert str(error) in memory.last_embedding_error
        assert keys(memory.recall("outage", agents=["alice"])) == ["k"]

    def test_apply_keeps_the_rows(self):
        memory = SQLiteMemory(":memory:", embedder=FailingEmbedder())
        events = [
            recorded(i, MemoryStored(agent="alice", key=f"k{i}", content="text"))
            for i in (1, 2, 3)
        ]
        memory.apply(events, 3)
        assert memory.count(agents=["alice"]) == 3
        assert memory.applied_position() == 3

    def test_wrong_dimensions_count_as_a_failure(self):
        memory = SQLiteMemory(
            ":memory:",
            embedder=TableEmbedder({"x": [1.0]}, dims=2),
            background_vectors=False,
        )
        memory.store(new("k", "x"))
        memory.embed_pending()
        assert vector_count(memory) == 0
        assert memory.last_embedding_error == (
            "EmbedderError: Expected a 2-dimension embedding, found shape (1,)"
        )

    def test_unchanged_content_keeps_its_vector(self, tmp_path):
        path = tmp_path / "m.db"
        with SQLiteMemory(path, embedder=HashingEmbedder(), cache_size=0) as memory:
            memory.store(new("k", "stable text"))
        with SQLiteMemory(path, embedder=FailingEmbedder(), cache_size=0) as failing:
            failing.store(new("k", "stable text", at=T0 + timedelta(1)))
            assert vector_count(failing) == 1
            failing.store(new("k", "new text", at=T0 + timedelta(2)))
            assert vector_count(failing) == 0


class TestFtsQueries:
    """Queries are tokens in quotes: operators and SQL are searched for."""

    def test_terms(self):
        assert query_terms('"alpha" OR beta* NEAR(gamma, dd) xx:yy* Café') == [
            Term("alpha"),
            Term("beta", prefix=True),
            Term("near"),
            Term("gamma"),
            Term("dd"),
            Term("xx"),
            Term("yy", prefix=True),
            Term("cafe"),
        ]
        assert query_terms("🙂 %_ *") == []
        # stop words and one-letter tokens are never terms
        assert query_terms("what is the a b c* of it") == []

    def test_long_queries_keep_their_longest_terms(self):
        message = " ".join(f"w{i}" for i in range(20)) + " extraordinary deployment"
        terms = [t.text for t in query_terms(message)]
        assert terms == [
            *["w0", "w1", "w2", "w3"],  # the first of the shortest, by position
            *[f"w{i}" for i in range(10, 20)],
            "extraordinary",
            "deployment",
        ]

    def test_operators_are_searched_for(self, keyword_memory):
        keyword_memory.store(new("op", "salt AND pepper NOT sugar"))
        keyword_memory.store(new("plain", "salt only"))
        assert keys(keyword_memory.recall("AND pepper", agents=["alice"])) == ["op"]
        assert keyword_memory.recall("NOT", agents=["alice"]) == []  # a stop word
        found = keyword_memory.recall("salt AND sugar", agents=["alice"])
        assert keys(found) == ["op", "plain"]

    def test_diacritics_and_case_fold(self, keyword_memory):
        keyword_memory.store(new("k", "Crème brûlée recipe"))
        assert keys(keyword_memory.recall("CREME brulee", agents=["alice"])) == ["k"]

    def test_prefix_terms(self, keyword_memory):
        keyword_memory.store(new("k", "deployment pipeline"))
        assert keys(keyword_memory.recall("deploy*", agents=["alice"])) == ["k"]

    def test_selective_terms(self):
        rare, mid, stop = Term("zebra"), Term("deploy"), Term("the")
        assert selective_terms({rare: 2, mid: 6, Term("nowhere"): 0}, budget=100) == (
            [rare, mid],
            [rare, mid],
        )
        assert selective_terms({rare: 2, mid: 6, stop: 90}, budget=5) == (
            [rare],
            [rare, mid, stop],
        )
        frequent = {stop: 90, Term("a"): 95, Term("of"): 80, Term("is"): 70}
        selective, live = selective_terms(frequent, budget=5)
        assert selective == []
        assert [t.text for t in live] == ["is", "of", "the", "a"]
        assert selective_terms({Term("nowhere"): 0}) == ([], [])
        assert MATCH_BUDGET >= 1_000


class TestStopWordSafety:
    """Over the budget, frequent words are left out of the MATCH, not the score."""

    @pytest.fixture(name="busy")
    def _busy(self, monkeypatch):
        monkeypatch.setattr("turnledger.projections.memory.sqlite._fts.MATCH_BUDGET", 3)
        memory = SQLiteMemory(":memory:")
        events = [
            recorded(i + 1, MemoryStored(agent="alice", key=f"f{i}", content=text))
            for i, text in enumerate(
                [f"the filler line {i} is here" for i in range(14)]
                + [f"the deploy log {i}" for i in range(4)]
                + ["zebra deploy notes the", "zebra crossing notes the"]
            )
        ]
        memory.apply(events, len(events))
        yield memory
        memory.close()

    def test_frequent_words_still_rank(self, busy):
        found = busy.recall("zebra deploy the", agents=["alice"], limit=5)
        assert [e.content for e in found] == [
            "zebra deploy notes the",
            "zebra crossing notes the",
        ]
        assert found[0].score > found[1].score > 0

    def test_stop_word_only_queries_match_nothing(self, busy):
        assert busy.recall("the is", agents=["alice"], limit=3) == []

    def test_frequent_word_only_queries_answer(self, busy):
        found = busy.recall("filler line", agents=["alice"], limit=3)
        assert len(found) == 3
        assert all("filler line" in e.content for e in found)
        assert found[0].score == pytest.approx(found[1].score)

    def test_the_sample_edge_is_taken_again_once_the_database_changed(
        self, monkeypatch, tmp_path
    ):
        monkeypatch.setattr("turnledger.projections.memory.sqlite._fts.SAMPLE_ROWS", 3)
        path = tmp_path / "memory.db"
        ours, theirs = SQLiteMemory(path), SQLiteMemory(path)
        scope, cache = make_scope(["alice"]), {}
        try:
            for i in range(5):
                ours.store(new(f"k{i}", f"row {i}"))
            ours.store(new("bob", "his row", agent="bob"))  # outside the scope
            with ours._db.read() as conn:
                third_newest = conn.execute(
                    "SELECT rowid FROM memories WHERE agent = 'alice' "
                    "ORDER BY rowid DESC LIMIT 1 OFFSET 2"
                ).fetchone()[0]
                assert sample_edge(conn, scope, cache) == third_newest
                assert sample_edge(conn, scope, cache) == third_newest
                assert sample_edge(conn, make_scope(["bob"]), cache) is None
            ours.store(new("k5", "row 5"))  # a write of its own connection
            with ours._db.read() as conn:
                moved = sample_edge(conn, scope, cache)
            assert moved is not None
            assert moved > third_newest
            theirs.store(new("k6", "row 6"))  # another connection's commit
            with ours._db.read() as conn:
                assert sample_edge(conn, scope, cache) > moved
        finally:
            ours.close()
            theirs.close()

    def test_frequent_counts_after_writes_are_those_taken_afresh(
        self, monkeypatch, tmp_path
    ):
        """Frequent terms are estimated on the scope's newest rows, whose edge is
        kept between recalls: after a write, the estimates are those taken
        without any cache."""
        monkeypatch.setattr("turnledger.projections.memory.sqlite._fts.MATCH_BUDGET", 3)
        monkeypatch.setattr("turnledger.projections.memory.sqlite._fts.SAMPLE_ROWS", 4)
        memory = SQLiteMemory(tmp_path / "memory.db")
        scope, edges = make_scope(["alice"]), {}
        terms = query_terms("filler notes garden")
        try:
            for i in range(8):
                memory.store(new(f"old{i}", f"quiet notes {i} about the garden"))
            with memory._db.read() as conn:
                scoped_counts(conn, terms, scope, 8, edges=edges)
            for i in range(6):
                memory.store(new(f"new{i}", f"filler {i} filler garden"))
            with memory._db.read() as conn:
                kept = scoped_counts(conn, terms, scope, 14, edges=edges)[0]
                fresh = scoped_counts(conn, terms, scope, 14)[0]
        finally:
            memory.close()
        assert kept == fresh
        assert fresh[Term("filler")] == 14  # the four newest rows all hold it
        assert fresh[Term("notes")] == 4  # none of them: the budget's + 1

    def test_scope_applies_on_every_plan(self, busy):
        busy.store(new("bob", "zebra zebra zebra the", agent="bob"))
        found = busy.recall("zebra the", agents=["alice"], limit=5)
        assert "bob" not in keys(found)


class TestScopedBeforeRanking:
    """The reference's quirk: other sessions/agents crowded out and depressed rows."""

    @pytest.mark.parametrize(
        "embedder", [None, HashingEmbedder()], ids=["bm25", "hybrid"]
    )
    def test_other_sessions_neither_crowd_out_nor_depress(self, embedder):
        memory = SQLiteMemory(":memory:", embedder=embedder)
        for i in range(12):
            memory.store(
                new(
                    f"loud{i}",
                    "deploy deploy deploy deploy",
                    category="conversation",
                    session="s2",
                )
            )
        memory.store(
            new(
                "quiet",
                "deploy notes and more words",
                category="conversation",
                session="s1",
            )
        )
        (entry,) = memory.recall("deploy", agents=["alice"], session="s1", limit=1)
        assert entry.key == "quiet"
        if embedder is None:  # the crowd outside the scope changes nothing
            assert entry.score == pytest.approx(one_term(1, 6))

    @pytest.mark.parametrize(
        "embedder", [None, HashingEmbedder()], ids=["bm25", "hybrid"]
    )
    def test_disallowed_agents_do_not_depress(self, embedder):
        memory = SQLiteMemory(":memory:", embedder=embedder)
        memory.store(new("loud", "deploy deploy deploy", agent="mallory"))
        memory.store(new("quiet", "deploy notes and more words here"))
        (entry,) = memory.recall("deploy", agents=["alice"])
        assert entry.key == "quiet"
        if embedder is None:
            assert entry.score == pytest.approx(one_term(1, 7))


class TestDurableGlobals:
    """Session-less core/daily rows are visible from every session on every path."""

    @pytest.mark.parametrize(
        "embedder", [None, HashingEmbedder()], ids=["bm25", "hybrid"]
    )
    def test_every_path(self, embedder):
        memory = SQLiteMemory(":memory:", embedder=embedder)
        memory.store(new("fact", "kiwi is the codename", category="core"))
        memory.store(new("log", "kiwi shipped today", category="daily"))
        memory.store(new("chat", "kiwi chatter", category="conversation"))
        memory.store(new("other", "kiwi other session", category="core", session="s2"))
        expected = {"fact", "log"}
        assert (
            set(keys(memory.recall("kiwi", agents=["alice"], session="s1"))) == expected
        )
        assert set(keys(memory.recall("", agents=["alice"], session="s1"))) == expected
        assert (
            set(keys(memory.recall("iwi", agents=["alice"], session="s1"))) == expected
        )
        assert keys(memory.list(agents=["alice"], session="s1")) == []


class TestApplyAndLimits:
    """Batches apply in order, exactly once; limits are bounded."""

    def test_batch_in_order(self):
        memory = SQLiteMemory(":memory:")
        events = [
            MemoryStored(agent="alice", key="a", content="first a", entry_id="ea"),
            MemoryStored(agent="alice", key="b", content="only b", entry_id="eb"),
            MemoryStored(agent="alice", key="a", content="second a", entry_id="ea2"),
            MemoryForgotten(agent="alice", key="b"),
            MemoryStored(agent="alice", key="c", content="c text", entry_id="ec"),
            MemoryStored(agent="alice", key="d", content="d text", entry_id="ed"),
            MemorySuperseded(agent="alice", key="c", superseded_by="d"),
        ]
        batch = [
            recorded(i + 1, e, at=T0 + timedelta(minutes=i))
            for i, e in enumerate(events)
        ]
        memory.apply(batch, 7)
        memory.apply(batch, 7)
        a = memory.get("a", agents=["alice"])
        assert (a.id, a.content, a.created_at, a.updated_at) == (
            "ea",
            "second a",
            T0,
            T0 + timedelta(minutes=2),
        )
        assert memory.get("b", agents=["alice"]) is None
        assert memory.get("c", agents=["alice"]) is None
        assert keys(memory.list(agents=["alice"])) == ["d", "a"]
        assert memory.applied_position() == 7

    def test_partly_applied_batch_skips_what_is_done(self):
        memory = SQLiteMemory(":memory:")
        first = recorded(1, MemoryStored(agent="alice", key="a", content="one"))
        second = recorded(2, MemoryForgotten(agent="alice", key="a"))
        third = recorded(3, MemoryStored(agent="alice", key="a", content="three"))
        memory.apply([first, second], 2)
        memory.apply([first, second, third], 3)
        assert memory.get("a", agents=["alice"]).content == "three"

    def test_restore_unhides_a_superseded_key(self, keyword_memory):
        keyword_memory.store(new("k", "old"))
        keyword_memory.supersede("k", agent="alice", superseded_by="n")
        assert keyword_memory.count(agents=["alice"]) == 0
        keyword_memory.store(new("k", "new", at=T0 + timedelta(1)))
        assert keyword_memory.get("k", agents=["alice"]).content == "new"

    def test_unlimited_is_capped(self):
        memory = SQLiteMemory(":memory:")
        events = [
            recorded(i, MemoryStored(agent="alice", key=f"k{i}", content="same pond"))
            for i in range(1, 1101)
        ]
        memory.apply(events, 1100)
        assert len(memory.recall("pond", agents=["alice"], limit=0)) == 1024
        assert len(memory.recall("", agents=["alice"], limit=5000)) == 1024
        with pytest.raises(ValueError, match=">= 0"):
            memory.recall("pond", agents=["alice"], limit=-1)

    def test_a_second_handle_sees_new_vectors(self, tmp_path):
        path = tmp_path / "m.db"
        reader = SQLiteMemory(path, embedder=HashingEmbedder(), search_mode="embedding")
        writer = SQLiteMemory(path, embedder=HashingEmbedder())
        writer.store(new("a", "walnut cake"))
        assert keys(reader.recall("walnut", agents=["alice"])) == ["a"]
        writer.store(new("b", "walnut bread"))
        writer.forget("a", agent="alice")
        assert keys(reader.recall("walnut", agents=["alice"])) == ["b"]
        reader.close()
        writer.close()

    def test_loaded_vectors_follow_every_write(self):
        """After the matrix is loaded, stores, forgets, supersedes and purges show."""
        memory = SQLiteMemory(
            ":memory:", embedder=HashingEmbedder(), search_mode="embedding"
        )
        memory.store(new("a", "walnut cake"))
        assert keys(memory.recall("walnut", agents=["alice"])) == ["a"]
        memory.store(new("b", "walnut bread", category="conversation", session="s1"))
        memory.store(new("c", "walnut oil"))
        assert set(keys(memory.recall("walnut", agents=["alice"]))) == {"a", "b", "c"}
        memory.supersede("a", agent="alice", superseded_by="c")
        memory.purge_session("s1", agent="alice")
        assert keys(memory.recall("walnut", agents=["alice"])) == ["c"]
        memory.forget("c", agent="alice")
        assert memory.recall("walnut", agents=["alice"]) == []
        memory.store(new("a", "walnut cake again", at=T0 + timedelta(1)))
        assert keys(memory.recall("walnut", agents=["alice"])) == ["a"]

    def test_reindex_without_embedder_rebuilds_the_index(self, keyword_memory):
        keyword_memory.store(new("k", "pebble"))
        assert keyword_memory.reindex() == 0
        assert keys(keyword_memory.recall("pebble", agents=["alice"])) == ["k"]

    def test_apply_is_all_or_nothing(self, monkeypatch):
        """A failure mid-apply leaves neither effects nor position."""
        from turnledger.projections.memory.sqlite import _writes as _sqlite_writes

        memory = SQLiteMemory(":memory:", embedder=HashingEmbedder())
        memory.store(new("seed", "pear"))
        memory.recall("pear", agents=["alice"])  # the matrix is loaded

        def fail(conn, reached):
            raise sqlite3.OperationalError("disk I/O error")

        monkeypatch.setattr(_sqlite_writes, "save_position", fail)
        events = [
            recorded(1, MemoryStored(agent="alice", key="k", content="pear tart")),
            recorded(2, MemoryForgotten(agent="alice", key="seed")),
        ]
        with pytest.raises(MemoryStoreError, match="disk I/O error"):
            memory.apply(events, 2)
        assert memory.applied_position() == 0
        assert keys(memory.recall("pear", agents=["alice"])) == ["seed"]

    def test_many_agents(self, keyword_memory):
        """A long allowlist (one query instead of one per agent) still scopes."""
        keyword_memory.store(new("mine", "quartz"))
        keyword_memory.store(new("theirs", "quartz", agent="outsider"))
        agents = [f"agent{i}" for i in range(150)] + ["alice"]
        assert keys(keyword_memory.recall("", agents=agents)) == ["mine"]
        assert keys(keyword_memory.list(agents=agents)) == ["mine"]

    def test_health_after_close(self):
        memory = SQLiteMemory(":memory:")
        assert memory.health() is True
        memory.close()
        assert memory.health() is False


def test_cosine_of_table_vectors_is_exact():
    """Vector scores are cosines (float64 re-score of the kept rows)."""
    table = {"query": [3.0, 4.0], "doc": [4.0, 3.0]}
    memory = SQLiteMemory(
        ":memory:", embedder=TableEmbedder(table), search_mode="embedding"
    )
    memory.store(new("k", "doc"))
    memory.embed_pending()
    (entry,) = memory.recall("query", agents=["alice"])
    assert entry.score == pytest.approx(24 / 25, abs=1e-7)
    assert math.isclose(entry.score, 0.96, rel_tol=1e-6)


def test_vector_index_grows_and_compacts():
    """The matrix grows past its first capacity and compacts after many drops."""
    from turnledger.projections.memory.sqlite._embedding import vector_blob
    from turnledger.projections.memory.sqlite._scope import make_scope
    from turnledger.projections.memory.sqlite._vectors import VectorIndex, VectorRow

    index = VectorIndex(2)
    index.load([])
    for i in range(3000):
        vector = vector_blob([1.0, i / 3000], 2)
        index.put(VectorRow(i + 1, f"e{i:04d}", "alice", None, "core", 0, vector))
    index.drop(range(1, 2501))
    assert len(index) == 500
    assert index._size == 500  # compacted
    hits = index.search([1.0, 1.0], make_scope(["alice"]), 3)
    assert [entry_id for _, entry_id, _ in hits] == ["e2999", "e2998", "e2997"]
    assert index.search([1.0, 1.0], make_scope(["bob"]), 3) == []
    index.put(
        VectorRow(1, "again", "bob", "s1", "conversation", 5, vector_blob([0, 1], 2))
    )
    scope = make_scope(["bob"], session="s1")
    assert [h[1] for h in index.search([0.0, 1.0], scope, 3)] == ["again"]


def test_cache_size_must_not_be_negative():
    """A negative cache size is refused."""
    with pytest.raises(ValueError, match="Expected a cache size >= 0, found -1"):
        SQLiteMemory(":memory:", embedder=HashingEmbedder(), cache_size=-1)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["put", "drop"]),
            st.integers(1, 12),
            st.sampled_from(["alice", "bob"]),
            st.floats(-1, 1),
        ),
        max_size=40,
    )
)
def test_a_repeated_scope_sees_every_change_of_rows(steps):
    """The index keeps the last scope's rows: each put and drop must show."""
    from turnledger.projections.memory.sqlite._embedding import vector_blob
    from turnledger.projections.memory.sqlite._scope import make_scope
    from turnledger.projections.memory.sqlite._vectors import VectorIndex, VectorRow

    index = VectorIndex(2)
    index.load([])
    live: dict[int, VectorRow] = {}
    scope = make_scope(["alice"])
    for action, rowid, agent, y in steps:
        if action == "put":
            row = VectorRow(
                rowid, f"e{rowid:02d}", agent, None, "core", 0, vector_blob([1.0, y], 2)
            )
            index.put(row)
            live[rowid] = row
        else:
            index.drop([rowid])
            live.pop(rowid, None)
        fresh = VectorIndex(2)
        fresh.load([tuple(r) for r in live.values()])
        assert index.search([1.0, 0.5], scope, 20) == fresh.search(
            [1.0, 0.5], scope, 20
        )


@settings(max_examples=200, deadline=None)
@given(
    key=st.text(alphabet="ab1_- .:'Éé", min_size=1, max_size=12),
    content=st.text(alphabet=" abcxyz019_-.,:;'!?\n\tÉéüßç", max_size=80),
)
def test_a_stored_length_is_fts5s_token_count(key, content):
    """The length stored with a row (``tokens``) is the count FTS5's docsize
    record holds for the same key and content (letters, digits, Latin
    accents, punctuation, whitespace)."""
    memory = SQLiteMemory(":memory:")
    try:
        put(memory, key, content)
        with memory._db.read() as conn:
            tokens, size = conn.execute(
                "SELECT m.tokens, d.sz FROM memories AS m "
                "JOIN memories_fts_docsize AS d ON d.id = m.rowid"
            ).fetchone()
        assert tokens == doc_length(size)
    finally:
        memory.close()


def test_a_file_made_before_stored_lengths_ranks_the_same(tmp_path):
    """Opening a file without the ``tokens`` column adds it; its older rows
    (no stored length) are measured from FTS5's docsize records and rank and
    score as rows written now do."""
    path = tmp_path / "memory.db"
    memory = SQLiteMemory(path)
    texts = ["helix is my editor, the editor i use", "fish is my login shell"]
    for i, text in enumerate([*texts, "my editor runs in my shell", "lunch at noon"]):
        put(memory, f"k{i}", text)
    query = "which editor and which shell"
    written = [(e.key, e.score) for e in memory.recall(query, agents=["alice"])]
    memory.close()
    db = sqlite3.connect(path)
    db.execute("ALTER TABLE memories DROP COLUMN tokens")
    db.commit()
    db.close()
    again = SQLiteMemory(path)
    try:
        with again._db.read() as conn:
            stored = conn.execute("SELECT tokens FROM memories").fetchall()
        assert stored == [(None,)] * 4
        found = [(e.key, e.score) for e in again.recall(query, agents=["alice"])]
        assert found == [(k, pytest.approx(s)) for k, s in written]
        put(again, "k9", "a new editor note")
        with again._db.read() as conn:
            assert conn.execute(
                "SELECT tokens FROM memories WHERE key = 'k9'"
            ).fetchone() == (5,)
    finally:
        again.close()
