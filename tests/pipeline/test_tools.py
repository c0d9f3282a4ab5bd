"""Tools: memory, knowledge and workspace files over a real ledger and workspace."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from turnledger.ledger.events import KnowledgeCaptured, MemoryStored
from turnledger.ledger.ids import memory_stream_id
from turnledger.ledger.store import open_store
from turnledger.pipeline.config import parse_config
from turnledger.pipeline.memory import MemoryService
from turnledger.pipeline.tools.base import ToolContext, ToolOutcome
from turnledger.pipeline.tools.file_tools import MAX_WRITE_BYTES
from turnledger.pipeline.tools.memory_tools import format_recall
from turnledger.pipeline.tools.registry import default_tools, run_tool, tool_specs
from turnledger.policies.relevance import UNRELATED_SCORE
from turnledger.projections.memory.protocol import MemoryEntry

TOOL_NAMES = [
    "memory_store",
    "memory_recall",
    "memory_forget",
    "memory_purge",
    "memory_export",
    "knowledge_capture",
    "knowledge_query",
    "file_read",
    "file_write",
    "glob_search",
    "content_search",
]


class World:
    """A real ledger, memory service and workspace; ``call`` runs a tool."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.path = str(tmp_path / "l.db")
        self.store = open_store(self.path)
        self.config = parse_config(
            f'data_dir = "{tmp_path / "data"}"\n'
            '[agents.alice]\nmemory = "sqlite"\nread_memory_from = ["bob"]\n'
            '[agents.bob]\nmemory = "sqlite"\n'
            f'[agents.md]\nmemory = "markdown"\nworkspace = "{tmp_path / "md-ws"}"\n'
            '[agents.ghost]\nmemory = "none"\n'
        )
        self.memory = MemoryService(self.store, self.config, ledger_url=self.path)
        self.workspace = tmp_path / "ws"
        self.tools = default_tools()

    def context(self, agent: str = "alice", session: str = "s1") -> ToolContext:
        return ToolContext(
            agent=agent,
            session_key=session,
            turn_id="turn-1",
            workspace=self.workspace,
            memory=self.memory,
            store=self.store,
        )

    async def call(
        self, name: str, arguments: object, *, agent: str = "alice", session: str = "s1"
    ) -> ToolOutcome:
        return await run_tool(self.tools, name, arguments, self.context(agent, session))

    def close(self) -> None:
        self.memory.close()
        self.store.close()


@pytest.fixture(name="world")
def _world(tmp_path):
    world = World(tmp_path)
    yield world
    world.close()


def ok(text: str) -> ToolOutcome:
    return ToolOutcome(success=True, output=text)


def entry(key: str, content: str, score: float | None) -> MemoryEntry:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    return MemoryEntry(
        id=key,
        key=key,
        content=content,
        category="core",
        agent="a",
        created_at=at,
        updated_at=at,
        score=score,
    )


# -- registry --------------------------------------------------------------------


def test_default_tools_have_json_schema_specs():
    tools = default_tools()
    assert list(tools) == TOOL_NAMES
    specs = tool_specs(tools)
    assert [spec.name for spec in specs] == TOOL_NAMES
    for spec in specs:
        assert spec.description
        assert spec.parameters["type"] == "object"
        assert set(spec.parameters.get("required", [])) <= set(
            spec.parameters["properties"]
        )


async def test_unknown_tool_and_raising_tool_become_failed_outcomes(world):
    assert await world.call("nope", {}) == ToolOutcome(
        success=False, error="Unknown tool: nope"
    )

    class Boom:
        spec = default_tools()["file_read"].spec

        async def run(self, arguments, context):
            raise RuntimeError("kaput")

    outcome = await run_tool({"boom": Boom()}, "boom", {}, world.context())
    assert outcome == ToolOutcome(success=False, error="Error executing boom: kaput")


# -- memory ----------------------------------------------------------------------


def test_recall_text_matches_the_reference_format():
    assert format_recall([]) == "No memories found."
    assert format_recall(
        [entry("lang", "Prefers Rust", 0.63), entry("tz", "EST", None)]
    ) == ("Found 2 memories:\n- [core] lang: Prefers Rust [63%]\n- [core] tz: EST\n")


