"""Markdown memory: the contract, the file layout and line format, append-only
answers, idempotent apply and peers merged by score."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from uuid import UUID

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.contracts.keyword_gate import assert_scores_are_sqlites, gate_cases
from tests.contracts.memory_contract import T0, MemoryContract, keys
from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import MemoryForgotten, MemoryStored
from turnledger.policies.relevance import scope_scores
from turnledger.projections.memory.markdown import (
    APPEND_ONLY_REASON,
    MarkdownMemory,
    format_line,
    parse_line,
)
from turnledger.projections.memory.markdown.peers import MarkdownPeers
from turnledger.projections.memory.protocol import NewMemory, Unsupported

STREAM = UUID("00000000-0000-4000-8000-0000000000bb")


@pytest.fixture(name="workspace")
def _workspace(tmp_path):
    return tmp_path / "agents" / "alice" / "workspace"


@pytest.fixture(name="memory")
def _memory(workspace):
    memory = MarkdownMemory(workspace, agent="alice")
    yield memory
    memory.close()


@pytest.fixture(name="reopen")
def _reopen(workspace):
    return lambda: MarkdownMemory(workspace, agent="alice")


@pytest.fixture(name="memory_factory")
def _memory_factory(tmp_path):
    counter = itertools.count()
    return lambda: MarkdownMemory(tmp_path / f"ws{next(counter)}", agent="alice")


def own_copy(test):
    """Wrap a contract Hypothesis test afresh for one subclass.

    Hypothesis refuses one @given function run from two classes' instances
    (HealthCheck.differing_executors), which every MemoryContract subclass after
    the first in a session would hit; a per-class wrapper avoids it.
    """
    inner = test.hypothesis.inner_test
    return settings(
        max_examples=25,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )(given(data=st.data())(inner))


LEAK_TEST = MemoryContract.test_no_path_leaks_outside_the_allowlist_or_session


class TestMarkdownMemory(MemoryContract):
    """One agent's workspace passes the contract."""

    test_no_path_leaks_outside_the_allowlist_or_session = own_copy(LEAK_TEST)


@pytest.fixture(name="peers_root")
def _peers_root(tmp_path):
    return tmp_path / "agents"


def open_peers(root, own="alice", peers=("bob", "carol")) -> MarkdownPeers:
    return MarkdownPeers(
        MarkdownMemory(root / own / "workspace", agent=own),
        {p: MarkdownMemory(root / p / "workspace", agent=p) for p in peers},
    )


class TestMarkdownPeers(MemoryContract):
    """The own-plus-peers handle passes the contract too."""

    test_no_path_leaks_outside_the_allowlist_or_session = own_copy(LEAK_TEST)

    @pytest.fixture(name="memory")
    def _memory(self, peers_root):
        return open_peers(peers_root)

    @pytest.fixture(name="reopen")
    def _reopen(self, peers_root):
        return lambda: open_peers(peers_root)

    @pytest.fixture(name="memory_factory")
    def _memory_factory(self, tmp_path):
        counter = itertools.count()
        return lambda: open_peers(tmp_path / f"install{next(counter)}")


def new(key, content, *, agent="alice", category="core", session=None, at=T0, **kw):
    return NewMemory(
        agent=agent,
        key=key,
        content=content,
        category=category,
        session=session,
        entry_id=kw.pop("entry_id", f"id-{key}"),
        at=at,
        **kw,
    )


def stored(position, key, content, *, agent="alice", category="core", at=T0):
    return Recorded(
        stream_id=STREAM,
        version=position,
        position=position,
        recorded_at=at,
        event=MemoryStored(
            agent=agent,
            key=key,
            content=content,
            category=category,
            entry_id=f"ev{position}",
        ),
    )


def memory_lines(path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.startswith("- ")]


def test_layout_core_in_memory_md_others_in_utc_dated_files(memory, workspace):
    """Core goes to MEMORY.md; other categories to memory/<UTC date of the write>.md."""
    late = datetime(2026, 11, 1, 23, 30, tzinfo=UTC) + timedelta(hours=1)
    memory.store(new("editor", "Helix", category="core"))
    memory.store(new("standup", "shipped it", category="daily", session="s1", at=late))
    memory.store(new("chat", "hello", category="conversation", session="s2"))
    assert (workspace / "MEMORY.md").read_text().startswith("# Long-Term Memory\n")
    daily = workspace / "memory" / "2026-11-02.md"
    assert daily.read_text().startswith("# Daily Log — 2026-11-02\n")
    expected = (
        "- **standup** [category=daily session=s1 at=2026-11-02T00:30:00Z"
        " id=id-standup]: shipped it"
    )
    assert memory_lines(daily) == [expected]
    assert len(memory_lines(workspace / "memory" / "2026-11-01.md")) == 1


