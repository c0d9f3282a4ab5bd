"""The command line: shapes scripts rely on, exit codes, help, the lifecycle doc."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from turnledger.pipeline.cli import COMMANDS, build_parser, main

ROOT = Path(__file__).resolve().parents[1]
EXE = shutil.which("turnledger") or f"{sys.prefix}/bin/turnledger"


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    """Commands write their default files (data dir, views) in the current folder."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TURNLEDGER_DB", raising=False)
    monkeypatch.delenv("TURNLEDGER_CONFIG", raising=False)


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def stats(capsys, db: str) -> dict:
    return json.loads(run(capsys, "--db", db, "stats", "--json")[1])


def test_demo_then_tail_json_shape(capsys, sqlite_path):
    """tail --json prints one object per line with the documented fields."""
    assert run(capsys, "--db", sqlite_path, "demo")[0] == 0
    code, out, _ = run(capsys, "--db", sqlite_path, "tail", "--json")
    assert code == 0
    lines = [json.loads(line) for line in out.splitlines()]
    total = stats(capsys, sqlite_path)["events"]
    assert len(lines) == total > 30
    for line in lines:
        assert {"position", "stream", "version", "type", "recorded_at", "event"} <= set(
            line
        )
        assert line["event"]["type"] == line["type"]
    assert [line["position"] for line in lines] == list(range(1, total + 1))
    assert lines[0]["type"] == "session.opened"


def test_demo_shows_every_lifecycle_step(capsys, sqlite_path):
    """The demo's session has parallel calls, a failure, media, a bound and a trim."""
    code, out, _ = run(capsys, "--db", sqlite_path, "demo")
    assert code == 0
    by_type = stats(capsys, sqlite_path)["by_type"]
    for tag in (
        "media.attached",
        "history.trimmed",
        "memory.stored",
        "memory.recalled",
        "tool_result.recorded",
        "model.called",
        "prompt.assembled",
    ):
        assert by_type.get(tag, 0) >= 1, tag
    assert "[trim] [earlier turns omitted to fit the context window]" in out
    assert "[IMAGE:media/" in out
    assert "bounded: 13899 -> 600 characters" in out
    assert "[tool file_read error]" in out
    assert "release_day [core]: The release is on Friday." in out
    assert "| Surface | Owner | Durability |" in out
    assert run(capsys, "--db", sqlite_path, "audit")[0] == 0
    assert run(capsys, "--db", sqlite_path, "replay", "demo-1")[0] == 0


def test_tail_after_and_last(capsys, sqlite_path):
    """--after and --last select the end of the log."""
    run(capsys, "--db", sqlite_path, "demo")
    total = stats(capsys, sqlite_path)["events"]
    _, out, _ = run(
        capsys, "--db", sqlite_path, "tail", "--json", "--after", str(total - 3)
    )
    assert [json.loads(x)["position"] for x in out.splitlines()] == [
        total - 2,
        total - 1,
        total,
    ]
    _, out, _ = run(capsys, "--db", sqlite_path, "tail", "--last", "2")
    assert len(out.splitlines()) == 2
    assert "turn.completed" in out.splitlines()[-1]


def test_demo_twice_records_two_sessions(capsys, sqlite_path):
    """Each demo run records a new session; the ledger stays consistent."""
    run(capsys, "--db", sqlite_path, "demo")
    once = stats(capsys, sqlite_path)["events"]
    _, out, _ = run(capsys, "--db", sqlite_path, "demo")
    assert "session demo-2" in out
    code, out, _ = run(capsys, "--db", sqlite_path, "verify")
    twice = stats(capsys, sqlite_path)["events"]
    assert code == 0
    assert twice > once
    assert out.strip() == f"ok: {twice} events in 3 streams, last position {twice}"


def test_verify_exit_1_lists_problems(capsys, sqlite_path):
    """A corrupt row makes verify list it and exit 1."""
    run(capsys, "--db", sqlite_path, "demo")
    raw = sqlite3.connect(sqlite_path)
    stream, head = raw.execute(
        "SELECT originator_id, max(originator_version) FROM stored_events "
        "GROUP BY originator_id ORDER BY 2 DESC LIMIT 1"
    ).fetchone()
    raw.execute(
        "INSERT INTO stored_events VALUES (?,?,?,?)",
        (stream, head + 1, "turn.started", b"junk"),
    )
    raw.commit()
    raw.close()
    code, out, _ = run(capsys, "--db", sqlite_path, "verify")
    assert code == 1
    code_json, out_json, _ = run(capsys, "--db", sqlite_path, "verify", "--json")
    report = json.loads(out_json)
    bad = report["events"]
    assert code_json == 1
    assert out.splitlines()[0].startswith(
        f"position {bad}: corrupt: Corrupt record at position {bad}"
    )
    assert report["problems"][0]["kind"] == "corrupt"


def test_stats(capsys, sqlite_path):
    """stats counts events per type."""
    run(capsys, "--db", sqlite_path, "demo")
    code, out, _ = run(capsys, "--db", sqlite_path, "stats", "--json")
    result = json.loads(out)
    assert code == 0
    assert result["events"] == sum(result["by_type"].values())
    assert result["streams"] == 2  # the session and the agent's memory stream
    assert result["by_type"]["turn.started"] == 4
    assert result["by_type"]["turn.completed"] == 4
    assert result["backend"] == "sqlite"


