"""PostgreSQL memory on the real server: the contract (keyword-only and hybrid),
scores normalised over the scoped batch, vectors (pgvector or float4[]), odd
queries and transactional apply."""

from __future__ import annotations

import hashlib
import re
import time
import uuid
from datetime import timedelta
from uuid import UUID

import numpy as np
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import drop_schema, fresh_schema_url, require_postgres
from tests.contracts.keyword_gate import assert_scores_are_sqlites, gate_cases
from tests.contracts.memory_contract import T0, MemoryContract, keys, put
from tests.projections.test_memory_recall_gate import (
    FILLER,
    assert_a_small_store_knows_what_it_does_not_hold,
    assert_unheard_words_are_discounted,
    block,
)
from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import MemoryStored
from turnledger.policies.relevance import (
    KEYWORD_CONFIDENT,
    UNRELATED_SCORE,
    fuse,
    keyword_score,
)
from turnledger.projections.memory.embedding import (
    EmbedderError,
    EmbeddingIdentity,
    NoEmbedder,
)
from turnledger.projections.memory.embedding.static import StaticEmbedder
from turnledger.projections.memory.errors import MemoryStoreError
from turnledger.projections.memory.postgres import (
    PostgresMemory,
    query_words,
    split_url,
)
from turnledger.projections.memory.postgres._sql import blend, similarity

pytestmark = pytest.mark.postgres


class HashingEmbedder:
    """A deterministic bag-of-words embedder; ``synonyms`` share a dimension."""

    def __init__(self, dims=256, synonyms=None, name="hashing"):
        self.dims = dims
        self.synonyms = synonyms or {}
        self.identity = EmbeddingIdentity("fake", name, dims)

    def embed(self, texts):
        vectors = []
        for text in texts:
            vector = [0.0] * self.dims
            for found in re.findall(r"\w+", text.lower()):
                word = self.synonyms.get(found, found)
                digest = hashlib.blake2b(word.encode(), digest_size=4).digest()
                vector[int.from_bytes(digest, "big") % self.dims] += 1.0
            vectors.append(vector)
        return vectors


def own_copy(test):
    """Wrap the contract's Hypothesis test afresh for this class (see markdown tests)."""
    return settings(
        max_examples=25,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )(given(data=st.data())(test.hypothesis.inner_test))


LEAK_TEST = MemoryContract.test_no_path_leaks_outside_the_allowlist_or_session


@pytest.fixture(name="schemas")
def _schemas():
    """Extra schemas a test creates, dropped afterwards."""
    urls = []
    yield urls
    for url in urls:
        drop_schema(url)


def factory(schemas, **options):
    def make():
        url = fresh_schema_url(require_postgres())
        schemas.append(url)
        return PostgresMemory(url, **options)

    return make


class TestPostgresKeyword(MemoryContract):
    """Keyword-only (no embedder) passes the contract."""

    test_no_path_leaks_outside_the_allowlist_or_session = own_copy(LEAK_TEST)

    @pytest.fixture(name="memory")
    def _memory(self, postgres_url):
        memory = PostgresMemory(postgres_url)
        yield memory
        memory.close()

    @pytest.fixture(name="reopen")
    def _reopen(self, postgres_url):
        return lambda: PostgresMemory(postgres_url)

    @pytest.fixture(name="memory_factory")
    def _memory_factory(self, schemas):
        return factory(schemas)


class TestPostgresHybrid(MemoryContract):
    """With an embedder (pgvector when the server has it, else float4[])."""

    test_no_path_leaks_outside_the_allowlist_or_session = own_copy(LEAK_TEST)

    @pytest.fixture(name="memory")
    def _memory(self, postgres_url):
        memory = PostgresMemory(postgres_url, embedder=HashingEmbedder())
        yield memory
        memory.close()

    @pytest.fixture(name="reopen")
    def _reopen(self, postgres_url):
        return lambda: PostgresMemory(postgres_url, embedder=HashingEmbedder())

    @pytest.fixture(name="memory_factory")
    def _memory_factory(self, schemas):
        return factory(schemas, embedder=HashingEmbedder())


def server_has_pgvector() -> bool:
    with psycopg.connect(require_postgres()) as conn:
        return bool(
            conn.execute(
                "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"
            ).fetchone()
        )


@pytest.fixture(name="keyword_memory")
def _keyword_memory(postgres_url):
    memory = PostgresMemory(postgres_url)
    yield memory
    memory.close()