def test_line_is_readable_and_keeps_category_and_session(memory, workspace):
    """Every line names its key, category, session, time, id and position."""
    memory.apply([stored(17, "editor", "Helix is my editor", category="tools")], 17)
    (line,) = memory_lines(workspace / "memory" / "2026-11-01.md")
    assert line == (
        "- **editor** [category=tools at=2026-11-01T12:00:00Z id=ev17 pos=17]:"
        " Helix is my editor"
    )
    entry = memory.get("editor", agents=["alice"])
    assert (entry.category, entry.session, entry.id) == ("tools", None, "ev17")


@pytest.mark.parametrize(
    ("key", "content", "category", "session"),
    [
        ("multi", "line one\nline two\r\nthree", "core", None),
        ("**bold** [x]: y", "back\\slash \\n literal", "my custom category", "s 1"),
        ("", "", "", ""),
        ("k", "ends with spaces   ", 'quote"d', "]"),
        ("emoji 🙂", "tab\there — done", "core", "sess-é"),
    ],
)
def test_odd_text_round_trips_on_one_line(key, content, category, session):
    """Newlines, Markdown markers, quotes and brackets survive on a single line."""
    entry = new(key, content, category=category, session=session, importance=0.25)
    line = format_line(entry, 3)
    assert "\n" not in line
    assert "\r" not in line
    parsed, position = parse_line(line, agent="alice")
    assert position == 3
    assert (parsed.key, parsed.content) == (key, content)
    assert (parsed.category, parsed.session) == (category, session)
    assert parsed.importance == 0.25
    assert parsed.created_at == T0


@given(
    key=st.text(max_size=20),
    content=st.text(max_size=60),
    category=st.text(max_size=10),
    session=st.none() | st.text(max_size=10),
)
@settings(max_examples=100, deadline=None)
def test_any_text_round_trips(key, content, category, session):
    """Whatever the text, the line parses back to the same row."""
    parsed, _ = parse_line(
        format_line(new(key, content, category=category, session=session)),
        agent="alice",
    )
    assert (parsed.key, parsed.content, parsed.category, parsed.session) == (
        key,
        content,
        category,
        session,
    )


def test_human_lines_are_ignored(memory, workspace):
    """Headers and prose a human adds are not memory lines."""
    memory.store(new("k", "v"))
    path = workspace / "MEMORY.md"
    path.write_text(path.read_text() + "\nSome notes.\n- a plain bullet\n")
    memory.store(new("k2", "v2"))
    assert {e.key for e in memory.list(agents=["alice"])} == {"k", "k2"}


def test_torn_last_line_is_closed_before_appending(memory, workspace):
    """A crash mid-line does not glue the next write onto it."""
    path = workspace / "MEMORY.md"
    memory.store(new("k", "v"))
    path.write_text(path.read_text() + "- **torn** [categ")
    memory.store(new("next", "still parsed"))
    assert memory.get("next", agents=["alice"]).content == "still parsed"


def test_supersede_purge_answer_append_only(memory, workspace):
    """Supersede and purge are refused with the append-only reason; the line stays."""
    memory.store(new("k", "kept"))
    for result, operation in [
        (memory.supersede("k", agent="alice", superseded_by="k2"), "supersede"),
        (memory.purge_session("s1", agent="alice"), "purge_session"),
    ]:
        assert result == Unsupported(
            operation=operation, backend="markdown", reason=APPEND_ONLY_REASON
        )
    assert memory.get("k", agents=["alice"]).content == "kept"
    assert memory.capabilities.append_only


def test_forget_redacts_every_line_of_the_key(memory, workspace):
    """forget rewrites the key's lines as [forgotten]: no file holds the content."""
    memory.store(new("vault", "code 48151623", at=T0))
    memory.store(new("vault", "code 16234815", category="daily", at=T0))
    memory.store(new("keep", "the office is in Lyon"))
    assert memory.forget("vault", agent="alice") is True
    text = "".join(p.read_text() for p in workspace.rglob("*.md"))
    assert "4815" not in text
    assert text.count("[forgotten]") == 2  # the audit trail keeps its lines
    assert memory.get("vault", agents=["alice"]) is None
    assert keys(memory.recall("code", agents=["alice"])) == []
    assert memory.get("keep", agents=["alice"]).content == "the office is in Lyon"
    memory.store(new("vault", "a new code", at=T0 + timedelta(days=1)))
    assert memory.get("vault", agents=["alice"]).content == "a new code"
    assert memory.forget("vault", agent="bob") is False


