"""Agent scope: allowlists, intersection, write/forget rules (§3)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from turnledger.policies.recall_scope import RecallCandidate
from turnledger.policies.scoping import (
    AccessDecision,
    AgentMemoryConfig,
    AgentScope,
    ScopeConfigError,
    build_agent_scope,
    check_forget,
    merge_agent_recall,
    normalize_backend,
    recall_agents,
)

AGENTS = {
    "main": AgentMemoryConfig(backend="sqlite", read_memory_from=("research", "ops")),
    "research": AgentMemoryConfig(backend="SQLITE.default"),
    "ops": AgentMemoryConfig(),
    "notes": AgentMemoryConfig(backend="markdown"),
    "other": AgentMemoryConfig(),
}
SCOPE = build_agent_scope("main", AGENTS)


class TestConfiguration:
    def test_allowlist_is_own_then_peers(self):
        """The allowlist is the agent, then its peers in configured order."""
        expected = AgentScope(
            agent="main", backend="sqlite.default", allowed=("main", "research", "ops")
        )
        assert expected == SCOPE

    def test_duplicate_peers_collapse(self):
        """A peer listed twice appears once."""
        agents = AGENTS | {"main": AgentMemoryConfig(read_memory_from=("ops", "ops"))}
        assert build_agent_scope("main", agents).allowed == ("main", "ops")

    @pytest.mark.parametrize(
        ("ref", "normalized"),
        [
            ("sqlite", "sqlite.default"),
            (" Postgres.shared ", "postgres.shared"),
            ("none.", "none.default"),
        ],
    )
    def test_normalize_backend(self, ref, normalized):
        """Bare kinds get the default alias; kinds are case-insensitive."""
        assert normalize_backend(ref) == normalized

    @pytest.mark.parametrize(
        ("agents", "agent", "message"),
        [
            (AGENTS, "ghost", "Expected a configured agent, found 'ghost'"),
            (
                {"a": AgentMemoryConfig(read_memory_from=("a",))},
                "a",
                "Agent 'a' lists itself in read_memory_from",
            ),
            (
                {"a": AgentMemoryConfig(read_memory_from=("b",))},
                "a",
                "Agent 'a' reads memory from 'b'; expected a configured agent",
            ),
            (
                {
                    "a": AgentMemoryConfig(read_memory_from=("b",)),
                    "b": AgentMemoryConfig(backend="markdown"),
                },
                "a",
                (
                    "Agent 'a' \\(backend 'sqlite.default'\\) reads memory from 'b' "
                    "\\(backend 'markdown.default'\\); expected the same backend"
                ),
            ),
            (
                {
                    "a": AgentMemoryConfig(
                        backend="postgres.x", read_memory_from=("b",)
                    ),
                    "b": AgentMemoryConfig(backend="postgres.y"),
                },
                "a",
                "expected the same backend",
            ),
            (
                {"a": AgentMemoryConfig(backend="redis")},
                "a",
                "Expected a memory backend kind in .*, found 'redis'",
            ),
            (
                {
                    "a": AgentMemoryConfig(backend="none", read_memory_from=("b",)),
                    "b": AgentMemoryConfig(backend="none"),
                },
                "a",
                (
                    "uses the 'none' backend, which stores nothing; expected no "
                    "read_memory_from peers, found \\['b'\\]"
                ),
            ),
        ],
    )
    def test_configuration_errors(self, agents, agent, message):
        """Bad configurations are typed errors naming expected and found."""
        with pytest.raises(ScopeConfigError, match=message):
            build_agent_scope(agent, agents)


class TestRecallAgents:
    @pytest.mark.parametrize(
        ("requested", "expected"),
        [
            (None, ("main", "research", "ops")),
            ([], ("main", "research", "ops")),
            (["ops", "main"], ("main", "ops")),
            (["other", "notes"], ()),
            (["ops", "intruder"], ("ops",)),
        ],
    )
    def test_intersection_never_widens(self, requested, expected):
        """A caller's list narrows the allowlist and never adds to it."""
        assert recall_agents(SCOPE, requested) == expected

    @settings(max_examples=100)
    @given(
        st.lists(st.sampled_from(["a", "b", "c", "d", "e"]), max_size=4, unique=True),
        st.sampled_from(["a", "b", "c", "d", "e"]),
        st.one_of(st.none(), st.lists(st.text(alphabet="abcdefz", max_size=2))),
    )
    def test_never_outside_the_allowlist(self, peers, agent, requested):
        """The intersection is always a subset of own + peers."""
        agents = {name: AgentMemoryConfig() for name in "abcde"}
        agents[agent] = AgentMemoryConfig(
            read_memory_from=tuple(p for p in peers if p != agent)
        )
        scope = build_agent_scope(agent, agents)
        chosen = recall_agents(scope, requested)
        assert set(chosen) <= {agent, *peers}
        assert set(chosen) <= set(scope.allowed)
        if requested:
            assert set(chosen) <= set(requested)


class TestAccessDecisions:
    @pytest.mark.parametrize(
        ("owner", "allowed", "reason"),
        [
            ("main", True, "own"),
            ("research", False, "cross_agent"),
            ("other", False, "cross_agent"),
            (None, False, "unattributed"),
        ],
    )
    def test_read_never_implies_delete(self, owner, allowed, reason):
        """Only own rows may be forgotten, even allowlisted peers' are refused."""
        decision = check_forget(SCOPE, owner)
        assert (decision.allowed, decision.reason) == (allowed, reason)

    def test_forget_detail(self):
        """A refusal names both agents."""
        assert check_forget(SCOPE, "ops") == AccessDecision(
            allowed=False,
            reason="cross_agent",
            detail="'main' refuses to forget a row of 'ops'",
        )


def _row(key, score, agent=None):
    return RecallCandidate(
        id=key, key=key, content="c", category="core", score=score, agent=agent
    )


class TestMergeAgentRecall:
    def test_sorted_by_score_peer_keys_prefixed(self):
        """A strong peer row beats a weak own row (fixes the Markdown quirk)."""
        merged = merge_agent_recall(
            SCOPE,
            [
                ("main", [_row("weak", 0.2), _row("unscored", None)]),
                ("research", [_row("strong", 0.9), _row("nan", float("nan"))]),
                ("other", [_row("leak", 1.0)]),
            ],
            limit=10,
        )
        assert [(r.key, r.agent) for r in merged] == [
            ("[research] strong", "research"),
            ("weak", "main"),
            ("unscored", "main"),
            ("[research] nan", "research"),
        ]

    def test_limit_applies_after_sorting(self):
        """The limit keeps the best rows across agents."""
        merged = merge_agent_recall(
            SCOPE,
            [("main", [_row("a", 0.1), _row("b", 0.2)]), ("ops", [_row("c", 0.3)])],
            limit=2,
        )
        assert [r.key for r in merged] == ["[ops] c", "b"]
