"""The agent-scoped adapter: reads span the allowlist (narrowed, never widened);
writes, forgets and purges touch only the bound agent's rows (§3)."""

from __future__ import annotations

import itertools

import pytest

from tests.contracts.memory_contract import T0, keys
from turnledger.policies.scoping import AgentMemoryConfig, build_agent_scope
from turnledger.projections.memory.protocol import MemoryBackend, NewMemory
from turnledger.projections.memory.scoped import AgentScopedMemory, ScopeViolationError
from turnledger.projections.memory.sqlite import SQLiteMemory

AGENTS = {
    "alice": AgentMemoryConfig(read_memory_from=("bob",)),
    "bob": AgentMemoryConfig(),
    "mallory": AgentMemoryConfig(),
}
_ids = itertools.count(1)


def new(key, content, *, agent="alice", category="core", session=None):
    return NewMemory(
        agent=agent,
        key=key,
        content=content,
        category=category,
        session=session,
        entry_id=f"s{next(_ids)}",
        at=T0,
    )


@pytest.fixture(name="shared")
def _shared():
    backend = SQLiteMemory(":memory:")
    yield backend
    backend.close()


@pytest.fixture(name="alice")
def _alice(shared):
    return AgentScopedMemory(shared, build_agent_scope("alice", AGENTS))


def test_is_a_memory_backend(alice):
    """The adapter can stand where a backend is expected."""
    backend: MemoryBackend = alice
    assert backend.name == "sqlite"
    assert alice.agent == "alice"


def test_twelve_disallowed_matches_do_not_hide_the_allowed_row(shared, alice):
    """12 disallowed matches must not hide 1 allowed row at limit 1."""
    for i in range(12):
        shared.store(
            new(
                f"intruder{i}",
                "deploy deploy deploy pipeline",
                agent="mallory" if i % 2 else f"x{i}",
            )
        )
    shared.store(new("mine", "deploy notes"))
    assert keys(alice.recall("deploy", limit=1)) == ["mine"]


def test_peers_are_read_and_ranked_with_own_rows(shared, alice):
    """A strong peer row beats a weak own row (one ranked query, no concatenation)."""
    shared.store(new("weak", "release notes and many unrelated words in a long line"))
    shared.store(new("strong", "release release release", agent="bob"))
    shared.store(new("hidden", "release release release release", agent="mallory"))
    found = alice.recall("release")
    assert keys(found) == ["strong", "weak"]
    assert [e.agent for e in found] == ["bob", "alice"]


def test_caller_lists_intersect_never_widen(shared, alice):
    """A caller's list narrows the allowlist; outsiders are dropped, not added."""
    shared.store(new("a", "shared word", agent="alice"))
    shared.store(new("b", "shared word", agent="bob"))
    shared.store(new("m", "shared word", agent="mallory"))
    assert set(keys(alice.recall("shared"))) == {"a", "b"}
    assert set(keys(alice.recall("shared", agents=[]))) == {"a", "b"}
    assert keys(alice.recall("shared", agents=["bob", "mallory"])) == ["b"]
    assert alice.recall("shared", agents=["mallory"]) == []
    assert alice.list(agents=["mallory"]) == []
    assert alice.export(agents=["mallory"]) == []
    assert alice.count(agents=["mallory"]) == 0
    assert alice.get("m", agents=["mallory"]) is None
    assert alice.get("m") is None
    assert alice.count() == 2
    assert {e.key for e in alice.list()} == {"a", "b"}
    assert {e.key for e in alice.export(agents=["bob"])} == {"b"}


def test_get_prefers_own_row_then_peers(shared, alice):
    """The same key: own row first; a peer's when there is no own row."""
    shared.store(new("editor", "bob uses vim", agent="bob"))
    assert alice.get("editor").agent == "bob"
    shared.store(new("editor", "alice uses helix"))
    assert alice.get("editor").content == "alice uses helix"


def test_foreign_writes_are_refused(shared, alice):
    """Writing as another agent (a peer included) raises; nothing is stored."""
    for other in ("bob", "mallory"):
        with pytest.raises(ScopeViolationError) as refused:
            alice.store(new("k", "v", agent=other))
        assert refused.value.decision.reason == "foreign_agent"
        assert str(refused.value) == (
            f"'alice' refuses to write as foreign agent '{other}'"
        )
    assert shared.count(agents=["alice", "bob", "mallory"]) == 0
    assert alice.store(new("k", "v")).agent == "alice"


def test_cross_agent_forgets_are_refused(shared, alice):
    """Forgetting a peer's row raises (read is not delete); own rows go."""
    shared.store(new("k", "bob's row", agent="bob"))
    with pytest.raises(ScopeViolationError) as refused:
        alice.forget("k")
    assert refused.value.decision.reason == "cross_agent"
    assert str(refused.value) == "'alice' refuses to forget a row of 'bob'"
    with pytest.raises(ScopeViolationError):
        alice.forget("k", agent="bob")
    assert shared.get("k", agents=["bob"]) is not None
    shared.store(new("k", "alice's row"))
    assert alice.forget("k") is True
    assert shared.get("k", agents=["bob"]).content == "bob's row"


def test_outsider_rows_are_not_revealed(shared, alice):
    """A non-allowlisted agent's key answers False, as a missing key does."""
    shared.store(new("secret", "mallory's", agent="mallory"))
    assert alice.forget("secret") is False
    assert alice.forget("missing") is False
    assert shared.get("secret", agents=["mallory"]) is not None


def test_supersede_only_own_rows(shared, alice):
    """Superseding a peer's row raises; own rows are hidden."""
    shared.store(new("fact", "peer fact", agent="bob"))
    with pytest.raises(ScopeViolationError):
        alice.supersede("fact", superseded_by="newer")
    shared.store(new("fact", "own fact"))
    assert alice.supersede("fact", superseded_by="newer") is True
    assert alice.get("fact").agent == "bob"


def test_purge_session_only_own_rows(shared, alice):
    """A session purge deletes the bound agent's rows of it, never a peer's."""
    shared.store(new("a", "x", category="conversation", session="s1"))
    shared.store(new("b", "x", category="conversation", session="s1", agent="bob"))
    assert alice.purge_session("s1") == 1
    with pytest.raises(ScopeViolationError):
        alice.purge_session("s1", agent="bob")
    assert keys(shared.list(agents=["bob"])) == ["b"]


def test_sessions_pass_through(shared, alice):
    """Session filters reach the backend: another session stays invisible."""
    shared.store(new("s1", "plan a", category="conversation", session="s1"))
    shared.store(
        new("s2", "plan b", category="conversation", session="s2", agent="bob")
    )
    assert keys(alice.recall("plan", session="s1")) == ["s1"]


def test_apply_goes_through_an_admin_handle(alice, shared):
    """The adapter never applies ledger events (they span agents)."""
    with pytest.raises(ScopeViolationError) as refused:
        alice.apply([], 1)
    assert refused.value.decision.reason == "admin_only"
    assert alice.applied_position() == 0
    assert alice.health() is True
    alice.close()
    assert shared.health() is True


def test_an_agent_without_peers_sees_only_itself(shared):
    """bob has no peers: alice's rows are invisible to him."""
    bob = AgentScopedMemory(shared, build_agent_scope("bob", AGENTS))
    shared.store(new("a", "note", agent="alice"))
    shared.store(new("b", "note", agent="bob"))
    assert keys(bob.recall("note")) == ["b"]
    assert bob.recall("note", agents=["alice"]) == []