def test_applied_forget_redacts_only_earlier_lines(memory, workspace):
    """A rebuild applies memory.forgotten: the entry never comes back."""
    events = [
        Recorded(
            position=1,
            stream_id=STREAM,
            version=1,
            recorded_at=T0,
            event=MemoryStored(agent="alice", key="k", content="old secret"),
        ),
        Recorded(
            position=2,
            stream_id=STREAM,
            version=2,
            recorded_at=T0,
            event=MemoryForgotten(agent="alice", key="k"),
        ),
        Recorded(
            position=3,
            stream_id=STREAM,
            version=3,
            recorded_at=T0 + timedelta(1),
            event=MemoryStored(agent="alice", key="k", content="new value"),
        ),
    ]
    memory.apply(events[:2], 2)
    assert memory.get("k", agents=["alice"]) is None
    memory.apply(events, 3)
    memory.apply(events, 3)  # idempotent
    assert memory.get("k", agents=["alice"]).content == "new value"
    text = "".join(p.read_text() for p in workspace.rglob("*.md"))
    assert "old secret" not in text


def test_newest_line_of_a_key_wins(memory, workspace):
    """Reads are upserts: one row per key, newest content, first id and time."""
    memory.store(new("editor", "Vim", entry_id="e1", at=T0))
    memory.store(new("editor", "Helix", entry_id="e2", at=T0 + timedelta(hours=1)))
    assert len(memory_lines(workspace / "MEMORY.md")) == 2
    entry = memory.get("editor", agents=["alice"])
    assert (entry.content, entry.id) == ("Helix", "e1")
    assert (entry.created_at, entry.updated_at) == (T0, T0 + timedelta(hours=1))
    assert memory.count(agents=["alice"]) == 1
    assert keys(memory.recall("vim", agents=["alice"])) == []


def test_foreign_agent_write_is_refused(memory):
    """A workspace holds only its own agent's rows."""
    result = memory.store(new("k", "v", agent="bob"))
    assert isinstance(result, Unsupported)
    assert result.reason.endswith("belongs to agent 'alice', not 'bob'")
    assert memory.count(agents=["alice", "bob"]) == 0


def test_keyword_scores_are_the_gates_on_the_visible_rows(memory):
    """Scores are the keyword gate's, each word weighed on the rows the caller
    may see (filters first: another session's row counts for nothing)."""
    memory.store(new("a", "alpha beta"))
    memory.store(new("b", "alpha"))
    memory.store(new("c", "alpha beta", category="conversation", session="s2"))
    query = "alpha beta gamma delta"
    found = memory.recall(query, agents=["alice"], session="s1")
    a, b = scope_scores(query, ["a alpha beta", "b alpha"])
    assert [(e.key, e.score) for e in found] == [
        ("a", pytest.approx(a)),
        ("b", pytest.approx(b)),
    ]
    assert a > 0.4 > b
    assert keys(memory.recall("beta", agents=["alice"], session="s1", limit=1)) == ["a"]


def test_apply_is_idempotent_by_position(memory, workspace):
    """A crash between writing a line and tracking never duplicates it."""
    events = [stored(1, "a", "one"), stored(2, "b", "two", agent="bob")]
    memory.apply(events, 2)
    (workspace / "memory" / ".applied_position").unlink()  # the tracking was lost
    assert memory.applied_position() == 1  # recovered from the line itself
    memory.apply([*events, stored(3, "c", "three")], 3)
    memory.apply([*events, stored(3, "c", "three")], 3)
    assert [line.split(" [")[0] for line in memory_lines(workspace / "MEMORY.md")] == [
        "- **a**",
        "- **c**",
    ]
    assert memory.applied_position() == 3


@pytest.mark.parametrize("damaged", ["garbage", "\u00b2", "9" * 5_000, "-3"])
def test_a_damaged_position_file_is_refused_naming_it(memory, workspace, damaged):
    """Not int()'s words ('invalid literal'), nor a 5,000-digit ValueError."""
    memory.apply([stored(1, "a", "one")], 1)
    tracked = workspace / "memory" / ".applied_position"
    tracked.write_text(damaged)
    with pytest.raises(ValueError, match="Expected a position") as raised:
        memory.applied_position()
    assert str(tracked) in str(raised.value)
    assert "memory rebuild" in str(raised.value)
    assert len(str(raised.value)) < 600


def test_apply_redacts_lines_of_forgotten_keys(memory, workspace):
    """A forget event keeps the audit line but rewrites it as forgotten."""
    memory.apply([stored(1, "k", "kept")], 1)
    memory.apply(
        [Recorded(stream_id=STREAM, version=2, position=2, recorded_at=T0,
                  event=MemoryForgotten(agent="alice", key="k"))],
        2,
    )  # fmt: skip
    assert memory.applied_position() == 2
    assert memory.get("k", agents=["alice"]) is None
    (line,) = memory_lines(workspace / "MEMORY.md")
    assert line.startswith("- **k** [")
    assert line.endswith("]: [forgotten]")


