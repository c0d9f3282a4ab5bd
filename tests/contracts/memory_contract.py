"""The long-term memory contract, run against every backend.

A backend's test module subclasses :class:`MemoryContract` and provides two
fixtures: ``memory`` (a fresh, empty backend) and ``reopen`` (a callable giving a
new handle on the same data, for persistence checks). Expectations that depend on
what a backend can do read ``memory.capabilities``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import count

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from turnledger.projections.memory.protocol import MemoryBackend, NewMemory, Unsupported

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
_ids = count(1)


def put(
    memory: MemoryBackend,
    key: str,
    content: str,
    *,
    agent: str = "alice",
    category: str = "core",
    session: str | None = None,
    at: datetime = T0,
    namespace: str = "default",
):
    return memory.store(
        NewMemory(
            agent=agent,
            key=key,
            content=content,
            category=category,
            session=session,
            namespace=namespace,
            entry_id=f"e{next(_ids)}",
            at=at,
        )
    )


def keys(entries) -> list[str]:
    return [e.key for e in entries]


def stores(memory: MemoryBackend) -> bool:
    return memory.capabilities.stores


class MemoryContract:
    """Behaviour every memory backend shows (by its declared capabilities)."""

    def test_declares_its_name_and_capabilities(self, memory: MemoryBackend):
        """A backend says what it is and what it can do."""
        assert memory.name in {
            "sqlite",
            "markdown",
            "postgres",
            "qdrant",
            "lucid",
            "none",
        }
        assert memory.health() is True

    def test_store_then_get(self, memory: MemoryBackend):
        """A stored entry can be read back by key, attributed to its agent."""
        result = put(memory, "editor", "Helix is my editor")
        if not stores(memory):
            assert isinstance(result, Unsupported)
            assert memory.get("editor", agents=["alice"]) is None
            return
        entry = memory.get("editor", agents=["alice"])
        assert entry is not None
        assert entry.content == "Helix is my editor"
        assert entry.agent == "alice"
        assert entry.category == "core"
        assert memory.count(agents=["alice"]) == 1

    def test_upsert_per_agent_and_key(self, memory: MemoryBackend):
        """Storing a key again replaces the content; other agents' keys are distinct."""
        if not stores(memory) or memory.capabilities.append_only:
            pytest.skip("no upsert semantics")
        first = put(memory, "editor", "Vim", at=T0)
        put(memory, "editor", "Helix", at=T0 + timedelta(hours=1))
        put(memory, "editor", "Emacs", agent="bob")
        entry = memory.get("editor", agents=["alice"])
        assert entry.content == "Helix"
        assert entry.id == first.id
        assert entry.created_at == T0
        assert entry.updated_at == T0 + timedelta(hours=1)
        assert memory.get("editor", agents=["bob"]).content == "Emacs"
        assert memory.count(agents=["alice"]) == 1
        assert memory.count(agents=["alice", "bob"]) == 2

    def test_keyword_recall_finds_best_first(self, memory: MemoryBackend):
        """A keyword query returns matching rows, best first, scores on [0, 1].

        The order is the backend's ranking; the score is what the relevance
        floor is compared to, which need not follow it (SQLite ranks by BM25
        and scores by query coverage).
        """
        if not stores(memory):
            assert memory.recall("editor", agents=["alice"]) == []
            return
        put(memory, "editor", "my favourite editor is Helix, the modal editor")
        put(memory, "lunch", "lunch is at noon")
        put(memory, "tools", "the editor config lives in dotfiles")
        found = memory.recall("editor", agents=["alice"], limit=5)
        assert set(keys(found)) >= {"editor", "tools"}
        assert "lunch" not in keys(found)
        assert keys(found)[0] == "editor"  # the word twice, in a short row
        scores = [e.score for e in found]
        assert all(s is not None and 0.0 <= s <= 1.0 for s in scores)

    @pytest.mark.parametrize("query", ["what is it", "is my", "a", "the of and", "x y"])
    def test_stop_word_and_short_queries_match_nothing(
        self, memory: MemoryBackend, query: str
    ):
        """A query of stop words or one-letter words recalls nothing at all."""
        put(memory, "release_day", "the release is on Friday, it is my call")
        put(memory, "x", "a b c x y is it")
        assert memory.recall(query, agents=["alice"], limit=5) == []

    def test_scores_do_not_depend_on_the_batch(self, memory: MemoryBackend):
        """A partial match is not promoted to 1.0 because nothing better was found.

        The issue's example: "what is the weather like on Mars" must not give
        ``release_day`` a passing score just because it is the best of a batch.
        """
        if not memory.capabilities.keyword:
            return
        put(memory, "release_day", "the release of the rover is on Friday")
        put(memory, "mars", "Mars weather: cold and dusty")
        alone = memory.recall("rover release schedule mars weather", agents=["alice"])
        found = {e.key: e.score for e in alone}
        assert found, "both rows share words with the query"
        assert all(s is not None and s < 1.0 for s in found.values())
        partial = memory.recall("rover release", agents=["alice"])
        assert keys(partial)[0] == "release_day"

    def test_recent_query_lists_newest_unscored(self, memory: MemoryBackend):
        """An empty or '*' query returns the newest rows."""
        if not stores(memory):
            return
        put(memory, "a", "first fact", at=T0)
        put(memory, "b", "second fact", at=T0 + timedelta(minutes=5))
        for query in ("", "*", "  "):
            found = memory.recall(query, agents=["alice"], limit=10)
            assert set(keys(found)) == {"a", "b"}

    def test_disallowed_matches_never_hide_an_allowed_row(self, memory: MemoryBackend):
        """12 disallowed matches must not hide 1 allowed row at limit 1."""
        if not stores(memory):
            return
        for i in range(12):
            put(
                memory,
                f"intruder{i}",
                "deploy deploy deploy pipeline",
                agent=f"other{i}",
            )
        put(memory, "mine", "deploy notes", agent="alice")
        found = memory.recall("deploy", agents=["alice"], limit=1)
        assert keys(found) == ["mine"]
        assert all(e.agent == "alice" for e in memory.list(agents=["alice"]))

    def test_other_sessions_are_invisible_but_durable_facts_cross(
        self, memory: MemoryBackend
    ):
        """A session sees its rows and global core/daily facts, never other sessions'."""
        if not stores(memory) or not memory.capabilities.sessions:
            pytest.skip("sessions are not kept")
        put(
            memory,
            "s1_note",
            "project alpha deadline",
            category="conversation",
            session="s1",
        )
        put(
            memory,
            "s2_note",
            "project alpha budget",
            category="conversation",
            session="s2",
        )
        put(memory, "global_fact", "project alpha is written in Rust", category="core")
        put(memory, "global_chat", "project alpha chatter", category="conversation")
        found = keys(
            memory.recall("project alpha", agents=["alice"], session="s1", limit=10)
        )
        assert "s1_note" in found
        assert "global_fact" in found
        assert "s2_note" not in found
        assert "global_chat" not in found
        recent = keys(memory.recall("", agents=["alice"], session="s1", limit=10))
        assert "s2_note" not in recent
        assert "global_fact" in recent

    def test_time_window(self, memory: MemoryBackend):
        """since/until bound recall by creation time (inclusive)."""
        if not stores(memory) or not memory.capabilities.time_filter:
            pytest.skip("no time filter")
        put(memory, "old", "release notes old", at=T0 - timedelta(days=10))
        put(memory, "new", "release notes new", at=T0)
        found = memory.recall("release", agents=["alice"], since=T0 - timedelta(days=1))
        assert keys(found) == ["new"]
        found = memory.recall("release", agents=["alice"], until=T0 - timedelta(days=1))
        assert keys(found) == ["old"]

    @pytest.mark.parametrize(
        "query",
        [
            '"',
            "AND",
            "OR NOT",
            "NEAR(",
            "a:b",
            "'; DROP TABLE memories; --",
            "-x",
            "(",
            "* *",
            "^",
            "\\",
            "%_",
            "🙂",
            "col:val*",
        ],
    )
    def test_odd_queries_never_error(self, memory: MemoryBackend, query: str):
        """Operators, quotes and SQL text in a query are searched for, never executed."""
        put(memory, "k", "plain content")
        assert isinstance(memory.recall(query, agents=["alice"]), list)
        assert memory.count(agents=["alice"]) == (1 if stores(memory) else 0)

    def test_list_filters(self, memory: MemoryBackend):
        """list filters by category and (strictly) by session."""
        if not stores(memory):
            assert memory.list(agents=["alice"]) == []
            return
        put(memory, "c", "core fact", category="core")
        put(memory, "d", "daily log", category="daily", session="s1")
        assert {e.key for e in memory.list(agents=["alice"])} == {"c", "d"}
        if memory.capabilities.categories:
            assert keys(memory.list(agents=["alice"], category="core")) == ["c"]
        if memory.capabilities.sessions:
            assert keys(memory.list(agents=["alice"], session="s1")) == ["d"]

    def test_forget(self, memory: MemoryBackend):
        """forget removes the agent's own row; append-only stores say they cannot."""
        put(memory, "k", "secret plan")
        put(memory, "k", "bob's plan", agent="bob")
        result = memory.forget("k", agent="alice")
        if memory.capabilities.redacts and stores(memory):
            assert result is True  # the key's records are rewritten as forgotten
            assert memory.get("k", agents=["alice"]) is None
            assert "k" not in keys(memory.recall("secret plan", agents=["alice"]))
            assert memory.forget("k", agent="alice") is False
            return
        if memory.capabilities.append_only or not stores(memory):
            assert isinstance(result, Unsupported)
            assert result.operation == "forget"
            assert result.reason
            return
        assert result is True
        assert memory.get("k", agents=["alice"]) is None
        assert memory.get("k", agents=["bob"]).content == "bob's plan"
        assert memory.forget("k", agent="alice") is False
        assert "k" not in keys(memory.recall("secret plan", agents=["alice"]))

    def test_supersede_hides_the_row(self, memory: MemoryBackend):
        """A superseded row no longer surfaces in recall or list."""
        put(memory, "old_fact", "the office is in Paris")
        put(memory, "new_fact", "the office is in Lyon")
        result = memory.supersede("old_fact", agent="alice", superseded_by="new_fact")
        if isinstance(result, Unsupported):
            assert result.operation == "supersede"
            return
        assert "old_fact" not in keys(memory.recall("office", agents=["alice"]))
        assert "old_fact" not in keys(memory.list(agents=["alice"]))

    def test_purge_session(self, memory: MemoryBackend):
        """purge_session removes only that agent's rows of that session."""
        put(memory, "a", "x one", category="conversation", session="s1")
        put(memory, "b", "x two", category="conversation", session="s2")
        put(memory, "c", "x three", category="conversation", session="s1", agent="bob")
        result = memory.purge_session("s1", agent="alice")
        if not memory.capabilities.purge_session or not stores(memory):
            assert isinstance(result, Unsupported)
            return
        assert result == 1
        assert keys(memory.list(agents=["alice"])) == ["b"]
        assert keys(memory.list(agents=["bob"])) == ["c"]

    def test_export_filters(self, memory: MemoryBackend):
        """export returns live rows matching the filters."""
        if not stores(memory):
            assert memory.export(agents=["alice"]) == []
            return
        put(memory, "a", "x", category="core", at=T0)
        put(memory, "b", "y", category="daily", at=T0 + timedelta(days=1))
        put(memory, "z", "other agent", agent="bob")
        assert set(keys(memory.export(agents=["alice"]))) == {"a", "b"}
        if memory.capabilities.time_filter:
            assert keys(
                memory.export(agents=["alice"], since=T0 + timedelta(hours=1))
            ) == ["b"]

    def test_empty_allowlist_sees_nothing(self, memory: MemoryBackend):
        """An empty agent list is no agent, never every agent."""
        put(memory, "k", "visible?")
        assert memory.recall("visible", agents=[]) == []
        assert memory.list(agents=[]) == []
        assert memory.get("k", agents=[]) is None
        assert memory.count(agents=[]) == 0

    def test_persists_across_handles(self, memory: MemoryBackend, reopen):
        """What was stored is there for a new handle (when the backend persists)."""
        put(memory, "k", "durable content")
        memory.close()
        again = reopen()
        try:
            expected = 1 if (stores(memory) and memory.capabilities.persistent) else 0
            assert again.count(agents=["alice"]) == expected
        finally:
            again.close()

    @settings(
        max_examples=25,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(data=st.data())
    def test_no_path_leaks_outside_the_allowlist_or_session(self, memory_factory, data):
        """For random rows, allowlists, sessions and queries, nothing leaks."""
        memory = memory_factory()
        try:
            agents = ["a1", "a2", "a3", "a4"]
            words = ["alpha", "beta", "gamma", "delta"]
            rows = data.draw(
                st.lists(
                    st.tuples(
                        st.sampled_from(agents),
                        st.sampled_from(words),
                        st.sampled_from(["core", "daily", "conversation"]),
                        st.sampled_from([None, "s1", "s2"]),
                    ),
                    max_size=12,
                )
            )
            for i, (agent, word, category, session) in enumerate(rows):
                put(
                    memory,
                    f"k{i}",
                    f"{word} note {i}",
                    agent=agent,
                    category=category,
                    session=session,
                )
            allowed = data.draw(
                st.lists(st.sampled_from(agents), unique=True, max_size=3)
            )
            session = data.draw(st.sampled_from([None, "s1", "s2"]))
            query = data.draw(st.sampled_from([*words, "", "note"]))
            limit = data.draw(st.integers(1, 20))
            paths = [
                memory.recall(query, agents=allowed, session=session, limit=limit),
                memory.list(agents=allowed),
                memory.export(agents=allowed),
                [
                    e
                    for i in range(len(rows))
                    if (e := memory.get(f"k{i}", agents=allowed))
                ],
            ]
            for entries in paths:
                assert all(e.agent in allowed for e in entries)
            if session is not None and memory.capabilities.sessions:
                for entry in paths[0]:
                    assert entry.session in (session, None)
                    if entry.session is None:
                        assert entry.category in ("core", "daily")
        finally:
            memory.close()

    def test_apply_events_exactly_once(self, memory: MemoryBackend):
        """Memory events applied twice (a crash before tracking) count once."""
        from uuid import UUID

        from turnledger.ledger.envelope import Recorded
        from turnledger.ledger.events import MemoryForgotten, MemoryStored

        stream = UUID("00000000-0000-4000-8000-0000000000aa")

        def rec(position, event):
            return Recorded(
                stream_id=stream,
                version=position,
                position=position,
                recorded_at=T0,
                event=event,
            )

        stored = rec(
            1,
            MemoryStored(
                agent="alice", key="k", content="applied once", entry_id="ev1"
            ),
        )
        memory.apply([stored], 1)
        memory.apply([stored], 1)
        assert memory.applied_position() == 1
        expected = 1 if stores(memory) else 0
        assert memory.count(agents=["alice"]) == expected
        assert len(memory.recall("applied", agents=["alice"])) == expected
        memory.apply([rec(2, MemoryForgotten(agent="alice", key="k"))], 2)
        assert memory.applied_position() == 2
        if stores(memory) and not memory.capabilities.append_only:
            assert memory.count(agents=["alice"]) == 0