async def test_store_then_recall_with_the_reference_texts(world):
    stored = await world.call(
        "memory_store", {"key": "lang", "content": "User prefers Rust"}
    )
    assert stored == ok("Stored memory: lang")
    recent = await world.call("memory_recall", {})
    assert recent == ok("Found 1 memories:\n- [core] lang: User prefers Rust\n")
    found = await world.call("memory_recall", {"query": "Rust"})
    assert found.success
    assert found.output.startswith(
        "Found 1 memories:\n- [core] lang: User prefers Rust ["
    )
    assert found.output.endswith("%]\n")
    # An unrelated word: no keyword, a cosine under the static model's floor.
    # The row is ranked, scored under 1%, and never injected into a turn.
    while world.memory.backend("alice").embed_pending():  # type: ignore[attr-defined]
        pass  # vectors are computed off the write path
    assert await world.call("memory_recall", {"query": "haskell"}) == ok(
        "Found 1 memories:\n- [core] lang: User prefers Rust [0%]\n"
    )
    (weak,) = world.memory.recall("alice", "haskell")
    assert 0.0 < weak.score < UNRELATED_SCORE  # type: ignore[operator]
    assert world.memory.context_block("alice", "haskell", session="s1") == ""
    assert await world.call("memory_recall", {"query": "the"}) == ok(
        "No memories found."  # stop words only: no keyword, no vector
    )


async def test_store_records_a_tool_event_durable_facts_session_less(world):
    await world.call("memory_store", {"key": "fact", "content": "x"})
    await world.call(
        "memory_store", {"key": "chat", "content": "y", "category": "conversation"}
    )
    events = [r.event for r in world.store.read_stream(memory_stream_id("alice"))]
    assert [
        (e.key, e.category, e.session, e.source)
        for e in events
        if isinstance(e, MemoryStored)
    ] == [
        ("fact", "core", None, "tool"),
        ("chat", "conversation", "s1", "tool"),
    ]


async def test_recall_sees_this_session_and_durable_facts_only(world):
    await world.call(
        "memory_store", {"key": "here", "content": "alpha", "category": "conversation"}
    )
    await world.call(
        "memory_store",
        {"key": "there", "content": "alpha", "category": "conversation"},
        session="s2",
    )
    await world.call("memory_store", {"key": "core_fact", "content": "alpha"})
    outcome = await world.call("memory_recall", {"query": "*", "limit": 10})
    assert outcome.output.startswith("Found 2 memories:\n")
    assert "here: alpha" in outcome.output
    assert "core_fact: alpha" in outcome.output
    assert "there" not in outcome.output


async def test_recall_limit_is_bounded(world):
    for i in range(4):
        await world.call("memory_store", {"key": f"k{i}", "content": "rust fact"})
    assert (
        await world.call("memory_recall", {"query": "*", "limit": 2})
    ).output.startswith("Found 2 memories:")
    refused = await world.call("memory_recall", {"limit": 0})
    assert refused == ToolOutcome(
        success=False, error="Expected 'limit' to be between 1 and 100, found 0"
    )


async def test_forget_own_then_missing(world):
    await world.call("memory_store", {"key": "lang", "content": "Rust"})
    assert await world.call("memory_forget", {"key": "lang"}) == ok(
        "Forgot memory: lang"
    )
    assert await world.call("memory_forget", {"key": "lang"}) == ok(
        "No memory found with key: lang"
    )
    assert world.memory.get("alice", "lang") is None


async def test_forgetting_a_peers_row_is_refused_and_keeps_it(world):
    await world.call("memory_store", {"key": "secret", "content": "bob's"}, agent="bob")
    seen = await world.call("memory_recall", {"query": "*"})
    assert "secret: bob's" in seen.output  # alice may read bob's rows...
    outcome = await world.call("memory_forget", {"key": "secret"})
    assert not outcome.success  # ...but never delete them
    assert (
        outcome.error
        == "Failed to forget memory: 'alice' refuses to forget a row of 'bob'"
    )
    assert world.memory.get("bob", "secret") is not None


async def test_append_only_backend_says_so_instead_of_not_found(world):
    """Markdown forget redacts the key's lines (forget for real); purge refuses."""
    assert await world.call(
        "memory_store", {"key": "fact", "content": "kept"}, agent="md"
    ) == ok("Stored memory: fact")
    forget = await world.call("memory_forget", {"key": "fact"}, agent="md")
    assert forget == ok("Forgot memory: fact")
    assert world.memory.get("md", "fact") is None
    assert await world.call(
        "memory_store", {"key": "fact", "content": "kept"}, agent="md"
    ) == ok("Stored memory: fact")
    purge = await world.call("memory_purge", {}, agent="md")
    assert purge == ToolOutcome(
        success=False,
        error=(
            "Cannot purge session 's1': markdown memory is append-only "
            "(an audit trail); nothing was removed"
        ),
    )
    assert world.memory.get("md", "fact") is not None
    missing = await world.call("memory_forget", {"key": "never"}, agent="md")
    assert missing == ok("No memory found with key: never")