@pytest.fixture(name="vector_memory", params=["array", "auto"])
def _vector_memory(request, postgres_url):
    """The float4[] fallback explicitly, and whatever the server offers."""
    embedder = HashingEmbedder(synonyms={"automobile": "car", "vehicle": "car"})
    memory = PostgresMemory(postgres_url, embedder=embedder, vectors=request.param)
    yield memory
    memory.close()


def test_auto_uses_pgvector_only_when_the_server_has_it(postgres_url):
    """auto picks pgvector when the extension can be created, float4[] otherwise."""
    memory = PostgresMemory(postgres_url, embedder=HashingEmbedder())
    try:
        expected = "pgvector" if server_has_pgvector() else "array"
        assert memory.vector_kind == expected
    finally:
        memory.close()


def test_keyword_scores_are_the_gates(keyword_memory):
    """The IDF-weighted share of the query's words a row holds (SQLite's gate):
    every word scores about 1, one common word of three under the floor."""
    put(keyword_memory, "a", "deploy the release on friday")
    put(keyword_memory, "b", "the release notes")
    found = keyword_memory.recall("deploy release friday", agents=["alice"])
    assert keys(found) == ["a", "b"]
    assert found[0].score > 0.9
    assert 0.0 < found[1].score < 0.1


def test_normalisation_is_over_the_scoped_batch(keyword_memory):
    """Stronger rows of other agents or sessions never depress in-scope scores."""
    for i in range(5):
        put(keyword_memory, f"x{i}", "deploy deploy deploy deploy", agent=f"other{i}")
    put(
        keyword_memory,
        "s2",
        "deploy deploy deploy",
        category="conversation",
        session="s2",
    )
    put(keyword_memory, "mine", "deploy notes", category="conversation", session="s1")
    found = keyword_memory.recall("deploy", agents=["alice"], session="s1")
    alone = keyword_score(
        {"deploy": 1.0}, {"deploy": 1}, len(["mine", "deploy", "notes"])
    )
    assert [(e.key, e.score) for e in found] == [("mine", pytest.approx(alone))]


def test_key_matches_weigh_more_than_content(keyword_memory):
    """A word in the key ranks above the same word in the content."""
    put(keyword_memory, "deploy", "steps to follow")
    put(keyword_memory, "steps", "how we deploy")
    assert keys(keyword_memory.recall("deploy", agents=["alice"])) == [
        "deploy",
        "steps",
    ]


def test_any_word_matches_not_all(keyword_memory):
    """A long natural-language query finds rows sharing any of its words."""
    put(keyword_memory, "editor", "Helix is my editor")
    found = keyword_memory.recall(
        "which text editor do I like to use these days?", agents=["alice"]
    )
    assert keys(found) == ["editor"]


@pytest.mark.parametrize(
    "query",
    [
        "_",
        "___ ---",
        "a & b | !c",
        "x:* <-> y",
        "'quoted' \"double\"",
        "\x01ctl",
        "ä" * 5,
    ],
)
def test_odd_queries_are_words_not_operators(keyword_memory, query):
    """tsquery operators in a query are plain text; nothing raises."""
    put(keyword_memory, "k", "a b c x y quoted double ääääa")
    assert isinstance(keyword_memory.recall(query, agents=["alice"]), list)


def test_query_words_are_bounded_and_deduplicated():
    """At most 32 distinct words are searched, underscores split words."""
    assert query_words("Foo foo_bar FOO") == ["foo", "bar"]
    assert len(query_words(" ".join(f"w{i}" for i in range(100)))) == 32


def test_keyword_order_is_bm25_on_the_scopes_own_counts(keyword_memory):
    """The rarer word ranks first, rare among the caller's rows, whoever else
    holds it (their counts are not the caller's); in a store this small both
    subjects of the query are over the floor."""
    put(keyword_memory, "rare", "zephyr note", at=T0)
    for n in range(5):
        put(keyword_memory, f"common{n}", "garden note", at=T0 + timedelta(days=n + 1))
    for n in range(50):
        put(keyword_memory, f"theirs{n}", "zephyr zephyr", agent="bob")
    found = keyword_memory.recall("garden zephyr", agents=["alice"], limit=10)
    assert keys(found)[0] == "rare"  # older, and level on coverage: BM25 decides
    assert all(e.score > 0.4 for e in found)
    both = keyword_memory.recall("garden zephyr", agents=["alice", "bob"], limit=10)
    assert keys(both)[:5] == [f"common{n}" for n in range(4, -1, -1)]