def test_rebuild_writes_identical_files(tmp_path):
    """Applying the same events twice into fresh workspaces gives the same bytes."""
    events = [
        stored(1, "a", "one"),
        stored(2, "b", "two", category="daily", at=T0 + timedelta(days=3)),
    ]
    trees = []
    for name in ("first", "second"):
        memory = MarkdownMemory(tmp_path / name, agent="alice")
        memory.apply(events, 2)
        trees.append(
            {
                p.relative_to(tmp_path / name): p.read_bytes()
                for p in (tmp_path / name).rglob("*.md")
            }
        )
    assert trees[0] == trees[1]
    assert len(trees[0]) == 2


def test_peers_are_merged_by_score(peers_root):
    """A strong peer row beats a weak own row; peer keys are prefixed."""
    memory = open_peers(peers_root)
    bob = MarkdownMemory(peers_root / "bob" / "workspace", agent="bob")
    memory.store(new("weak", "deploy"))
    bob.store(new("strong", "deploy friday checklist", agent="bob"))
    found = memory.recall("deploy friday checklist", agents=["alice", "bob"], limit=1)
    assert [(e.key, e.agent) for e in found] == [("[bob] strong", "bob")]
    assert found[0].score > 0.9
    both = memory.recall("deploy friday", agents=["alice", "bob"], limit=5)
    assert keys(both) == ["[bob] strong", "weak"]


def test_peers_agents_select_stores(peers_root):
    """agents= maps to the own and peer stores; unknown agents see nothing."""
    memory = open_peers(peers_root)
    MarkdownMemory(peers_root / "bob" / "workspace", agent="bob").store(
        new("k", "bob's", agent="bob")
    )
    memory.store(new("k", "alice's"))
    assert memory.get("k", agents=["bob", "alice"]).content == "bob's"
    assert memory.get("k", agents=["mallory"]) is None
    assert memory.count(agents=["alice", "bob"]) == 2
    assert keys(memory.recall("", agents=["bob"])) == ["[bob] k"]
    assert isinstance(memory.store(new("x", "y", agent="bob")), Unsupported)


def test_peers_reject_a_mislabelled_peer(tmp_path):
    """A peer keyed by another alias (or the own agent) is a configuration error."""
    own = MarkdownMemory(tmp_path / "a", agent="alice")
    with pytest.raises(ValueError, match="found 'bob' -> 'carol'"):
        MarkdownPeers(own, {"bob": MarkdownMemory(tmp_path / "c", agent="carol")})
    with pytest.raises(ValueError, match="found 'alice' -> 'alice'"):
        MarkdownPeers(own, {"alice": own})


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_peers_never_leak_outside_the_allowlist_or_session(tmp_path_factory, data):
    """Rows written by every agent's own store never leak through the peer handle."""
    root = tmp_path_factory.mktemp("install")
    agents = ["a1", "a2", "a3", "a4"]
    stores = {a: MarkdownMemory(root / a, agent=a) for a in agents}
    rows = data.draw(
        st.lists(
            st.tuples(
                st.sampled_from(agents),
                st.sampled_from(["alpha", "beta"]),
                st.sampled_from(["core", "daily", "conversation"]),
                st.sampled_from([None, "s1", "s2"]),
            ),
            max_size=10,
        )
    )
    for i, (agent, word, category, session) in enumerate(rows):
        stores[agent].store(
            new(
                f"k{i}", f"{word} note", agent=agent, category=category, session=session
            )
        )
    memory = MarkdownPeers(stores["a1"], {a: stores[a] for a in agents[1:]})
    allowed = data.draw(st.lists(st.sampled_from(agents), unique=True, max_size=3))
    session = data.draw(st.sampled_from([None, "s1", "s2"]))
    query = data.draw(st.sampled_from(["alpha", "note", ""]))
    found = memory.recall(query, agents=allowed, session=session, limit=20)
    for entries in (found, memory.list(agents=allowed), memory.export(agents=allowed)):
        assert all(e.agent in allowed for e in entries)
    for entry in found:
        if session is not None:
            assert entry.session in (session, None)
            assert entry.session is not None or entry.category in ("core", "daily")
    scores = [e.score for e in found]
    if query:
        assert scores == sorted(scores, reverse=True)


@gate_cases
def test_keyword_scores_are_sqlites(tmp_path_factory, texts, query):
    """Markdown scores each row as SQLite's keyword gate does (same rows and
    query), where it scored the unweighted share of the query's words."""
    markdown = MarkdownMemory(tmp_path_factory.mktemp("ws"), agent="alice")
    assert_scores_are_sqlites(markdown, texts, query, "alice")