async def test_purge_touches_only_own_rows_of_the_current_session(world):
    for key in ("a1", "a2"):
        await world.call(
            "memory_store", {"key": key, "content": "c", "category": "conversation"}
        )
    await world.call("memory_store", {"key": "durable", "content": "c"})
    await world.call(
        "memory_store",
        {"key": "other", "content": "c", "category": "conversation"},
        session="s2",
    )
    await world.call(
        "memory_store",
        {"key": "bobs", "content": "c", "category": "conversation"},
        agent="bob",
    )
    outcome = await world.call("memory_purge", {"session_id": "s1"})
    assert outcome == ok("Purged 2 memories from session 's1'")
    assert world.memory.get("alice", "a1") is None
    assert world.memory.get("alice", "a2") is None
    for agent, key in (("alice", "durable"), ("alice", "other"), ("bob", "bobs")):
        assert world.memory.get(agent, key) is not None
    assert await world.call("memory_purge", {}) == ok(
        "Purged 0 memories from session 's1'"
    )


async def test_purge_refuses_other_sessions_and_namespaces(world):
    await world.call(
        "memory_store",
        {"key": "other", "content": "c", "category": "conversation"},
        session="s2",
    )
    other = await world.call("memory_purge", {"session_id": "s2"})
    assert not other.success
    assert "current session 's1'" in other.error
    namespace = await world.call("memory_purge", {"namespace": "default"})
    assert not namespace.success
    assert namespace.error.startswith("Expected no 'namespace'")
    assert world.memory.get("alice", "other") is not None


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"content": "x"}, "Expected 'key' to be a non-empty string, found nothing"),
        (
            {"key": 3, "content": "x"},
            "Expected 'key' to be a non-empty string, found 3 (integer)",
        ),
        (
            {"key": "  ", "content": "x"},
            "Expected 'key' to be a non-empty string, found \"  \" (string)",
        ),
        ({"key": "k"}, "Expected 'content' to be a string, found nothing"),
        (
            {"key": "k", "content": None},
            "Expected 'content' to be a string, found null",
        ),
        (
            {"key": "k", "content": "x", "category": ["a"]},
            "Expected 'category' to be a non-empty string, found [\"a\"] (array)",
        ),
        ([], "Expected the arguments to be a JSON object, found [] (array)"),
    ],
)
async def test_memory_store_arguments_are_checked(world, arguments, error):
    assert await world.call("memory_store", arguments) == ToolOutcome(
        success=False, error=error
    )
    assert world.store.stream_version(memory_stream_id("alice")) == 0


async def test_recall_and_forget_arguments_are_checked(world):
    limit = await world.call("memory_recall", {"limit": "5"})
    assert limit.error == "Expected 'limit' to be an integer, found \"5\" (string)"
    limit = await world.call("memory_recall", {"limit": True})
    assert limit.error == "Expected 'limit' to be an integer, found true (boolean)"
    query = await world.call("memory_recall", {"query": 1})
    assert query.error == "Expected 'query' to be a string, found 1 (integer)"
    key = await world.call("memory_forget", {})
    assert key.error == "Expected 'key' to be a non-empty string, found nothing"


# -- knowledge -------------------------------------------------------------------


async def test_capture_records_an_event_with_the_turn_as_provenance(world):
    outcome = await world.call(
        "knowledge_capture",
        {"subject": "alice", "relation": "works_at", "object": "acme"},
    )
    assert outcome == ok("Captured: alice --works_at--> acme")
    [recorded] = world.store.read_stream(memory_stream_id("alice"))
    assert recorded.event == KnowledgeCaptured(
        agent="alice",
        subject="alice",
        relation="works_at",
        object="acme",
        provenance="turn-1",
    )


