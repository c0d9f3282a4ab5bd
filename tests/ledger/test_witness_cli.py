"""``seal --witness`` and ``verify --witness`` at the command line.

Every target form (file:, sqlite:, a postgresql:// schema, - for the operator's
log read back from a saved file), text and JSON; a bad target, the ledger's own
database, another ledger's witness or a half-written file: exit 2, one line.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import drop_schema, fresh_schema_url, require_postgres
from tests.contracts.store_contract import new_stream, turn_events
from turnledger.ledger.store import open_store
from turnledger.pipeline.cli import main


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _ledger(path: str) -> None:
    with open_store(path) as store:
        stream = new_stream()
        store.append(stream, turn_events("t1"), expected_version=0)


def _cut_tail(path: str, after: int) -> None:
    """Delete the newest seal and every row after ``after`` (triggers dropped)."""
    raw = sqlite3.connect(path, isolation_level=None)
    for (name,) in raw.execute("SELECT name FROM sqlite_master WHERE type='trigger'"):
        raw.execute(f"DROP TRIGGER {name}")
    raw.execute(
        "DELETE FROM turnledger_seals WHERE id = (SELECT max(id) FROM turnledger_seals)"
    )
    raw.execute("DELETE FROM sqlite_sequence WHERE name = 'turnledger_seals'")
    raw.execute("INSERT INTO sqlite_sequence VALUES ('turnledger_seals', 1)")
    raw.execute("DELETE FROM stored_events WHERE rowid > ?", (after,))
    raw.close()


def test_file_witness_text_and_json(capsys, sqlite_path, tmp_path: Path):
    """seal --witness file: appends one JSON line per seal; verify reads them."""
    _ledger(sqlite_path)
    witness = tmp_path / "seals.jsonl"
    code, out, _ = _run(
        capsys, "--db", sqlite_path, "seal", "--witness", f"file:{witness}"
    )
    assert code == 0
    assert out.strip() == (
        f"seal 1: 1 streams to position 8, unsigned (no TURNLEDGER_SEAL_KEY), "
        f"witnessed in file:{witness}"
    )
    with open_store(sqlite_path) as store:
        store.append(new_stream(), turn_events("t2"), expected_version=0)
    code, out, _ = _run(
        capsys, "--db", sqlite_path, "seal", "--json", "--witness", f"file:{witness}"
    )
    report = json.loads(out)
    assert (code, report["index"], report["witness"]["position"]) == (0, 2, 16)
    lines = [json.loads(line) for line in witness.read_text().splitlines()]
    assert [(e["index"], e["seal"], e["position"]) for e in lines] == [
        (1, 1, 8),
        (2, 2, 16),
    ]
    assert {e["witness"] for e in lines} == {"turnledger-seal-v1"}
    code, out, _ = _run(
        capsys, "--db", sqlite_path, "verify", "--witness", f"file:{witness}"
    )
    assert (code, out.strip()) == (
        0,
        "ok: 16 events in 2 streams, last position 16, sealed to 16, 2 witnessed",
    )
    _cut_tail(sqlite_path, 8)
    code, out, _ = _run(capsys, "--db", sqlite_path, "verify")
    assert code == 0  # the newest seal and the tail gone, the sequence reset: unseen
    code, out, _ = _run(
        capsys, "--db", sqlite_path, "verify", "--json", "--witness", f"file:{witness}"
    )
    problems = json.loads(out)["problems"]
    assert code == 1
    assert [(p["kind"], p["position"]) for p in problems] == [
        ("seal_deleted", 16),
        ("truncated", 16),
    ]
    code, out, _ = _run(
        capsys, "--db", sqlite_path, "verify", "--witness", f"file:{witness}"
    )
    assert code == 1
    assert out.splitlines() == [
        (
            "position 16: seal_deleted: Witnessed seal 2 (index 2, to position 16) is "
            "gone from the ledger"
        ),
        (
            "position 16: truncated: Expected the ledger to reach position 16 "
            "(witnessed seal 2), found it ending at 8"
        ),
        (
            "2 problem(s): 8 events in 1 streams, last position 8, sealed to 8, "
            "2 witnessed"
        ),
    ]


def test_stdout_witness_read_back_from_the_saved_log(capsys, sqlite_path, tmp_path):
    """seal --witness - prints the entry line; the saved log (other lines and
    --json reports mixed in) is what verify --witness reads."""
    _ledger(sqlite_path)
    code, text_out, _ = _run(capsys, "--db", sqlite_path, "seal", "--witness", "-")
    assert code == 0
    entry, summary = text_out.splitlines()
    assert json.loads(entry)["index"] == 1
    assert summary.startswith("seal 1: 1 streams to position 8")
    with open_store(sqlite_path) as store:
        store.append(new_stream(), turn_events("t2"), expected_version=0)
    code, json_out, _ = _run(
        capsys, "--db", sqlite_path, "seal", "--json", "--witness", "-"
    )
    assert json.loads(json_out)["witness"]["index"] == 2
    refused = '{"seal_id":0,"witness":null,"problems":[]}\n'  # a refused seal's report
    log = tmp_path / "operator.log"
    log.write_text("cron: sealing\n" + text_out + refused + "cron: again\n" + json_out)
    code, out, _ = _run(capsys, "--db", sqlite_path, "verify", "--witness", str(log))
    assert code == 0
    assert out.strip().endswith("sealed to 16, 2 witnessed")
    with log.open("a") as f:
        f.write(entry[: len(entry) // 2] + "\n")  # a line cut half-way
    code, _, err = _run(capsys, "--db", sqlite_path, "verify", "--witness", str(log))
    assert code == 2
    assert "line 7" in err
    code, _, err = _run(capsys, "--db", sqlite_path, "verify", "--witness", "-")
    assert code == 2
    assert err.count("\n") == 1
    assert "stdout cannot be read back" in err


def test_sqlite_witness_is_append_only(capsys, sqlite_path, tmp_path):
    """sqlite:PATH keeps the entries in a table whose rows cannot be changed."""
    _ledger(sqlite_path)
    witness = tmp_path / "witness.db"
    code, _, _ = _run(
        capsys, "--db", sqlite_path, "seal", "--witness", f"sqlite:{witness}"
    )
    assert code == 0
    raw = sqlite3.connect(witness)
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        raw.execute("DELETE FROM turnledger_witness")
    raw.close()
    code, out, _ = _run(
        capsys,
        "--db",
        sqlite_path,
        "verify",
        "--json",
        "--witness",
        f"sqlite:{witness}",
    )
    assert (code, json.loads(out)["witnessed"]) == (0, 1)


def test_postgres_witness_schema(capsys, sqlite_path):
    """A postgresql:// witness keeps its own table in the schema it names."""
    url = fresh_schema_url(require_postgres())
    try:
        _ledger(sqlite_path)
        code, _, _ = _run(capsys, "--db", sqlite_path, "seal", "--witness", url)
        assert code == 0
        code, out, _ = _run(
            capsys, "--db", sqlite_path, "verify", "--json", "--witness", url
        )
        assert (code, json.loads(out)["witnessed"]) == (0, 1)
    finally:
        drop_schema(url)