@pytest.mark.parametrize("query", ["which editor do I use", "helix editor"])
def test_the_newer_fact_ranks_first(keyword_memory, query):
    """An update worded like what it updates, under another key, ranks above it
    for a question about either (BM25 alone would favour the shorter, older)."""
    put(keyword_memory, "editor", "my editor is Helix", at=T0)
    later = T0 + timedelta(days=1)
    put(keyword_memory, "editor-now", "my editor is Zed now, not Helix", at=later)
    put(keyword_memory, "shell", "my shell is fish", at=T0)
    assert keys(keyword_memory.recall(query, agents=["alice"]))[:2] == [
        "editor-now",
        "editor",
    ]


def test_bm25_weighs_only_the_words_searched_for(keyword_memory):
    """A query's words past the 32 searched for were never counted: a row
    holding one is not ranked up for it (as if no row held it)."""
    searched = " ".join(f"alpha{n}" for n in range(32))
    put(keyword_memory, "extra", "alpha0 beyond", at=T0)
    put(keyword_memory, "plain", "alpha0 other", at=T0 + timedelta(days=1))
    found = keyword_memory.recall(f"{searched} beyond", agents=["alice"])
    assert keys(found) == ["plain", "extra"]  # level on alpha0: the newer first


def test_upsert_revives_a_superseded_key(keyword_memory):
    """Storing a superseded key again makes the new content visible."""
    put(keyword_memory, "office", "Paris")
    keyword_memory.supersede("office", agent="alice", superseded_by="e9")
    assert keyword_memory.get("office", agents=["alice"]) is None
    put(keyword_memory, "office", "Lyon", at=T0 + timedelta(days=1))
    assert keyword_memory.get("office", agents=["alice"]).content == "Lyon"


def test_vector_leg_finds_what_keywords_miss(vector_memory):
    """A synonym hit comes from the vector leg alone; no keyword scores 0 on it."""
    put(vector_memory, "ride", "car")
    put(vector_memory, "lunch", "noon")
    vector_memory.embed_pending()  # vectors come after the write
    found = vector_memory.recall("automobile", agents=["alice"])
    assert keys(found) == ["ride"]
    # 1 - (1 - 1.0 * d) * (1 - 3/7 * 0), d the discount of "automobile", which
    # no row holds, in a store of 2 rows: (1 - 2/100) ** 1.5
    assert found[0].score == pytest.approx((1 - 2 / 100) ** 1.5)


def test_hybrid_blends_seventy_thirty(vector_memory):
    """Both legs fused as SQLite fuses them (policies.relevance.fuse): here
    the keyword leg is confident (a full match), so it counts in full."""
    put(vector_memory, "both", "car wash")
    vector_memory.embed_pending()
    found = vector_memory.recall("car", agents=["alice"])
    cosine = 1 / 2**0.5  # {car} against {car, wash}
    keyword = keyword_score({"car": 1.0}, {"car": 1}, len(["both", "car", "wash"]))
    assert keyword >= KEYWORD_CONFIDENT
    assert found[0].score == pytest.approx(fuse(cosine, keyword), rel=1e-5)
    assert found[0].score == pytest.approx(keyword, rel=1e-5)
    assert blend(None, 0.5) == 0.5
    assert blend(0.5, None) == 0.5


def test_float4_vectors_read_as_the_numbers_stored(vector_memory):
    """The recall's connection reads a ``float4[]`` sent in binary as a float32
    numpy array holding exactly the float32 values of what psycopg's own loader
    reads as floats; an array that is no vector (two dimensions, a NULL, none)
    reads as empty."""
    values = [0.5, -1.25, 3.0e-8, 1.0e30, -0.0, 0.1]
    literal = "ARRAY[" + ",".join(map(repr, values)) + "]::float4[]"
    cases = f"{literal}, ARRAY[[1,2],[3,4]]::float4[], ARRAY[1,NULL]::float4[], "
    with vector_memory._transaction() as conn:
        row = conn.execute(
            f"SELECT {cases} ARRAY[]::float4[], NULL::float4[]", binary=True
        ).fetchone()
        (as_floats,) = conn.execute(f"SELECT {literal}").fetchone()  # text: floats
    vector, square, holed, empty, null = row
    assert vector.dtype == np.float32  # what unit_vector made of the floats
    assert vector.tolist() == np.asarray(as_floats, dtype=np.float32).tolist()
    assert vector.tolist() == np.asarray(values, dtype=np.float32).tolist()
    assert [square.size, holed.size, empty.size, null] == [0, 0, 0, None]