async def test_query_neighbours_and_paths(world):
    for s, r, o in (
        ("alice", "works_at", "acme"),
        ("acme", "located_in", "paris"),
        ("bob", "knows", "alice"),
    ):
        await world.call(
            "knowledge_capture", {"subject": s, "relation": r, "object": o}
        )
    await world.call(
        "memory_store", {"key": "k", "content": "memory writes share the stream"}
    )
    assert await world.call("knowledge_query", {"node": "alice"}) == ok(
        "Found 2 facts about 'alice':\n- bob --knows--> alice\n- alice --works_at--> acme\n"
    )
    assert await world.call(
        "knowledge_query", {"node": "alice", "direction": "out"}
    ) == ok("Found 1 facts about 'alice':\n- alice --works_at--> acme\n")
    assert await world.call(
        "knowledge_query", {"node": "alice", "relation": "likes"}
    ) == ok("No knowledge found about 'alice' with relation 'likes'.")
    assert await world.call(
        "knowledge_query", {"node": "alice", "target": "paris"}
    ) == ok(
        "Found 1 paths from 'alice' to 'paris':\n"
        "- alice --works_at--> acme; acme --located_in--> paris\n"
    )
    assert await world.call(
        "knowledge_query", {"node": "paris", "target": "alice"}
    ) == ok("No path found from 'paris' to 'alice'.")


async def test_query_reads_only_the_callers_graph(world):
    await world.call(
        "knowledge_capture", {"subject": "x", "relation": "r", "object": "y"}
    )
    outcome = await world.call("knowledge_query", {"node": "x"}, agent="bob")
    assert outcome == ok("No knowledge found about 'x'.")


async def test_knowledge_arguments_are_checked(world):
    missing = await world.call("knowledge_capture", {"subject": "a", "relation": "r"})
    assert missing.error == "Expected 'object' to be a non-empty string, found nothing"
    direction = await world.call("knowledge_query", {"node": "a", "direction": "up"})
    assert (
        direction.error
        == "Expected 'direction' to be one of 'both', 'out', 'in', found \"up\" (string)"
    )
    depth = await world.call(
        "knowledge_query", {"node": "a", "target": "b", "max_depth": 99}
    )
    assert depth.error == "Expected 'max_depth' to be between 1 and 6, found 99"
    assert world.store.stream_version(memory_stream_id("alice")) == 0


# -- workspace files -------------------------------------------------------------


@pytest.fixture(name="files")
def _files(world):
    ws = world.workspace
    (ws / "notes").mkdir(parents=True)
    (ws / "notes" / "a.txt").write_text("first line\na needle here\n")
    (ws / "notes" / "b.md").write_text("NEEDLE upper\n")
    (ws / "big.txt").write_text("x" * 100)
    outside = world.tmp / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("needle outside\n")
    (ws / "link.txt").symlink_to(outside / "secret.txt")
    (ws / "linkdir").symlink_to(outside)
    return world


async def test_file_read_inside_and_bounded(files):
    assert await files.call("file_read", {"path": "notes/a.txt"}) == ok(
        "first line\na needle here\n"
    )
    bounded = await files.call("file_read", {"path": "big.txt", "max_bytes": 10})
    assert bounded == ok(
        "x" * 10 + "\n\n[truncated: showing the first 10 of 100 bytes]"
    )
    missing = await files.call("file_read", {"path": "nope.txt"})
    assert missing == ToolOutcome(
        success=False, error="Not a readable file: 'nope.txt'"
    )


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("../outside/secret.txt", "parent_escape"),
        ("notes/../../outside/secret.txt", "parent_escape"),
        ("{outside}/secret.txt", "outside_root"),
        ("link.txt", "symlink_escape"),
        ("linkdir/secret.txt", "symlink_escape"),
    ],
)
async def test_file_read_refuses_escapes(files, path, reason):
    outcome = await files.call(
        "file_read", {"path": path.format(outside=files.tmp / "outside")}
    )
    assert not outcome.success
    assert outcome.error.startswith(f"Path refused ({reason}): ")
    assert "needle outside" not in outcome.output


