"""The ledger's CLI edges: seal, verify after an upgrade, a locked ledger."""

from __future__ import annotations

import json
import sqlite3
import time

import pytest

from tests.contracts.store_contract import new_stream, turn_events
from turnledger.ledger.store import open_store
from turnledger.pipeline.cli import main


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_seal_then_verify(capsys, sqlite_path, monkeypatch):
    """seal writes a signed seal; verify reports it; a wrong key is a forged seal."""
    monkeypatch.setenv("TURNLEDGER_SEAL_KEY", "secret")
    with open_store(sqlite_path) as store:
        store.append(new_stream(), turn_events("t1"), expected_version=0)
    code, out, _ = _run(capsys, "--db", sqlite_path, "seal")
    assert code == 0
    assert out.strip() == "seal 1: 1 streams to position 8, signed"
    code, out, _ = _run(capsys, "--db", sqlite_path, "verify")
    assert (code, out.strip()) == (
        0,
        "ok: 8 events in 1 streams, last position 8, sealed to 8",
    )
    code, out, _ = _run(capsys, "--db", sqlite_path, "seal", "--json")
    assert json.loads(out)["seal_id"] == 2
    monkeypatch.setenv("TURNLEDGER_SEAL_KEY", "another")
    code, out, _ = _run(capsys, "--db", sqlite_path, "verify", "--json")
    report = json.loads(out)
    assert code == 1
    # Every seal is checked: both are named.
    assert [p["kind"] for p in report["problems"]] == ["seal_forged", "seal_forged"]


def test_seal_refuses_a_tampered_ledger(capsys, sqlite_path):
    """A ledger with problems is not sealed: exit 1, problems listed, no seal."""
    with open_store(sqlite_path) as store:
        store.append(new_stream(), turn_events("t1"), expected_version=0)
    raw = sqlite3.connect(sqlite_path)
    raw.execute("DROP TRIGGER stored_events_no_update")
    raw.execute("UPDATE stored_events SET state = state || x'20' WHERE rowid = 3")
    raw.commit()
    raw.close()
    code, out, _ = _run(capsys, "--db", sqlite_path, "seal")
    assert code == 1
    assert out.splitlines() == [
        out.splitlines()[0],
        "not sealed: 1 problem(s)",
    ]
    assert out.startswith("position 3: edited_payload: ")
    with open_store(sqlite_path) as store:
        assert store.backend.latest_seal() is None


def test_locked_ledger_prints_one_line_and_exits_2(capsys, sqlite_path):
    """Another writer holding the lock: one line after the 5 s busy timeout, exit 2."""
    with open_store(sqlite_path) as store:
        store.append(new_stream(), turn_events("t1"), expected_version=0)
    other = sqlite3.connect(sqlite_path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        started = time.monotonic()
        code, out, err = _run(capsys, "--db", sqlite_path, "seal")
        waited = time.monotonic() - started
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert code == 2
    assert out == ""
    assert err == (
        f"turnledger: the ledger is locked by another writer (waited {round(waited)} s)\n"
    )
    assert "waited 5 s" in err
