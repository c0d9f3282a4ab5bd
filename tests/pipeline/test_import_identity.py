"""Import identity and multi-file import (issue #25, item 3).

Default session keys are unique per source (the conversation's in-file id and
the file's digest); importing the same file again writes nothing and says so;
a real clash names the session and suggests --session; ``import`` takes several
files or directories with a per-file summary, and one bad file does not stop
the others (nothing of it written, exit 2 at the end). Real ledgers: SQLite and
PostgreSQL.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import pty
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CORPUS, IN_CI
from turnledger.ledger.store import open_store
from turnledger.pipeline.cli import main
from turnledger.pipeline.formats import read_transcript
from turnledger.pipeline.importer import ImportClashError, import_transcript

EXPECTED = CORPUS / "EXPECTED.tsv"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts"


@pytest.fixture(autouse=True)
def _corpus_present():
    if not EXPECTED.exists():
        if IN_CI:
            pytest.fail(f"the corpus must be present under CI=true at {CORPUS}")
        pytest.skip("no corpus")


def corpus_files(n: int) -> list[tuple[Path, int]]:
    """The first ``n`` corpus files holding conversations, with their counts."""
    with EXPECTED.open() as f:
        rows = [r for r in csv.DictReader(f, delimiter="\t") if int(r["conversations"])]
    return [(CORPUS / r["path"], int(r["conversations"])) for r in rows[:n]]


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def events_in(db: str) -> int:
    store = open_store(db)
    try:
        return store.max_position()
    finally:
        store.close()


@pytest.fixture(params=["sqlite", "postgresql"], name="db")
def _db(request, tmp_path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "l.db")
    return request.getfixturevalue("postgres_url")


def test_twenty_files_in_one_command_then_again_writes_nothing(capsys, db):
    """20 corpus files into one ledger; the same command again writes no row."""
    files = corpus_files(20)
    assert len(files) == 20
    names = [str(path) for path, _ in files]
    code, out, err = run(capsys, "--db", db, "import", *names, "--json")
    assert (code, err) == (0, "")  # no progress bar: stderr is no terminal
    report = json.loads(out)
    assert [f["file"] for f in report["files"]] == names
    assert all(f["error"] is None for f in report["files"])
    for entry, (path, conversations) in zip(report["files"], files, strict=True):
        assert entry["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
        assert len(entry["sessions"]) == conversations, path
        for session in entry["sessions"]:
            assert session["session"].endswith(f"-{entry['sha256'][:8]}")
    # Every session is its own: no two files (or conversations) share a key.
    keys = [(s["agent"], s["session"]) for s in report["sessions"]]
    assert len(set(keys)) == len(keys) == sum(c for _, c in files)
    written = events_in(db)
    assert report["written"] == written > 0
    assert {f["outcome"] for f in report["files"]} == {"imported"}

    code, out, err = run(capsys, "--db", db, "import", *names, "--json")
    assert code == 0, err
    again = json.loads(out)
    assert events_in(db) == written  # not one row more
    assert again["written"] == 0
    assert {f["outcome"] for f in again["files"]} == {"already_imported"}
    assert {s["outcome"] for s in again["sessions"]} == {"already_imported"}
    assert [s["session"] for s in again["sessions"]] == [
        s["session"] for s in report["sessions"]
    ]


def test_a_directory_with_a_bad_file_imports_the_others(capsys, tmp_path):
    """One bad file: reported, nothing of it written, the others imported, exit 2."""
    folder = tmp_path / "in"
    (folder / "sub").mkdir(parents=True)
    (folder / ".hidden").mkdir()
    good = [path for path, _ in corpus_files(3)]
    for i, path in enumerate(good):
        shutil.copy(path, (folder if i else folder / "sub") / path.name)
    shutil.copy(good[0], folder / ".hidden" / "skipped.jsonl")
    (folder / "notes.md").write_text("not a transcript, not searched\n")
    (folder / "broken.json").write_text('{"messages": [')
    db = str(tmp_path / "l.db")
    code, out, err = run(capsys, "--db", db, "import", str(folder))
    assert code == 2
    assert err.count("\n") == 1
    assert err.startswith(
        "turnledger: Expected every file imported, found 1 of 4 not imported"
    )
    assert "broken.json" in err
    lines = out.splitlines()
    assert any(
        line.startswith(f"{folder / 'broken.json'}: not imported (nothing written): ")
        for line in lines
    )
    assert lines[-1].startswith("4 files: 3 imported, 0 already imported, 1 not")
    assert "skipped.jsonl" not in out
    assert "notes.md" not in out
    store = open_store(db)
    try:
        channels = {s.session_key for s in _opened(store)}
    finally:
        store.close()
    assert len(channels) == sum(c for _, c in corpus_files(3))


def _opened(store):
    from turnledger.ledger.events import SessionOpened

    return [r.event for r in store.iter_all(types=[SessionOpened])]


def test_a_clash_names_the_session_and_suggests_session(capsys, tmp_path):
    """Same key, other content: one line, exit 2, nothing written."""
    first, second = (path for path, _ in corpus_files(2))
    db = str(tmp_path / "l.db")
    assert run(capsys, "--db", db, "import", str(first), "--session", "mine")[0] == 0
    before = events_in(db)
    code, out, err = run(capsys, "--db", db, "import", str(second), "--session", "mine")
    assert (code, out) == (2, "")
    assert err == (
        "turnledger: Expected session imported/mine to be new or this file's earlier"
        f" import, found {before} events from another source; pass --session KEY to"
        " import the file under another key\n"
    )
    assert events_in(db) == before
    # The same file under the same key again is the same import.
    code, out, _ = run(capsys, "--db", db, "import", str(first), "--session", "mine")
    assert code == 0
    assert out.startswith("already imported mine (agent imported): ")
    assert events_in(db) == before


def test_two_files_with_the_same_in_file_id_get_two_sessions(tmp_path):
    """The issue's case: both conversations are `1`; the digests tell them apart."""
    one = tmp_path / "a.json"
    two = tmp_path / "b.json"
    one.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}))
    two.write_text(json.dumps({"messages": [{"role": "user", "content": "bye"}]}))
    store = open_store(str(tmp_path / "l.db"))
    try:
        reports = [
            import_transcript(
                store,
                read_transcript(path),
                source=hashlib.sha256(path.read_bytes()).hexdigest(),
            )
            for path in (one, two)
        ]
        keys = [r.sessions[0].session for r in reports]
        assert keys[0] != keys[1]
        for path, key in zip((one, two), keys, strict=True):
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            assert key.endswith(f"-{digest[:8]}")
        # One key given twice to two sources: the second is refused, naming it.
        import_transcript(store, read_transcript(one), session="x", source="a" * 64)
        second = read_transcript(two)
        with pytest.raises(ImportClashError, match="session imported/x "):
            import_transcript(store, second, session="x", source="b" * 64)
    finally:
        store.close()


