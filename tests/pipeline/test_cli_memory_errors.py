"""``turnledger memory ...`` on a failing memory store: one line, exit 2.

And where memory files live: beside a SQLite ledger, or in the ledger's own
home under ``data_dir`` for PostgreSQL, so two ledgers never share them.
"""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.conftest import drop_schema, fresh_schema_url
from turnledger.ledger.store import open_store
from turnledger.pipeline.cli import main
from turnledger.pipeline.config import load_config
from turnledger.pipeline.memory import (
    MemoryService,
    ledger_digest,
    memory_home,
)
from turnledger.projections.memory.postgres import split_url
from turnledger.projections.memory.postgres._sql import TABLE


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TURNLEDGER_DB", raising=False)
    monkeypatch.delenv("TURNLEDGER_CONFIG", raising=False)


def cli(capsys, *args: str, db: str = "l.db") -> tuple[int, str, str]:
    code = main(["--db", db, *args])
    out, err = capsys.readouterr()
    return code, out, err


def one_line_refusal(code: int, out: str, err: str, *needles: str) -> None:
    assert code == 2, (out, err)
    assert out == ""
    assert err.endswith("\n")
    assert err.count("\n") == 1, err
    assert err.startswith("turnledger: ")
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, err


def stored(capsys, key: str, content: str = "a fact", *, db: str = "l.db") -> int:
    return cli(capsys, "memory", "store", "--agent", "ops", key, content, db=db)[0]


def keys(capsys, *, db: str = "l.db") -> list[str]:
    code, out, err = cli(capsys, "memory", "list", "--agent", "ops", "--json", db=db)
    assert code == 0, err
    import json

    return sorted(e["key"] for e in json.loads(out))


@contextlib.contextmanager
def write_locked(path: Path) -> Iterator[None]:
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        other.execute("ROLLBACK")
        other.close()


def test_locked_memory_store_is_one_line(capsys, tmp_path):
    assert stored(capsys, "first") == 0
    with write_locked(tmp_path / "l.memory.db"):
        code, out, err = cli(capsys, "memory", "store", "--agent", "ops", "k", "v")
    one_line_refusal(
        code, out, err, "sqlite memory store at", "locked by another writer", "5 s"
    )
    assert keys(capsys) == ["first"]  # refused before anything was recorded


def test_read_only_memory_store_is_one_line(capsys, tmp_path):
    assert stored(capsys, "first") == 0
    path = tmp_path / "l.memory.db"
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    run = subprocess.run(["chattr", "+i", str(path)], capture_output=True, check=False)
    if run.returncode != 0:
        pytest.skip(f"cannot make the memory file immutable: {run.stderr!r}")
    try:
        code, out, err = cli(capsys, "memory", "store", "--agent", "ops", "k", "v")
        one_line_refusal(code, out, err, "sqlite memory store at", "l.memory.db")
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=False)


def test_full_disk_memory_store_is_one_line(capsys, tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    run = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=160k", "tmpfs", str(disk)],
        capture_output=True,
        check=False,
    )
    if run.returncode != 0:
        pytest.skip(f"cannot mount a tiny tmpfs: {run.stderr!r}")
    try:
        (tmp_path / "turnledger.toml").write_text(
            f'[agents.ops]\nmemory = "sqlite"\n'
            f'[storage.sqlite.default]\npath = "{disk / "m.db"}"\n'
        )
        outcome = (0, "", "")
        for n in range(80):
            outcome = cli(
                capsys, "memory", "store", "--agent", "ops", f"k{n}", "word " * 3000
            )
            if outcome[0] != 0:
                break
        one_line_refusal(*outcome, "sqlite memory store at", "full")
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_killed_postgres_memory_connection_is_one_line(capsys, tmp_path, postgres_url):
    (tmp_path / "turnledger.toml").write_text(
        f'[agents.ops]\nmemory = "postgres"\n'
        f'[storage.postgres.default]\nurl = "{postgres_url}"\n'
    )
    assert stored(capsys, "first") == 0
    conninfo, schema = split_url(postgres_url)
    with psycopg.connect(conninfo, autocommit=True) as admin:
        # The server kills the connection that writes the next memory row.
        admin.execute(
            f'CREATE FUNCTION "{schema}".die() RETURNS trigger LANGUAGE plpgsql'
            " AS $$ BEGIN PERFORM pg_terminate_backend(pg_backend_pid());"
            " RETURN NEW; END $$"
        )
        admin.execute(
            f'CREATE TRIGGER die BEFORE INSERT ON "{schema}"."{TABLE}"'
            f' FOR EACH ROW EXECUTE FUNCTION "{schema}".die()'
        )
        code, out, err = cli(capsys, "memory", "store", "--agent", "ops", "k", "v")
        one_line_refusal(
            code, out, err, "'k' is recorded in the ledger", "postgres memory store"
        )
        admin.execute(f'DROP TRIGGER die ON "{schema}"."{TABLE}"')
    # The ledger kept the write; the store catches up once it can.
    assert keys(capsys) == ["first", "k"]