def test_cosines_are_calibrated_by_the_embedders_range(postgres_url):
    """As on SQLite: a cosine under where the embedder's unrelated texts land
    is no evidence (a raw cosine would pass the 0.4 floor): the row is still
    ranked, scored under UNRELATED_SCORE, never injected."""

    class Calibrated(HashingEmbedder):
        similarity_range = (0.6, 1.0)

    synonyms = {"automobile": "car"}
    cosine = 1 / 3**0.5  # {car} against {car, wash, tomato}: 0.577
    # "automobile" is in no row of a store of 1 row: discounted by (1 - 1/100) ** 1.5
    # (policies.relevance.discount_absent), but never under UNRELATED_SCORE
    for embedder, score in (
        (HashingEmbedder(synonyms=synonyms), cosine * (1 - 1 / 100) ** 1.5),
        (Calibrated(synonyms=synonyms), UNRELATED_SCORE * cosine / 0.6),
    ):
        url = fresh_schema_url(require_postgres())
        memory = PostgresMemory(url, embedder=embedder, vectors="array")
        try:
            put(memory, "wash", "car wash tomato")
            memory.embed_pending()
            (found,) = memory.recall("automobile", agents=["alice"])
            assert found.key == "wash"
            assert found.score == pytest.approx(score, rel=1e-4)
        finally:
            memory.close()
            drop_schema(url)
    assert similarity_of(0.8) == pytest.approx(
        UNRELATED_SCORE + 0.5 * (1 - UNRELATED_SCORE)
    )


def similarity_of(cosine: float) -> float | None:
    """The vector leg's relevance of a cosine, with the range (0.6, 1.0)."""
    vector = np.array([1.0, 0.0], dtype=np.float32)
    row = [cosine, (1 - cosine**2) ** 0.5]
    return similarity(row, vector, stored="array", similarity_range=(0.6, 1.0))


def test_vector_recall_keeps_scope(vector_memory):
    """Vector candidates are filtered by agent and session inside the query."""
    put(vector_memory, "theirs", "car", agent="bob")
    put(vector_memory, "other", "car", category="conversation", session="s2")
    put(vector_memory, "mine", "vehicle", category="conversation", session="s1")
    vector_memory.embed_pending()
    found = vector_memory.recall("automobile", agents=["alice"], session="s1")
    assert keys(found) == ["mine"]


def test_a_new_embedder_identity_clears_vectors(postgres_url):
    """Vectors made by another embedder are dropped; content stays searchable."""
    first = PostgresMemory(postgres_url, embedder=HashingEmbedder(), vectors="array")
    put(first, "ride", "car")
    first.close()  # its drain embeds the row
    assert len(stored_vector(postgres_url, "ride")) == 256
    other = HashingEmbedder(dims=32, name="other")
    second = PostgresMemory(postgres_url, embedder=other, vectors="array")
    try:
        assert stored_vector(postgres_url, "ride") is None
        assert second.pending_vectors == 1
        assert keys(second.recall("car", agents=["alice"])) == ["ride"]
        progress = []
        assert second.reindex(lambda done, total: progress.append((done, total))) == 1
        assert progress == [(1, 1)]
        assert len(stored_vector(postgres_url, "ride")) == 32  # the new embedder's
        assert second.pending_vectors == 0
    finally:
        second.close()


def stored_vector(url: str, key: str) -> list[float] | None:
    """The embedding column of the row with that key, read on its own connection."""
    conninfo, schema = split_url(url)
    with psycopg.connect(conninfo) as conn:
        (vector,) = conn.execute(
            f'SELECT embedding FROM "{schema}".turnledger_memories WHERE key = %s',
            (key,),
        ).fetchone()
    return vector


class Counting(HashingEmbedder):
    """Counts the texts it embeds; ``during`` runs inside each call."""

    def __init__(self, during=None):
        super().__init__()
        self.texts = 0
        self.during = during

    def embed(self, texts):
        self.texts += len(texts)
        if self.during is not None:
            self.during()
        return super().embed(texts)