def test_session_takes_one_file(capsys, tmp_path):
    first, second = (str(path) for path, _ in corpus_files(2))
    code, out, err = run(
        capsys,
        "--db",
        str(tmp_path / "l.db"),
        "import",
        first,
        second,
        "--session",
        "k",
    )
    assert (code, out) == (2, "")
    assert err == "turnledger: Expected one file with --session, found 2\n"


def test_an_empty_directory_is_refused(capsys, tmp_path):
    (tmp_path / "empty").mkdir()
    code, out, err = run(
        capsys, "--db", str(tmp_path / "l.db"), "import", str(tmp_path / "empty")
    )
    assert (code, out) == (2, "")
    assert "found none" in err


def test_an_empty_name_is_refused_not_read_as_the_working_directory(
    capsys, tmp_path, monkeypatch
):
    """``Path("")`` is ``.``: an empty name (an unset shell variable) would have
    imported the whole working directory."""
    monkeypatch.chdir(tmp_path)
    shutil.copy(corpus_files(1)[0][0], tmp_path / "a.jsonl")
    code, out, err = run(capsys, "--db", "l.db", "import", "")
    assert (code, out) == (2, "")
    assert err == (
        "turnledger: Expected a file or directory to import, found an empty name\n"
    )
    assert not (tmp_path / "l.db").exists() or open_store("l.db").count() == 0


