"""The time-travel commands: history/replay --at, fork, rewind, sessions (CLI shapes)."""

from __future__ import annotations

import json

import pytest

from tests.pipeline.demo_ledgers import demo_db, run  # noqa: F401 - demo_db is the db fixture
from turnledger.ledger.events import TurnStarted
from turnledger.ledger.store import open_store
from turnledger.pipeline.cli import main
from turnledger.pipeline.sessions import resolve_session


def turns(url: str, key: str) -> list[str]:
    with open_store(url) as store:
        ref = resolve_session(store, key)
        return [
            r.event.turn_id
            for r in store.read_stream(ref.stream_id)
            if isinstance(r.event, TurnStarted)
        ]


def test_history_and_replay_at_a_turn(db: str, capsys: pytest.CaptureFixture[str]):
    first = turns(db, "demo-1")[0]
    code, out, _ = run(capsys, "--db", db, "history", "demo-1", "--at", first)
    assert code == 0
    assert " at position " in out.splitlines()[0]
    code, out, _ = run(capsys, "--db", db, "history", "demo-1", "--at", first, "--json")
    messages = json.loads(out)
    assert messages[0]["text"].startswith("Remember")
    code, out, _ = run(capsys, "--db", db, "replay", "demo-1", "--at", first, "--json")
    assert code == 0
    report = json.loads(out)
    assert report["ok"] is True
    assert [m["text"] for m in report["history"]] == [m["text"] for m in messages]
    assert report["costs"]["calls"] == 2
    assert "editor" in report["memory"]
    assert report["next_recall"]["turn_id"] == turns(db, "demo-1")[1]


def test_at_refuses_what_it_cannot_resolve(db: str, capsys: pytest.CaptureFixture[str]):
    code, out, err = run(capsys, "--db", db, "history", "demo-1", "--at", "yesterday")
    assert code == 2
    assert out == ""
    assert err.startswith("turnledger: Expected a position, a turn id")
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize("command", ["history", "replay", "fork", "rewind"])
@pytest.mark.parametrize(
    ("at", "says"),
    [
        ("\u00b2", "Expected a position, a turn id"),  # a digit to str.isdigit only
        ("9" * 5_000, "Expected a position of at most 9223372036854775807"),
        (str(2**63), "Expected a position of at most 9223372036854775807"),
    ],
    ids=["superscript", "5000 digits", "2**63"],
)
def test_at_refuses_what_is_no_position_in_one_line(
    db: str, capsys: pytest.CaptureFixture[str], command: str, at: str, says: str
):
    flag = "--to" if command == "rewind" else "--at"
    before = run(capsys, "--db", db, "stats", "--json")[1]
    code, out, err = run(capsys, "--db", db, command, "demo-1", flag, at)
    assert (code, out) == (2, "")
    assert err.startswith(f"turnledger: {says}")
    assert len(err.splitlines()) == 1
    assert len(err) < 400
    assert run(capsys, "--db", db, "stats", "--json")[1] == before  # nothing written


def test_fork_rewind_and_sessions(db: str, capsys: pytest.CaptureFixture[str]):
    ids = turns(db, "demo-1")
    code, out, _ = run(
        capsys, "--db", db, "fork", "demo-1", "--at", ids[1], "--as", "b", "--json"
    )
    assert code == 0
    fork = json.loads(out)
    assert fork["session"] == "b"
    assert fork["source"] == "demo-1"
    code, out, _ = run(capsys, "--db", db, "fork", "demo-1", "--at", "1", "--as", "b")
    assert code == 2
    code, out, _ = run(capsys, "--db", db, "sessions", "--json")
    rows = {r["session"]: r for r in json.loads(out)}
    assert rows["b"]["forked_from"] == "demo-1"
    code, out, _ = run(capsys, "--db", db, "sessions", "b", "--json")
    assert json.loads(out)["forks"][0]["session"] == "b"
    code, out, _ = run(
        capsys, "--db", db, "rewind", "b", "--to", ids[0], "--memory", "supersede"
    )
    assert code == 0, out
    assert out.startswith("rewound demo/b to position ")
    assert "(supersede)" in out
    code, out, _ = run(capsys, "--db", db, "history", "b")
    assert "1 rewinds" in out.splitlines()[0]
    code, out, _ = run(capsys, "--db", db, "audit", "b", "--json")
    assert code == 0
    for fmt in ("openai-chat", "anthropic", "gemini"):
        code, out, _ = run(capsys, "--db", db, "export", "b", "--format", fmt)
        assert code == 0
        json.loads(out)
    code, out, _ = run(capsys, "--db", db, "replay", "b")
    assert code == 0


def test_time_travel_commands_have_help(capsys: pytest.CaptureFixture[str]):
    for name in ("fork", "rewind", "sessions"):
        with pytest.raises(SystemExit) as done:
            main([name, "--help"])
        assert done.value.code == 0
        assert "Example: turnledger" in capsys.readouterr().out


def test_memory_as_of_a_position(db: str, capsys: pytest.CaptureFixture[str]):
    """list/get/recall --at: stored, then forgotten; shredded reads [forgotten]."""
    base = ("--db", db, "memory")
    assert (
        run(capsys, *base, "store", "--agent", "ops", "ed", "Helix is my editor")[0]
        == 0
    )
    with open_store(db) as store:
        stored_at = store.max_position()
    assert run(capsys, *base, "forget", "--agent", "ops", "ed")[0] == 0
    code, out, _ = run(
        capsys, *base, "list", "--agent", "ops", "--at", str(stored_at), "--json"
    )
    assert code == 0
    (entry,) = json.loads(out)["entries"]
    assert (entry["key"], entry["status"]) == ("ed", "stored")
    assert entry["content"] == "Helix is my editor"
    code, out, _ = run(
        capsys, *base, "list", "--agent", "ops", "--at", "999999", "--json"
    )
    assert [e["status"] for e in json.loads(out)["entries"]] == ["forgotten"]
    code, out, _ = run(
        capsys,
        *base,
        "recall",
        "--agent",
        "ops",
        "editor",
        "--at",
        str(stored_at),
        "--json",
    )
    assert [e["key"] for e in json.loads(out)["entries"]] == ["ed"]
    code, out, _ = run(capsys, *base, "get", "--agent", "ops", "ed", "--at", "0")
    assert code == 1
    args = ("--agent", "ops", "--shred")
    assert run(capsys, *base, "store", *args, "pin", "1234 is the code")[0] == 0
    with open_store(db) as store:
        sealed_at = store.max_position()
    code, out, _ = run(
        capsys, *base, "get", *args, "pin", "--at", str(sealed_at), "--json"
    )
    assert json.loads(out)["entries"][0]["content"] == "1234 is the code"
    assert run(capsys, *base, "forget", *args, "pin")[0] == 0
    code, out, _ = run(
        capsys, *base, "get", *args, "pin", "--at", str(sealed_at), "--json"
    )
    assert json.loads(out)["entries"][0]["content"] == "[forgotten]"
    code, _, err = run(capsys, *base, "list", "--agent", "ops", "--at", "soon")
    assert code == 2
    assert err.startswith("turnledger: Expected a position or an ISO time")