def test_init_on_postgres(capsys, postgres_url):
    """A postgresql:// URL selects the PostgreSQL backend."""
    code, out, _ = run(capsys, "--db", postgres_url, "init")
    assert code == 0
    assert out.startswith("ledger ready: postgresql")


def test_unusable_database_exits_2(capsys, tmp_path):
    """An unusable target prints one line on stderr and exits 2."""
    code, _, err = run(capsys, "--db", str(tmp_path / "missing-dir" / "x.db"), "stats")
    assert code == 2
    assert err.startswith("turnledger: Cannot open the SQLite ledger at")
    assert len(err.splitlines()) == 1


def test_bad_config_exits_2_naming_the_key(capsys, tmp_path):
    """A configuration error names the key and exits 2."""
    (tmp_path / "turnledger.toml").write_text(
        '[agents.ops]\nmemory = "sqlite"\nread_memory_from = ["ops"]\n'
    )
    code, _, err = run(capsys, "memory", "list", "--agent", "ops")
    assert code == 2
    assert "lists itself in read_memory_from" in err


def test_follow_prints_new_events(sqlite_path, tmp_path):
    """tail --follow keeps printing events appended later."""
    env = {**os.environ, "TURNLEDGER_DB": sqlite_path}
    subprocess.run(
        [EXE, "init"], env=env, check=True, capture_output=True, cwd=tmp_path
    )
    follower = subprocess.Popen(
        [EXE, "tail", "--follow", "--json"],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    try:
        subprocess.run(
            [EXE, "demo"], env=env, check=True, capture_output=True, cwd=tmp_path
        )
        done = subprocess.run(
            [EXE, "stats", "--json"],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        total = json.loads(done.stdout)["events"]
        seen = [json.loads(follower.stdout.readline()) for _ in range(total)]
        assert seen[-1]["position"] == total
    finally:
        follower.kill()
        follower.wait()
        follower.stdout.close()


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_has_help(name):
    """Each command has help text (tests/test_docs.py checks it is documented)."""
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert sub.choices[name].description
    assert COMMANDS[name].__doc__


def test_lifecycle_doc_is_generated_from_the_code(capsys):
    """docs/lifecycle.md is exactly what `turnledger lifecycle` prints."""
    code, out, _ = run(capsys, "lifecycle")
    assert code == 0
    assert out == (ROOT / "docs" / "lifecycle.md").read_text()


def test_lifecycle_json_holds_every_surface_of_the_table(capsys):
    """--json: the declarations the Markdown table is rendered from, and the
    encryption-at-rest rows; every surface of the table is there."""
    code, out, _ = run(capsys, "lifecycle", "--json")
    assert code == 0
    found = json.loads(out)
    assert set(found) == {"surfaces", "at_rest"}
    table = (ROOT / "docs" / "lifecycle.md").read_text()
    for surface in found["surfaces"]:
        assert set(surface) == {
            "surface",
            "owner",
            "durability",
            "scope",
            "reviewers_check",
        }
        assert f"| {surface['surface']} |" in table
    assert {row["encrypted"] for row in found["at_rest"]} == {True, False}
    assert all(f"| {row['surface']} |" in table for row in found["at_rest"])


def test_logs_are_scrubbed_and_bounded():
    """The CLI's log processor scrubs secrets and bounds every string value."""
    from turnledger.pipeline.cli import scrub_log_values

    event = scrub_log_values(
        None,
        "info",
        {"event": "x", "error": "token=sk-abcdefghijklmnopqrstuv " + "y" * 500},
    )
    assert "abcdefghijklmnop" not in event["error"]
    assert len(event["error"]) <= 201


def test_numbers_beyond_64_bits_are_refused(capsys, sqlite_path):
    """A position past the database's integer range is a usage error, not a crash."""
    with pytest.raises(SystemExit) as caught:
        main(["--db", sqlite_path, "tail", "--after", str(2**63)])
    assert caught.value.code == 2
    assert "expected a number from 0 to" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("\u00b2", "expected a whole number, found '\u00b2'"),  # isdigit, not int
        ("\u0663", "expected a whole number, found '\u0663'"),  # int() reads 3
        ("1_000", "expected a whole number"),
        (" 5", "expected a whole number"),
        ("9" * 5_000, "expected a number from 0 to 9223372036854775807, found '999"),
        ("-1", "expected a number from 0 to"),
    ],
    ids=["superscript", "arabic-indic", "underscore", "space", "5000 digits", "-1"],
)
def test_a_count_is_ascii_digits_refused_in_one_bounded_line(
    capsys, sqlite_path, text, says
):
    with pytest.raises(SystemExit) as caught:
        main(["--db", sqlite_path, "tail", "--last", text])
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert says in err
    assert len(err.splitlines()[-1]) < 400


def test_a_count_may_have_leading_zeros(capsys, sqlite_path):
    assert main(["--db", sqlite_path, "tail", "--last", "007", "--json"]) == 0


@pytest.mark.parametrize(
    "argv",
    [
        ["--db", "", "stats"],
        ["--config", "", "stats"],
        ["project", "status", "--views", ""],
        ["erase", "--user", "u", "--views", ""],
    ],
    ids=["--db", "--config", "project --views", "erase --views"],
)
def test_an_empty_place_is_refused_not_read_as_the_default(
    capsys, tmp_path, monkeypatch, argv
):
    """An empty --db opened (and created) ./turnledger.db as if none was given."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as caught:
        main(argv)
    assert caught.value.code == 2
    assert "expected a path or URL, found an empty one" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
