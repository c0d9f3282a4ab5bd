"""import / audit / export / replay / history on real transcripts and the ledger."""

from __future__ import annotations

import csv
import json

import pytest

from tests.conftest import CORPUS, IN_CI
from turnledger.pipeline.cli import main
from turnledger.pipeline.formats import count_pairing, parse_transcript

EXPECTED = CORPUS / "EXPECTED.tsv"


def corpus_rows() -> list[dict[str, str]]:
    if not EXPECTED.exists():
        return []
    with EXPECTED.open() as f:
        return list(csv.DictReader(f, delimiter="\t"))


@pytest.fixture(autouse=True)
def _corpus_present():
    if not EXPECTED.exists():
        if IN_CI:
            pytest.fail(f"the corpus must be present under CI=true at {CORPUS}")
        pytest.skip("no corpus")


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_audit_json_reproduces_expected_for_every_corpus_file(capsys):
    """`turnledger audit FILE --json` gives EXPECTED.tsv's counts for all 128 files."""
    rows = corpus_rows()
    assert len(rows) == 128
    for row in rows:
        code, out, err = run(capsys, "audit", str(CORPUS / row["path"]), "--json")
        assert err == "", (row["path"], err)
        report = json.loads(out)
        got = [
            report[k]
            for k in (
                "conversations",
                "tool_calls",
                "tool_results",
                "unpaired_calls",
                "unpaired_results",
            )
        ]
        want = [
            int(row[k])
            for k in (
                "conversations",
                "tool_calls",
                "tool_results",
                "unpaired_calls",
                "unpaired_results",
            )
        ]
        assert got == want, row["path"]
        unpaired = int(row["unpaired_calls"]) + int(row["unpaired_results"])
        assert code == (1 if unpaired else 0), row["path"]
        assert len(report["violations"]) == unpaired, row["path"]
        for violation in report["violations"] + report["warnings"]:
            assert {"kind", "id", "conversation", "position"} <= set(violation)
        assert isinstance(report["skipped"], dict)
        assert isinstance(report["problems"], list)


def test_audit_unreadable_input_exits_2(capsys, tmp_path):
    """A file that is no transcript is exit 2 with one line on stderr."""
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    code, _, err = run(capsys, "audit", str(bad))
    assert code == 2
    assert err.startswith("turnledger: ")


def test_import_then_audit_history_export_replay(capsys, sqlite_path):
    """An imported real session audits the same in the ledger and exports valid."""
    source = CORPUS / "claude-code-log" / "edge_cases.jsonl"
    code, out, _ = run(
        capsys, "--db", sqlite_path, "import", str(source), "--agent", "ops", "--json"
    )
    assert code == 0
    report = json.loads(out)
    assert [s["agent"] for s in report["sessions"]] == ["ops", "ops"]
    assert all({"session", "agent", "events"} <= set(s) for s in report["sessions"])
    assert report["skipped"]
    assert {p["line"] for p in report["problems"]} >= {13, 15, 16}
    code, out, _ = run(capsys, "--db", sqlite_path, "audit", "--agent", "ops", "--json")
    ledger_audit = json.loads(out)
    file_audit = json.loads(run(capsys, "audit", str(source), "--json")[1])
    for key in ("tool_calls", "tool_results", "unpaired_calls", "unpaired_results"):
        assert ledger_audit[key] == file_audit[key], key
    assert code == 1  # the transcript's dangling calls are still in the record
    session = report["sessions"][0]["session"]
    for fmt in ("openai-chat", "anthropic", "openai-responses"):
        code, out, _ = run(
            capsys, "--db", sqlite_path, "export", session, "--format", fmt
        )
        assert code == 0
        payload = parse_transcript(out.encode(), format=fmt)
        counts = count_pairing(payload)
        assert (counts.unpaired_calls, counts.unpaired_results) == (0, 0), fmt
    code, out, _ = run(capsys, "--db", sqlite_path, "replay", session, "--json")
    assert code == 0
    assert json.loads(out)["ok"] is True
    code, out, _ = run(capsys, "--db", sqlite_path, "history", session)
    assert code == 0
    assert out.startswith(f"session ops/{session}")


def test_failed_import_writes_nothing(capsys, sqlite_path):
    """Importing into a session another file wrote fails whole; nothing changes."""
    source = CORPUS / "claude-code-log" / "edit_tool.jsonl"
    other = CORPUS / "claude-code-log" / "dag_simple.jsonl"
    args = ("--db", sqlite_path, "import", "--session", "s")
    assert run(capsys, *args, str(source))[0] == 0
    before = json.loads(run(capsys, "--db", sqlite_path, "stats", "--json")[1])[
        "events"
    ]
    code, _, err = run(capsys, *args, str(other))
    assert code == 2
    assert "Expected session imported/s to be new" in err
    after = json.loads(run(capsys, "--db", sqlite_path, "stats", "--json")[1])["events"]
    assert after == before


def test_export_trims_to_budget_with_one_breadcrumb(capsys, sqlite_path):
    """A small budget keeps the newest turns behind a single breadcrumb."""
    source = (
        CORPUS
        / "claude-code-log"
        / "real_projects"
        / "-Users-dain-workspace-claude-code-log-sample"
        / "b45ad5d8-81fb-4bcb-baba-19d9f503d731.jsonl"
    )
    code, out, _ = run(
        capsys, "--db", sqlite_path, "import", str(source), "--session", "big", "--json"
    )
    assert code == 0
    session = json.loads(out)["sessions"][0]["session"]
    _, full, _ = run(
        capsys, "--db", sqlite_path, "export", session, "--format", "openai-chat"
    )
    _, small, _ = run(
        capsys,
        "--db",
        sqlite_path,
        "export",
        session,
        "--format",
        "openai-chat",
        "--budget-tokens",
        "2000",
        "--max-tool-result-chars",
        "500",
    )
    full_messages = json.loads(full)["messages"]
    small_messages = json.loads(small)["messages"]
    assert len(small_messages) < len(full_messages)
    crumbs = [
        m
        for m in small_messages
        if m.get("content") == "[earlier turns omitted to fit the context window]"
    ]
    assert len(crumbs) == 1
    counts = count_pairing(parse_transcript(small.encode(), format="openai-chat"))
    assert (counts.unpaired_calls, counts.unpaired_results) == (0, 0)
    for m in small_messages:
        if m["role"] == "tool":
            assert len(m["content"]) <= 500 + len(
                "\n\n[... 99999999 characters truncated ...]\n\n"
            )


def test_unknown_session_is_exit_2(capsys, sqlite_path):
    """Naming a session that does not exist is a clear error."""
    run(capsys, "--db", sqlite_path, "init")
    code, _, err = run(
        capsys, "--db", sqlite_path, "export", "nope", "--format", "anthropic"
    )
    assert code == 2
    assert "found no session 'nope'" in err


def test_import_every_corpus_file_keeps_the_ledger_whole(capsys, tmp_path):
    """Every corpus transcript imports (or is refused whole) and verify stays clean."""
    db = str(tmp_path / "all.db")
    imported = 0
    for row in corpus_rows():
        code, _, _ = run(
            capsys,
            "--db",
            db,
            "import",
            str(CORPUS / row["path"]),
            "--session",
            row["path"].replace("/", "_"),
        )
        imported += code == 0
    assert imported >= 120
    assert run(capsys, "--db", db, "verify")[0] == 0
