"""Qdrant memory in local path mode: the contract with a deterministic fake
embedder, payload filters inside the query, upsert by key, no-embedder answers."""

from __future__ import annotations

import hashlib
import itertools
import re
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.contracts.memory_contract import T0, MemoryContract, keys, put
from turnledger.projections.memory.embedding import EmbeddingIdentity, NoEmbedder
from turnledger.projections.memory.protocol import NewMemory, Unsupported
from turnledger.projections.memory.qdrant import (
    NO_VECTORS_REASON,
    QdrantMemory,
    point_id,
)


class HashingEmbedder:
    """A deterministic bag-of-words embedder (hashed words, one count each)."""

    def __init__(self, dims=256, name="hashing"):
        self.identity = EmbeddingIdentity("fake", name, dims)

    def embed(self, texts):
        vectors = []
        for text in texts:
            vector = [0.0] * self.identity.dims
            for word in re.findall(r"\w+", text.lower()):
                digest = hashlib.blake2b(word.encode(), digest_size=4).digest()
                vector[int.from_bytes(digest, "big") % self.identity.dims] += 1.0
            vectors.append(vector)
        return vectors


def own_copy(test):
    """Wrap the contract's Hypothesis test afresh for this class (see markdown tests)."""
    return settings(
        max_examples=25,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )(given(data=st.data())(test.hypothesis.inner_test))


@pytest.fixture(name="qdrant_path")
def _qdrant_path(tmp_path):
    return tmp_path / "qdrant"


def open_memory(path, embedder=None):
    return QdrantMemory(path=path, embedder=embedder or HashingEmbedder())


@pytest.fixture(name="memory")
def _memory(qdrant_path):
    memory = open_memory(qdrant_path)
    yield memory
    memory.close()


@pytest.fixture(name="reopen")
def _reopen(qdrant_path):
    return lambda: open_memory(qdrant_path)


@pytest.fixture(name="memory_factory")
def _memory_factory():
    return lambda: QdrantMemory(":memory:", embedder=HashingEmbedder())


class TestQdrantMemory(MemoryContract):
    """Local path mode with the fake embedder passes the contract."""

    test_no_path_leaks_outside_the_allowlist_or_session = own_copy(
        MemoryContract.test_no_path_leaks_outside_the_allowlist_or_session
    )


def test_point_ids_are_deterministic_per_agent_and_key():
    """The same agent and key always map to the same point; agents differ."""
    assert point_id("alice", "k") == point_id("alice", "k")
    assert point_id("alice", "k") != point_id("bob", "k")
    assert point_id("a", "b\x00c") != point_id("a\x00b", "c")


def test_upsert_replaces_the_point(memory):
    """A second store of a key replaces its point: one point, new content."""
    first = put(memory, "editor", "Vim", at=T0)
    put(memory, "editor", "Helix", at=T0 + timedelta(hours=1))
    entry = memory.get("editor", agents=["alice"])
    assert (entry.content, entry.id, entry.created_at) == ("Helix", first.id, T0)
    assert memory._client.count(memory.collection).count == 1
    assert keys(memory.recall("vim", agents=["alice"])) == []


def test_filters_apply_inside_the_search(memory):
    """Agent, session and time filters shape the search, not its results."""
    for i in range(20):
        put(memory, f"theirs{i}", "deploy pipeline", agent="bob")
        put(memory, f"s2_{i}", "deploy pipeline", category="conversation", session="s2")
    put(memory, "old", "deploy pipeline", at=T0 - timedelta(days=30))
    put(memory, "mine", "deploy", category="conversation", session="s1")
    found = memory.recall(
        "deploy pipeline",
        agents=["alice"],
        session="s1",
        since=T0 - timedelta(days=1),
        limit=1,
    )
    assert keys(found) == ["mine"]
    assert 0.0 < found[0].score < 1.0


def test_scores_are_cosine_on_unit_interval(memory):
    """An identical text scores 1.0; unrelated rows are not returned."""
    put(memory, "same", "alpha beta")
    put(memory, "other", "gamma")
    found = memory.recall("same alpha beta", agents=["alice"])
    assert keys(found) == ["same"]
    assert found[0].score == pytest.approx(1.0)