def test_a_directory_holding_the_ledger_imports_all_but_the_ledger(
    capsys, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    shutil.copy(corpus_files(1)[0][0], tmp_path / "a.jsonl")
    assert run(capsys, "--db", "l.db", "init")[0] == 0
    code, out, err = run(capsys, "--db", "l.db", "import", ".", "--json")
    assert (code, err) == (0, "")
    assert [f["file"] for f in json.loads(out)["files"]] == ["a.jsonl"]
    code, out, _ = run(capsys, "--db", "sqlite:///l.db", "import", str(tmp_path))
    assert code == 0
    assert "already imported" in out


def test_fixture_directories_import_in_one_command(capsys, tmp_path):
    """The test fixtures' folders (several formats, auto-detected) in one command."""
    folders = [str(FIXTURES / name) for name in ("adk", "har", "openhands")]
    db = str(tmp_path / "l.db")
    code, out, err = run(capsys, "--db", db, "import", *folders, "--json")
    report = json.loads(out)
    failed = [f for f in report["files"] if f["outcome"] == "failed"]
    assert code == (2 if failed else 0), err
    assert report["format"] == "mixed"
    assert {f["format"] for f in report["files"] if f["outcome"] != "failed"} >= {
        "adk",
        "har",
    }
    written = events_in(db)
    code, out, _ = run(capsys, "--db", db, "import", *folders, "--json")
    assert events_in(db) == written
    assert json.loads(out)["written"] == 0


def test_the_progress_bar_shows_only_on_a_terminal(capsys, tmp_path):
    """stderr a terminal: one bar line per file; otherwise nothing but errors."""
    files = [str(path) for path, _ in corpus_files(3)]
    code, _, err = run(capsys, "--db", str(tmp_path / "a.db"), "import", *files)
    assert (code, err) == (0, "")
    exe = shutil.which("turnledger") or f"{sys.prefix}/bin/turnledger"
    main_fd, terminal = pty.openpty()
    try:
        done = subprocess.run(
            [exe, "--db", str(tmp_path / "b.db"), "import", *files],
            stdout=subprocess.PIPE,
            stderr=terminal,
            timeout=120,
            check=False,
        )
        os.close(terminal)
        shown = b""
        while True:
            try:
                chunk = os.read(main_fd, 4096)
            except OSError:  # the terminal closed (EIO)
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(main_fd)
    assert done.returncode == 0
    for i in (1, 2, 3):
        assert f"[{i}/3] ".encode() in shown
    assert b"3 files: 3 imported" in done.stdout
    assert b"[1/3]" not in done.stdout


def test_an_otlp_file_among_transcripts(capsys, tmp_path):
    """A detected OTLP JSON file goes through the span import, once."""
    from tests.pipeline.collect.spans import (
        ANSWER,
        USER,
        chat_attributes,
        json_request,
        json_span,
    )

    spans = tmp_path / "spans.json"
    trace = "5b8efff798038103d269b633813fc60c"
    span = json_span(
        trace,
        "00f067aa0ba902b7",
        chat_attributes(inputs=[USER], outputs=[ANSWER]),
        start=1,
    )
    spans.write_text(json.dumps(json_request([span])))
    transcript = str(corpus_files(1)[0][0])
    db = str(tmp_path / "l.db")
    code, out, err = run(capsys, "--db", db, "import", str(spans), transcript, "--json")
    assert (code, err) == (0, "")
    first = json.loads(out)["files"]
    assert [(f["format"], f["outcome"]) for f in first] == [
        ("otlp", "imported"),
        (first[1]["format"], "imported"),
    ]
    assert [s["session"] for s in first[0]["sessions"]] == [trace]
    written = events_in(db)
    code, out, _ = run(capsys, "--db", db, "import", str(spans), transcript, "--json")
    assert code == 0
    assert [f["outcome"] for f in json.loads(out)["files"]] == [
        "already_imported",
        "already_imported",
    ]
    assert events_in(db) == written
