"""Lucid memory: a local SQLite store plus a fake external command (a Python
script written by the test): the contract, the local-hit threshold, timeouts,
failures and the cooldown, the merge, and the leak guard."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.contracts.memory_contract import T0, MemoryContract, keys, put
from turnledger.projections.memory.lucid import (
    LucidMemory,
    lucid_category,
    parse_context,
)
from turnledger.projections.memory.sqlite import SQLiteMemory

NOW = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)

FAKE_LUCID = """\
import json, pathlib, sys, time
here = pathlib.Path(__file__).parent
with open(here / "calls.jsonl", "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
mode = (here / "mode").read_text()
if mode == "sleep":
    time.sleep(60)
if mode == "fail":
    sys.stderr.write("lucid: database locked\\n")
    sys.exit(2)
print("lucid 0.9 (fake)")
print((here / "response").read_text())
"""


class FakeLucid:
    """The fake command: its mode, its response and the calls it received."""

    def __init__(self, root):
        self.root = root
        root.mkdir()
        (root / "lucid.py").write_text(FAKE_LUCID)
        self.command = [sys.executable, "-I", "-S", str(root / "lucid.py")]
        self.mode("ok")
        self.respond()

    def mode(self, mode):
        (self.root / "mode").write_text(mode)

    def respond(self, *lines):
        block = ["<lucid-context>", *lines, "</lucid-context>"]
        (self.root / "response").write_text("\n".join(block))

    def calls(self):
        log = self.root / "calls.jsonl"
        if not log.exists():
            return []
        return [json.loads(line) for line in log.read_text().splitlines()]


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


@pytest.fixture(name="fake")
def _fake(tmp_path):
    return FakeLucid(tmp_path / "lucid")


@pytest.fixture(name="clock")
def _clock():
    return FakeClock()


def open_lucid(path, fake, **options):
    return LucidMemory(SQLiteMemory(path), fake.command, now=lambda: NOW, **options)


@pytest.fixture(name="memory")
def _memory(tmp_path, fake, clock):
    memory = open_lucid(tmp_path / "brain.db", fake, clock=clock)
    yield memory
    memory.close()


@pytest.fixture(name="reopen")
def _reopen(tmp_path, fake):
    return lambda: open_lucid(tmp_path / "brain.db", fake)


@pytest.fixture(name="memory_factory")
def _memory_factory(fake):
    return lambda: open_lucid(":memory:", fake)


class TestLucidMemory(MemoryContract):
    """With a command that finds nothing, Lucid passes the contract as its local store."""

    test_no_path_leaks_outside_the_allowlist_or_session = settings(
        max_examples=25,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )(
        given(data=st.data())(
            MemoryContract.test_no_path_leaks_outside_the_allowlist_or_session.hypothesis.inner_test
        )
    )


def test_enough_local_hits_skip_the_command(memory, fake):
    """Three local hits (the threshold) answer without running the command."""
    for i in range(3):
        put(memory, f"k{i}", f"deploy step {i}")
    assert len(memory.recall("deploy", agents=["alice"], limit=5)) == 3
    assert fake.calls() == []


def test_a_limit_below_the_threshold_is_enough(memory, fake):
    """One local hit satisfies a limit of one."""
    put(memory, "k", "deploy")
    assert keys(memory.recall("deploy", agents=["alice"], limit=1)) == ["k"]
    assert fake.calls() == []


def test_few_local_hits_ask_the_command_and_merge_local_first(memory, fake):
    """External results follow local ones, duplicates dropped, cut at the limit."""
    put(memory, "local", "deploy on friday")
    fake.respond(
        "- [decision] Deploy on Friday",  # the local row again, by content
        "- [learning key=rollback] deploy rollback needs the tag",
        "- [bug] deploy broke the cache",
        "- [context] deploy chatter",
    )
    found = memory.recall("deploy", agents=["alice"], limit=3)
    assert [(e.key, e.category, e.agent) for e in found] == [
        ("local", "core", "alice"),
        ("rollback", "core", "alice"),
        ("lucid_2", "daily", "alice"),
    ]
    assert [e.score for e in found[1:]] == [0.95, 0.9]
    assert fake.calls() == [
        ["context", "--budget=200", "--agent=alice", "--", "deploy"]
    ]


def test_leak_guard_drops_lines_of_other_agents(memory, fake):
    """The allowlist goes to the command; lines outside it never come back."""
    fake.respond(
        "- [decision agent=alice key=a] deploy alpha",
        "- [decision agent=mallory key=m] deploy secret",
        "- [decision] deploy unattributed",
    )
    found = memory.recall("deploy", agents=["alice", "bob"])
    assert [(e.key, e.agent) for e in found] == [("a", "alice")]
    assert fake.calls()[0][2:4] == ["--agent=alice", "--agent=bob"]
    single = memory.recall("deploy", agents=["alice"])
    assert [(e.content, e.agent) for e in single] == [
        ("deploy alpha", "alice"),
        ("deploy unattributed", "alice"),
    ]


def test_external_lines_obey_session_and_time(memory, fake):
    """Other sessions' and out-of-window external lines are dropped."""
    fake.respond(
        "- [context session=s2] deploy other session",
        "- [context session=s1 at=2026-10-01T00:00:00Z] deploy too old",
        '- [context session=s1 key="my key"] deploy here',
        "- [decision] deploy global fact",
    )
    found = memory.recall(
        "deploy", agents=["alice"], session="s1", since=NOW - timedelta(days=1)
    )
    assert keys(found) == ["my key", "lucid_3"]
    assert found[0].created_at == NOW


def test_timeout_returns_local_and_starts_the_cooldown(tmp_path, fake, clock):
    """A command sleeping past the timeout is killed; local results come back."""
    memory = open_lucid(tmp_path / "b.db", fake, clock=clock, recall_timeout=0.3)
    try:
        put(memory, "local", "deploy notes")
        fake.mode("sleep")
        assert keys(memory.recall("deploy", agents=["alice"])) == ["local"]
        assert memory.in_cooldown()
        fake.mode("ok")
        memory.recall("deploy", agents=["alice"])
        assert len(fake.calls()) == 1  # skipped during the cooldown
        clock.now += 15.0
        assert not memory.in_cooldown()
        memory.recall("deploy", agents=["alice"])
        assert len(fake.calls()) == 2
        assert not memory.in_cooldown()  # a success clears it
    finally:
        memory.close()


def test_failing_command_starts_the_cooldown(memory, fake, clock):
    """A non-zero exit returns local results and skips the command for a while."""
    put(memory, "local", "deploy notes")
    fake.mode("fail")
    assert keys(memory.recall("deploy", agents=["alice"])) == ["local"]
    assert memory.in_cooldown()
    clock.now += 14.9
    memory.recall("deploy", agents=["alice"])
    assert len(fake.calls()) == 1


def test_missing_command_is_a_failure(tmp_path, clock):
    """A command that cannot start is a failure, not an exception."""

    missing = FakeLucid(tmp_path / "missing")
    missing.command = [str(tmp_path / "no-such-lucid")]
    memory = open_lucid(tmp_path / "b.db", missing, clock=clock)
    try:
        put(memory, "local", "deploy")
        assert keys(memory.recall("deploy", agents=["alice"])) == ["local"]
        assert memory.in_cooldown()
    finally:
        memory.close()


def test_recent_queries_and_empty_allowlists_never_run_the_command(memory, fake):
    """Only keyword recalls with an allowlist consult the command."""
    memory.recall("", agents=["alice"])
    memory.recall("*", agents=["alice"])
    memory.recall("deploy", agents=[])
    assert fake.calls() == []


def test_query_is_one_argument_after_the_separator(memory, fake):
    """A query that looks like an option or shell text is passed verbatim."""
    memory.recall("--budget=9 $(rm -rf /)", agents=["alice"])
    assert fake.calls()[0][-2:] == ["--", "--budget=9 $(rm -rf /)"]


def test_sync_writes_send_store_to_the_command(tmp_path, fake):
    """With sync_writes, a write also goes to ``store`` with its Lucid type."""
    memory = open_lucid(tmp_path / "b.db", fake, sync_writes=True, project="/p")
    try:
        put(memory, "editor", "Helix", category="core")
        put(memory, "chat", "hi", category="conversation", session="s1")
        assert fake.calls() == [
            [
                "store",
                "--type=decision",
                "--agent=alice",
                "--project=/p",
                "--",
                "editor: Helix",
            ],
            [
                "store",
                "--type=conversation",
                "--agent=alice",
                "--project=/p",
                "--",
                "chat: hi",
            ],
        ]
        assert memory.get("editor", agents=["alice"]).content == "Helix"
    finally:
        memory.close()


def test_writes_and_reads_go_to_the_local_store(memory, fake):
    """get, list, count and forget are the local store's."""
    put(memory, "k", "v")
    assert memory.local.get("k", agents=["alice"]).content == "v"
    assert memory.count(agents=["alice"]) == 1
    assert memory.forget("k", agent="alice") is True
    assert fake.calls() == []


@pytest.mark.parametrize(
    ("label", "category"),
    [
        ("decision", "core"),
        ("Learning", "core"),
        ("solution", "core"),
        ("context", "conversation"),
        ("conversation", "conversation"),
        ("bug", "daily"),
        ("visual-note", "visual"),
        ("pattern", "pattern"),
    ],
)
def test_labels_map_to_categories(label, category):
    """Lucid types map to memory categories as in the reference."""
    assert lucid_category(label) == category


def test_parse_ignores_text_outside_the_block():
    """Only lines inside the first block, in the line format, are entries."""
    lines = [
        "- [decision] before the block",
        "<lucid-context>",
        "not a memory line",
        "- [decision]   ",
        "  - [decision score=7] trimmed and clamped  ",
        "</lucid-context>",
        "- [decision] after the block",
    ]
    output = "\n".join(lines)
    (entry,) = parse_context(output, agents=["alice"], now=NOW)
    assert (entry.content, entry.score) == ("trimmed and clamped", 1.0)
    assert parse_context("- [decision] x", agents=["alice"], now=NOW) == []


def test_rank_scores_floor_at_a_tenth():
    """Unscored lines rank by position, never below 0.1."""
    output = "\n".join(
        ["<lucid-context>", *(f"- [decision] fact {i}" for i in range(25))]
    )
    scores = [e.score for e in parse_context(output, agents=["a"], now=NOW)]
    assert scores[:2] == [1.0, 0.95]
    assert scores[-1] == 0.1
    assert T0 < NOW