def test_a_write_computes_no_vector_and_is_found_by_keywords(postgres_url):
    """The row commits without a vector; keywords find it until it has one."""
    embedder = Counting()
    memory = PostgresMemory(
        postgres_url, embedder=embedder, vectors="array", background_vectors=False
    )
    try:
        put(memory, "ride", "car")
        put(memory, "lunch", "noon")
        assert embedder.texts == 0  # nothing embedded on the write path
        assert memory.pending_vectors == 2
        assert keys(memory.recall("car", agents=["alice"])) == ["ride"]
        assert embedder.texts == 1  # the query alone
        assert memory.embed_pending() == 2
        assert embedder.texts == 3  # both rows, in one batch
        assert memory.pending_vectors == 0
        put(memory, "ride", "car")  # the same content keeps its vector
        assert memory.pending_vectors == 0
        put(memory, "ride", "bicycle")  # new content waits for a new one
        assert memory.pending_vectors == 1
        assert stored_vector(postgres_url, "ride") is None
    finally:
        memory.close()


def test_the_background_thread_embeds_after_the_writes(postgres_url):
    memory = PostgresMemory(postgres_url, embedder=HashingEmbedder(), vectors="array")
    try:
        for n in range(70):  # more than one batch
            put(memory, f"k{n}", f"garden note {n}")
        deadline = time.monotonic() + 30  # a hang guard, not a bound
        while memory.pending_vectors and time.monotonic() < deadline:
            time.sleep(0.02)
        assert memory.pending_vectors == 0
        assert memory.embedding_failures == 0
    finally:
        memory.close()


def test_a_row_rewritten_while_it_is_embedded_keeps_no_stale_vector(postgres_url):
    memory: PostgresMemory | None = None

    def rewrite():
        put(memory, "ride", "bicycle")  # lands between the read and the update

    embedder = Counting(during=rewrite)
    memory = PostgresMemory(
        postgres_url, embedder=embedder, vectors="array", background_vectors=False
    )
    try:
        put(memory, "ride", "car")
        assert memory.embed_pending() == 0  # the vector of "car" was not written
        assert stored_vector(postgres_url, "ride") is None
        embedder.during = None
        assert memory.embed_pending() == 1  # now "bicycle"'s
        expected = HashingEmbedder().embed(["bicycle"])[0]
        vector = np.array(stored_vector(postgres_url, "ride"))
        assert vector == pytest.approx(np.array(expected) / np.linalg.norm(expected))
    finally:
        memory.close()


def test_close_drains_and_a_failing_embedder_is_recorded(postgres_url):
    broken = PostgresMemory(
        postgres_url, embedder=Broken(), vectors="array", background_vectors=False
    )
    put(broken, "editor", "Helix")
    broken.close()  # its drain fails: recorded, never raised
    assert broken.embedding_failures >= 1
    assert "embedding service down" in (broken.last_embedding_error or "")
    assert stored_vector(postgres_url, "editor") is None
    fixed = PostgresMemory(
        postgres_url,
        embedder=HashingEmbedder(),
        vectors="array",
        background_vectors=False,
    )
    fixed.close()  # the drain at close embeds what was left
    assert len(stored_vector(postgres_url, "editor")) == 256


class Broken(HashingEmbedder):
    def embed(self, texts):
        raise EmbedderError("embedding service down")


def test_failing_embedder_degrades_to_keywords(postgres_url):
    """An embedder error stores the row without a vector and recalls by keyword."""
    memory = PostgresMemory(postgres_url, embedder=Broken(), vectors="array")
    try:
        put(memory, "editor", "Helix")
        assert keys(memory.recall("helix", agents=["alice"])) == ["editor"]
    finally:
        memory.close()


def test_apply_is_one_transaction(keyword_memory):
    """A failing event rolls back the batch's effects and its position."""
    stream = UUID("00000000-0000-4000-8000-0000000000cc")

    def rec(position, content):
        return Recorded(
            stream_id=stream,
            version=position,
            position=position,
            recorded_at=T0,
            event=MemoryStored(agent="alice", key=f"k{position}", content=content),
        )

    with pytest.raises(MemoryStoreError, match="NUL"):
        keyword_memory.apply([rec(1, "fine"), rec(2, "nul \x00 byte")], 2)
    assert keyword_memory.applied_position() == 0
    assert keyword_memory.count(agents=["alice"]) == 0
    keyword_memory.apply([rec(1, "fine")], 1)
    assert keyword_memory.applied_position() == 1
    assert keyword_memory.count(agents=["alice"]) == 1


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("mysql://h/db", "Expected a postgresql:// URL, found scheme 'mysql'"),
        ("postgresql://h/db?schema=a;b", "found 'a;b'"),
    ],
)
def test_bad_urls_are_refused(url, message):
    """Only postgresql:// URLs with an identifier schema are accepted."""
    with pytest.raises(ValueError, match=re.escape(message)):
        split_url(url)