def test_recent_query_is_newest_first(memory):
    """A recent query scrolls by update time, newest first, unscored."""
    put(memory, "a", "one", at=T0)
    put(memory, "b", "two", at=T0 + timedelta(minutes=2))
    put(memory, "a", "one again", at=T0 + timedelta(minutes=5))
    found = memory.recall("", agents=["alice"])
    assert keys(found) == ["a", "b"]
    assert {e.score for e in found} == {None}


def test_list_filters_category_and_session(memory):
    """list filters category and session strictly, as payload conditions."""
    put(memory, "c", "x", category="core")
    put(memory, "d", "x", category="daily", session="s1")
    put(memory, "g", "x", category="daily")
    assert keys(memory.list(agents=["alice"], category="daily", session="s1")) == ["d"]


def test_supersede_and_forget(memory):
    """A superseded point is hidden; forget removes it; a second forget is False."""
    put(memory, "old", "Paris")
    assert memory.supersede("old", agent="alice", superseded_by="e2") is True
    assert memory.supersede("old", agent="alice", superseded_by="e2") is False
    assert memory.get("old", agents=["alice"]) is None
    assert memory.count(agents=["alice"]) == 0
    assert memory.forget("old", agent="alice") is True
    assert memory.forget("old", agent="alice") is False


def test_namespace_and_importance_are_kept(memory):
    """Unlike the reference, namespace and importance survive a round trip."""
    memory.store(
        NewMemory(
            agent="alice",
            key="k",
            content="v",
            namespace="work",
            importance=0.8,
            entry_id="e1",
            at=T0,
        )
    )
    entry = memory.get("k", agents=["alice"])
    assert (entry.namespace, entry.importance) == ("work", 0.8)


@pytest.mark.parametrize("embedder", [None, NoEmbedder()])
def test_without_vectors_writes_are_unsupported(tmp_path, embedder):
    """No embedder (or dimension 0): store says why; reads find nothing."""
    memory = QdrantMemory(path=tmp_path / "q", embedder=embedder)
    try:
        result = put(memory, "k", "v")
        assert result == Unsupported(
            operation="store", backend="qdrant", reason=NO_VECTORS_REASON
        )
        assert not memory.capabilities.stores
        assert not memory.capabilities.keyword
        assert memory.recall("v", agents=["alice"]) == []
        assert memory.count(agents=["alice"]) == 0
    finally:
        memory.close()


def test_reads_work_without_an_embedder_on_stored_points(qdrant_path):
    """Points stored earlier can be listed and fetched without an embedder."""
    first = open_memory(qdrant_path)
    put(first, "k", "kept")
    first.close()
    reader = QdrantMemory(path=qdrant_path)
    try:
        assert reader.get("k", agents=["alice"]).content == "kept"
        assert keys(reader.recall("*", agents=["alice"])) == ["k"]
        assert reader.recall("kept", agents=["alice"]) == []
    finally:
        reader.close()


def test_another_embedder_identity_is_refused(qdrant_path):
    """Vectors of two embedders never mix: reopening with another one fails."""
    open_memory(qdrant_path).close()
    with pytest.raises(ValueError, match="rebuild it from the ledger"):
        open_memory(qdrant_path, HashingEmbedder(dims=64, name="other"))


def test_position_survives_reopen(qdrant_path):
    """The applied position lives in the side collection."""
    memory = open_memory(qdrant_path)
    memory.apply([], 7)
    memory.close()
    again = open_memory(qdrant_path)
    try:
        assert again.applied_position() == 7
    finally:
        again.close()


def test_purge_session_counts_its_points(memory):
    """purge_session deletes the agent's points of that session and counts them."""
    counter = itertools.count()
    for agent, session in [
        ("alice", "s1"),
        ("alice", "s1"),
        ("alice", "s2"),
        ("bob", "s1"),
    ]:
        put(
            memory,
            f"k{next(counter)}",
            "x",
            agent=agent,
            category="conversation",
            session=session,
        )
    assert memory.purge_session("s1", agent="alice") == 2
    assert memory.count(agents=["alice", "bob"]) == 2


def test_in_memory_location_is_not_persistent():
    """The default location is :memory:, declared non-persistent."""
    memory = QdrantMemory(embedder=HashingEmbedder())
    try:
        assert memory.capabilities.persistent is False
        assert memory.health() is True
    finally:
        memory.close()
