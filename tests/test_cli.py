"""The command line: shapes scripts rely on, exit codes, help, and the README."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.cli import COMMANDS, build_parser, main

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_demo_then_tail_json_shape(capsys, sqlite_path):
    """tail --json prints one object per line with the documented fields."""
    assert run(capsys, "--db", sqlite_path, "demo")[0] == 0
    code, out, _ = run(capsys, "--db", sqlite_path, "tail", "--json")
    assert code == 0
    lines = [json.loads(line) for line in out.splitlines()]
    assert len(lines) == 18
    for line in lines:
        assert {"position", "stream", "version", "type", "recorded_at", "event"} <= set(
            line
        )
        assert line["event"]["type"] == line["type"]
    assert [line["position"] for line in lines] == list(range(1, 19))
    assert lines[0]["type"] == "session.opened"


def test_tail_after_and_last(capsys, sqlite_path):
    """--after and --last select the end of the log."""
    run(capsys, "--db", sqlite_path, "demo")
    _, out, _ = run(capsys, "--db", sqlite_path, "tail", "--json", "--after", "15")
    assert [json.loads(x)["position"] for x in out.splitlines()] == [16, 17, 18]
    _, out, _ = run(capsys, "--db", sqlite_path, "tail", "--last", "2")
    assert len(out.splitlines()) == 2
    assert "turn.completed" in out.splitlines()[-1]


def test_demo_twice_records_two_sessions(capsys, sqlite_path):
    """Each demo run records a new session; the ledger stays consistent."""
    run(capsys, "--db", sqlite_path, "demo")
    _, out, _ = run(capsys, "--db", sqlite_path, "demo")
    assert "session demo-2" in out
    code, out, _ = run(capsys, "--db", sqlite_path, "verify")
    assert code == 0
    assert out.strip() == "ok: 36 events in 3 streams, last position 36"


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
    assert out.splitlines()[0].startswith(
        "position 19: corrupt: Corrupt record at position 19"
    )
    code, out, _ = run(capsys, "--db", sqlite_path, "verify", "--json")
    report = json.loads(out)
    assert code == 1
    assert report["problems"][0]["kind"] == "corrupt"
    assert report["events"] == 19


def test_stats(capsys, sqlite_path):
    """stats counts events per type."""
    run(capsys, "--db", sqlite_path, "demo")
    code, out, _ = run(capsys, "--db", sqlite_path, "stats", "--json")
    stats = json.loads(out)
    assert code == 0
    assert stats["events"] == 18
    assert stats["streams"] == 2
    assert stats["by_type"]["turn.started"] == 2
    assert stats["backend"] == "sqlite"


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


def test_follow_prints_new_events(sqlite_path, tmp_path):
    """tail --follow keeps printing events appended later."""
    env = {**os.environ, "TURNLEDGER_DB": sqlite_path}
    exe = shutil.which("turnledger") or f"{sys.prefix}/bin/turnledger"
    subprocess.run([exe, "init"], env=env, check=True, capture_output=True)
    follower = subprocess.Popen(
        [exe, "tail", "--follow", "--json"], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        subprocess.run([exe, "demo"], env=env, check=True, capture_output=True)
        seen = [json.loads(follower.stdout.readline()) for _ in range(18)]
        assert seen[-1]["position"] == 18
    finally:
        follower.kill()
        follower.wait()
        follower.stdout.close()


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_has_help_and_is_in_the_readme(name):
    """Each command is documented in the README and has help text."""
    assert f"turnledger {name}" in README
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert sub.choices[name].description
    assert COMMANDS[name].__doc__


def readme_console_commands() -> list[str]:
    blocks = re.findall(r"```console\n(.*?)```", README, re.DOTALL)
    return [
        line[2:]
        for block in blocks
        for line in block.splitlines()
        if line.startswith("$ ")
    ]


def readme_python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README, re.DOTALL)


def test_readme_console_examples_run(tmp_path):
    """Every `$ turnledger ...` line of the README runs and exits 0, in order."""
    commands = readme_console_commands()
    assert commands
    env = {**os.environ, "TURNLEDGER_DB": str(tmp_path / "readme.db")}
    exe = shutil.which("turnledger") or f"{sys.prefix}/bin/turnledger"
    for command in commands:
        args = command.split()
        assert args[0] == "turnledger"
        done = subprocess.run(
            [exe, *args[1:]],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, (command, done.stderr)


def test_readme_python_examples_run(tmp_path, monkeypatch):
    """Every Python block of the README executes."""
    monkeypatch.chdir(tmp_path)
    blocks = readme_python_blocks()
    assert blocks
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})  # noqa: S102 - the docs are the test


def test_readme_commands_are_the_ci_commands():
    """.ci/run runs README's test command verbatim."""
    install_blocks = re.findall(r"```sh\n(.*?)```", README, re.DOTALL)
    test_command = install_blocks[1].strip()
    assert test_command.endswith("python -m pytest")
    assert test_command in (ROOT / ".ci" / "run").read_text()
    assert "turnledger demo" in install_blocks[0]