def test_split_url_keeps_other_parameters():
    """schema= is taken out; other connection parameters stay."""
    assert split_url("postgresql://u@h:5/db?sslmode=disable&schema=s1") == (
        "postgresql://u@h:5/db?sslmode=disable",
        "s1",
    )


def test_no_embedder_dimensions_means_keyword_only(postgres_url):
    """An embedder of dimension 0 (NoEmbedder) leaves recall keyword-only."""
    memory = PostgresMemory(postgres_url, embedder=NoEmbedder())
    try:
        assert memory.capabilities.vectors is False
        put(memory, "editor", "Helix")
        found = memory.recall("helix", agents=["alice"])
        alone = keyword_score({"helix": 1.0}, {"helix": 1}, len(["editor", "helix"]))
        assert [e.score for e in found] == [pytest.approx(alone)]
    finally:
        memory.close()


@gate_cases
def test_the_keyword_gate_is_sqlites(keyword_memory, texts, query):
    """Without vectors, PostgreSQL scores each row as SQLite does (same rows,
    same query: the IDF-weighted share of the query's words, the small-scope
    allowances, the other subjects)."""
    agent = f"gate-{uuid.uuid4().hex}"  # a fresh scope for every example
    assert_scores_are_sqlites(keyword_memory, texts, query, agent)


def test_a_question_about_two_subjects_injects_both(keyword_memory):
    """As on SQLite: each subject's entry answers its half of the question."""
    for i, text in enumerate(FILLER):
        put(keyword_memory, f"f{i}", text, agent="ops")
    put(keyword_memory, "editor", "Helix is my editor", agent="ops")
    put(keyword_memory, "shell", "fish is my login shell", agent="ops")
    shown = block(
        keyword_memory.recall("which editor and which shell do I use", agents=["ops"])
    )
    assert "editor: Helix is my editor" in shown
    assert "shell: fish is my login shell" in shown
    assert "f0" not in shown


def test_a_question_whose_rarest_word_no_row_holds_injects_nothing(postgres_url):
    """As on SQLite (:func:`assert_unheard_words_are_discounted`), the scope's
    row count read when no row holds a word of the question."""
    memory = PostgresMemory(postgres_url, embedder=StaticEmbedder(), vectors="array")
    try:
        assert_unheard_words_are_discounted(memory)
    finally:
        memory.close()


def test_a_small_store_knows_what_it_does_not_hold(keyword_memory):
    """As on SQLite: a question most of whose words no row holds injects
    nothing in a small store; a question about a row still injects it."""
    assert_a_small_store_knows_what_it_does_not_hold(keyword_memory)


def test_the_guides_editor_example_and_an_unrelated_question(keyword_memory):
    """``which editor do I use`` injects its one entry (0.35 before PostgreSQL
    took SQLite's gate); a question about nothing stored injects nothing, and
    a word most rows share is no evidence."""
    put(keyword_memory, "editor", "Helix is my editor", agent="ops")
    assert "editor: Helix is my editor" in block(
        keyword_memory.recall("which editor do I use", agents=["ops"])
    )
    for i, text in enumerate(FILLER):
        put(keyword_memory, f"f{i}", f"{text} for the team", agent="ops")
    assert block(keyword_memory.recall("weather on Mars", agents=["ops"])) == ""
    found = keyword_memory.recall("team offsite location", agents=["ops"])
    assert found
    assert block(found) == ""


def test_rows_written_before_lengths_were_stored_rank_the_same(postgres_url):
    """A table made before the ``tokens`` column gets it when opened; its rows
    (no stored length) are tokenised at recall and score as written rows do."""
    memory = PostgresMemory(postgres_url)
    try:
        put(memory, "editor", "Helix is my editor, the editor I use")
        put(memory, "shell", "fish is my login shell")
        put(memory, "both", "my editor runs in my shell")
        query = "which editor and which shell"
        written = [(e.key, e.score) for e in memory.recall(query, agents=["alice"])]
        with memory._transaction() as conn:
            conn.execute(memory._sql("ALTER TABLE {table} DROP COLUMN tokens"))
    finally:
        memory.close()
    again = PostgresMemory(postgres_url)
    try:
        with again._transaction() as conn:
            stored = conn.execute(again._sql("SELECT tokens FROM {table}")).fetchall()
        assert stored == [(None,)] * 3
        found = [(e.key, e.score) for e in again.recall(query, agents=["alice"])]
        assert found == [(k, pytest.approx(s)) for k, s in written]
        assert found[0][0] == "both"
    finally:
        again.close()