# -- where memory files live ---------------------------------------------------


def test_two_postgres_ledgers_never_share_memory_files(tmp_path, postgres_url):
    other_url = fresh_schema_url(postgres_url.split("?", 1)[0])
    (tmp_path / "turnledger.toml").write_text(
        f'data_dir = "{tmp_path / "data"}"\n[memory]\nshredding = true\n'
    )
    config = load_config(str(tmp_path / "turnledger.toml"))
    services = []
    try:
        for url, key in ((postgres_url, "in-a"), (other_url, "in-b")):
            store = open_store(url)
            service = MemoryService(store, config, ledger_url=url)
            service.store_entry("ops", key, f"only {key}")
            services.append((store, service))
        (_, a), (_, b) = services
        assert [e.key for e in a.list("ops")] == ["in-a"]
        assert [e.key for e in b.list("ops")] == ["in-b"]
        files_a = {a.sqlite_path("sqlite.default"), a.keys_path}
        files_b = {b.sqlite_path("sqlite.default"), b.keys_path}
        assert not files_a & files_b
        assert all(p.exists() for p in files_a | files_b)
        assert a.base == memory_home(postgres_url, tmp_path / "data")
        assert a.base.parent == b.base.parent == tmp_path / "data" / "memory"
        # Nothing in the working directory any more.
        assert not list(tmp_path.glob("turnledger.*.db"))
    finally:
        for store, service in services:
            service.close()
            store.close()
        drop_schema(other_url)


def test_postgres_ledger_cli_keeps_memory_in_its_home(capsys, tmp_path, postgres_url):
    (tmp_path / "turnledger.toml").write_text(f'data_dir = "{tmp_path / "d"}"\n')
    assert stored(capsys, "k", db=postgres_url) == 0
    assert keys(capsys, db=postgres_url) == ["k"]
    home = tmp_path / "d" / "memory" / ledger_digest(postgres_url)
    assert (home / "turnledger.memory.db").exists()
    assert not list(tmp_path.glob("turnledger.*.db"))


def test_ledger_digest_ignores_credentials_not_the_schema():
    base = "postgresql://u:secret@db.example:5432/app?schema=a"
    same = "postgresql://other:pw@db.example:5432/app?schema=a&connect_timeout=3"
    assert ledger_digest(base) == ledger_digest(same)
    assert ledger_digest(base) != ledger_digest(base.replace("schema=a", "schema=b"))
    assert ledger_digest(base) != ledger_digest(base.replace("/app", "/other"))
    assert "secret" not in ledger_digest(base)
    assert ledger_digest(base).startswith("postgresql-")


def test_sqlite_ledger_files_stay_beside_it(tmp_path):
    (tmp_path / "x").mkdir()
    store = open_store(str(tmp_path / "x" / "led.db"))
    service = MemoryService(
        store, load_config(None), ledger_url=str(tmp_path / "x" / "led.db")
    )
    try:
        assert service.sqlite_path("sqlite.default") == tmp_path / "x" / "led.memory.db"
        assert service.keys_path == tmp_path / "x" / "led.keys.db"
    finally:
        service.close()
        store.close()


def test_forget_with_a_locked_key_store_says_the_key_survives(capsys, tmp_path):
    code, _, err = cli(capsys, "memory", "store", "--shred", "--agent", "ops", "k", "v")
    assert code == 0, err
    with write_locked(tmp_path / "l.keys.db"):
        code, out, err = cli(
            capsys, "memory", "forget", "--shred", "--agent", "ops", "k"
        )
    one_line_refusal(
        code,
        out,
        err,
        "the forget of 'k' (its sealing key NOT yet destroyed: forget it again)",
        "memory key store at",
        "locked by another writer",
    )
    with sqlite3.connect(tmp_path / "l.keys.db") as conn:
        assert conn.execute("SELECT count(*) FROM entry_keys").fetchone() == (1,)
    # Forgetting again (the entry is gone) destroys the key that was left.
    assert cli(capsys, "memory", "forget", "--shred", "--agent", "ops", "k")[0] == 1
    with sqlite3.connect(tmp_path / "l.keys.db") as conn:
        assert conn.execute("SELECT count(*) FROM entry_keys").fetchone() == (0,)