async def test_file_write_creates_parents_inside(files):
    outcome = await files.call(
        "file_write", {"path": "new/deep/f.txt", "content": "héllo"}
    )
    assert outcome == ok("Written 6 bytes to new/deep/f.txt")
    assert (files.workspace / "new" / "deep" / "f.txt").read_text() == "héllo"


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("../escaped.txt", "parent_escape"),
        ("linkdir/evil.txt", "symlink_escape"),
        ("link.txt", "symlink_escape"),
    ],
)
async def test_file_write_refuses_escapes(files, path, reason):
    outcome = await files.call("file_write", {"path": path, "content": "pwned"})
    assert outcome.error.startswith(f"Path refused ({reason}): ")
    assert not (files.tmp / "escaped.txt").exists()
    assert not (files.tmp / "outside" / "evil.txt").exists()
    assert (files.tmp / "outside" / "secret.txt").read_text() == "needle outside\n"


async def test_file_write_is_bounded(files):
    outcome = await files.call(
        "file_write", {"path": "huge.txt", "content": "x" * (MAX_WRITE_BYTES + 1)}
    )
    assert not outcome.success
    assert not (files.workspace / "huge.txt").exists()


async def test_glob_lists_workspace_files_only(files):
    outcome = await files.call("glob_search", {"pattern": "**/*.txt"})
    assert outcome == ok("big.txt\nnotes/a.txt\n\nTotal: 2 files")
    assert await files.call("glob_search", {"pattern": "linkdir/*"}) == ok(
        "No files matching pattern 'linkdir/*' found in workspace."
    )
    absolute = await files.call("glob_search", {"pattern": "/etc/*"})
    assert (
        absolute.error == "Absolute paths are not allowed. Use a relative glob pattern."
    )
    parent = await files.call("glob_search", {"pattern": "notes/../../*"})
    assert parent.error == "Path traversal ('..') is not allowed in glob patterns."
    invalid = await files.call("glob_search", {"pattern": "a**b"})
    assert invalid.error.startswith("Invalid glob pattern: ")


async def test_content_search_stays_inside_and_is_bounded(files):
    assert await files.call("content_search", {"pattern": "needle"}) == ok(
        "notes/a.txt:2: a needle here"
    )
    insensitive = await files.call(
        "content_search", {"pattern": "needle", "case_sensitive": False}
    )
    assert insensitive == ok("notes/a.txt:2: a needle here\nnotes/b.md:1: NEEDLE upper")
    bounded = await files.call("content_search", {"pattern": "e", "max_results": 1})
    assert bounded == ok(
        "notes/a.txt:1: first line\n\n[Results truncated: showing first 1 matches]"
    )
    regex = await files.call(
        "content_search", {"pattern": r"^a \w+", "regex": True, "path": "notes"}
    )
    assert regex == ok("notes/a.txt:2: a needle here")
    assert await files.call("content_search", {"pattern": "zzz"}) == ok(
        "No matches found for 'zzz'."
    )


async def test_content_search_refusals(files):
    escape = await files.call(
        "content_search", {"pattern": "needle", "path": "../outside"}
    )
    assert escape.error.startswith("Path refused (parent_escape): ")
    link = await files.call("content_search", {"pattern": "needle", "path": "linkdir"})
    assert link.error.startswith("Path refused (symlink_escape): ")
    bad = await files.call("content_search", {"pattern": "(", "regex": True})
    assert bad.error.startswith(
        "Expected 'pattern' to be a valid regular expression, found '('"
    )


async def test_store_into_disabled_memory_fails_and_says_why(world):
    outcome = await world.call(
        "memory_store", {"key": "k", "content": "c"}, agent="ghost"
    )
    assert outcome == ToolOutcome(
        success=False,
        error="Failed to store memory: memory is disabled for this agent (backend none)",
    )


async def test_paths_take_no_relation_filter(world):
    outcome = await world.call(
        "knowledge_query", {"node": "a", "target": "b", "relation": "r"}
    )
    assert (
        outcome.error
        == "Expected no 'relation' with 'target' (paths follow every relation)"
    )


async def test_file_tools_refuse_directories_and_skip_binary_files(files):
    (files.workspace / "blob.bin").write_bytes(b"needle\0binary")
    as_file = await files.call("file_read", {"path": "notes"})
    assert as_file.error == "Not a readable file: 'notes'"
    onto_dir = await files.call("file_write", {"path": "notes", "content": "x"})
    assert onto_dir.error == "Cannot write 'notes': it is a directory"
    one_file = await files.call(
        "content_search", {"pattern": "needle", "path": "notes/a.txt"}
    )
    assert one_file == ok("notes/a.txt:2: a needle here")
    missing = await files.call("content_search", {"pattern": "needle", "path": "gone"})
    assert missing.error == "No such file or directory in the workspace: 'gone'"