@pytest.mark.parametrize(
    ("command", "target", "says"),
    [
        ("seal", "nowhere.jsonl", "Expected a witness target"),
        ("seal", "file:", "Expected a path after file:"),
        ("seal", "file:/nonexistent/seals.jsonl", "folder to exist"),
        ("verify", "file:/nonexistent/seals.jsonl", "found none"),
        ("verify", "sqlite:/nonexistent/witness.db", "Cannot open the witness"),
        ("seal", "ftp://example.org/x", "Expected a witness target"),
    ],
)
def test_bad_targets_exit_2_in_one_line(capsys, sqlite_path, command, target, says):
    """A target of no known form, or one that cannot be read: exit 2, one line,
    and no seal written."""
    _ledger(sqlite_path)
    code, out, err = _run(capsys, "--db", sqlite_path, command, "--witness", target)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1
    assert says in err
    with open_store(sqlite_path) as store:
        assert store.backend.seals() == []


@pytest.mark.parametrize("scheme", ["sqlite:", "file:"])
def test_the_ledger_itself_is_no_witness(capsys, sqlite_path, scheme):
    """Naming the ledger's own file is refused, and the file is left alone."""
    _ledger(sqlite_path)
    before = Path(sqlite_path).read_bytes()
    code, _, err = _run(
        capsys, "--db", sqlite_path, "seal", "--witness", f"{scheme}{sqlite_path}"
    )
    assert code == 2
    assert "outside the ledger's database" in err
    with open_store(sqlite_path) as store:
        assert store.backend.seals() == []
        assert store.count() == 8
    assert Path(sqlite_path).read_bytes()[:100] == before[:100]


def test_another_ledgers_witness_and_a_torn_line(capsys, sqlite_path, tmp_path):
    """A witness holding no seal of this ledger, or a line cut half-way: exit 2."""
    other = str(tmp_path / "other.db")
    _ledger(other)
    _ledger(sqlite_path)
    witness = tmp_path / "seals.jsonl"
    assert _run(capsys, "--db", other, "seal", "--witness", f"file:{witness}")[0] == 0
    code, _, err = _run(
        capsys, "--db", sqlite_path, "verify", "--witness", f"file:{witness}"
    )
    assert code == 2
    assert "none of it" in err
    assert (
        _run(capsys, "--db", sqlite_path, "seal", "--witness", f"file:{witness}")[0]
        == 0
    )
    with witness.open("a") as f:
        f.write('{"ledger": "x", "index": 3, "se')
    code, _, err = _run(
        capsys, "--db", sqlite_path, "verify", "--witness", f"file:{witness}"
    )
    assert code == 2
    assert err.count("\n") == 1
    assert "line 3" in err
