"""Side files are bound to their ledger (issue #25 item 6).

A ledger records a random id when its tables are first created; the views
store, the SQLite memory database and the key store record it. A side file
kept beside a deleted and recreated ledger, or copied from another ledger, is
found at open: views and memory are emptied and caught up from the ledger,
a key store (which cannot be rebuilt) is refused in one line naming it.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
from pathlib import Path

import psycopg
import pytest

from turnledger.ledger.store import open_store
from turnledger.pipeline.bootstrap import bootstrap
from turnledger.pipeline.cli import main
from turnledger.pipeline.config import parse_config
from turnledger.pipeline.memory import MemoryService
from turnledger.pipeline.providers.base import ChatRequest, ChatResponse
from turnledger.pipeline.providers.scripted import ScriptedProvider
from turnledger.projections.views import SQLiteViewStore, bind_views
from turnledger.projections.views.postgres import PostgresViewStore


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TURNLEDGER_DB", raising=False)
    monkeypatch.delenv("TURNLEDGER_CONFIG", raising=False)
    monkeypatch.delenv("TURNLEDGER_VIEWS", raising=False)


def _answer(request: ChatRequest) -> ChatResponse:
    del request
    return ChatResponse(text="ok")


def _turns(db: Path, count: int) -> None:
    config = parse_config(
        f'ledger = "{db}"\ndata_dir = "{db.parent / "data"}"\n'
        "[memory]\nautosave = false\n"
    )

    async def go() -> None:
        provider = ScriptedProvider([_answer] * count)
        async with bootstrap(config, provider=provider) as runtime:
            for n in range(count):
                outcome = await runtime.engine.run_turn("ops", "s1", f"turn {n}")
                assert outcome.completed, outcome

    asyncio.run(go())


def cli(capsys, db: Path, *args: str) -> tuple[int, str, str]:
    code = main(["--db", str(db), *args])
    out, err = capsys.readouterr()
    return code, out, err


def listed(capsys, db: Path, *base: str) -> list[str]:
    code, out, err = cli(
        capsys, db, *base, "memory", "list", "--agent", "ops", "--json"
    )
    assert code == 0, err
    return sorted(e["key"] for e in json.loads(out))


def _delete_ledger(db: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)


def _cli_turn(capsys, db: Path, tmp_path: Path) -> tuple[int, str, str]:
    script = tmp_path / "script.toml"
    script.write_text('[[steps]]\ntext = "hi"\n')
    return cli(capsys, db, "run", str(script), "--session", "s1", "--turn", "again")


def test_a_recreated_ledger_rebuilds_its_kept_side_files(capsys, tmp_path):
    db = tmp_path / "x.db"
    _turns(db, 3)
    assert cli(capsys, db, "memory", "store", "--agent", "ops", "old", "a fact")[0] == 0
    assert listed(capsys, db) == ["old"]
    assert (tmp_path / "x.views.db").exists()
    assert (tmp_path / "x.memory.db").exists()

    _delete_ledger(db)
    _turns(db, 1)  # through bootstrap: the session starts at version 0 again
    code, _out, err = _cli_turn(capsys, db, tmp_path)  # and through the CLI
    assert code == 0, err
    assert listed(capsys, db) == []
    assert cli(capsys, db, "memory", "store", "--agent", "ops", "new", "b fact")[0] == 0
    assert listed(capsys, db) == ["new"]
    with open_store(str(db)) as store:
        assert store.max_position() > 0


def test_side_files_copied_from_another_ledger_are_rebuilt(capsys, tmp_path):
    one = tmp_path / "one" / "a.db"
    two = tmp_path / "two" / "a.db"
    one.parent.mkdir()
    two.parent.mkdir()
    _turns(one, 4)
    assert cli(capsys, one, "memory", "store", "--agent", "ops", "one-k", "x")[0] == 0
    _turns(two, 1)
    assert cli(capsys, two, "memory", "store", "--agent", "ops", "two-k", "y")[0] == 0
    for name in ("a.views.db", "a.memory.db"):
        for suffix in ("", "-wal", "-shm"):
            Path(two.parent / f"{name}{suffix}").unlink(missing_ok=True)
            if (one.parent / f"{name}{suffix}").exists():
                shutil.copy(
                    one.parent / f"{name}{suffix}", two.parent / f"{name}{suffix}"
                )

    assert listed(capsys, two) == ["two-k"]
    code, _out, err = _cli_turn(capsys, two, tmp_path)
    assert code == 0, err
    assert listed(capsys, one) == ["one-k"]  # the other ledger's own files: kept


def test_a_key_store_of_another_ledger_is_refused_in_one_line(capsys, tmp_path):
    db = tmp_path / "k.db"
    config = tmp_path / "turnledger.toml"
    config.write_text("[memory]\nshredding = true\n")
    base = ("--config", str(config))
    code, _out, err = cli(
        capsys, db, *base, "memory", "store", "--agent", "ops", "a", "s"
    )
    assert code == 0, err
    _delete_ledger(db)
    assert listed(capsys, db, *base) == []  # the key store is not needed: not read
    code, out, err = cli(
        capsys, db, *base, "memory", "store", "--agent", "ops", "b", "t"
    )
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1, err
    assert "k.keys.db" in err
    assert "cannot be rebuilt" in err


def test_the_ledger_id_is_written_once_and_kept(tmp_path):
    db = str(tmp_path / "i.db")
    with open_store(db) as store:
        first = store.backend.ledger_id
    with open_store(db) as store:
        assert store.backend.ledger_id == first
    assert first is not None
    assert len(first) == 32
    raw = sqlite3.connect(db)
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        raw.execute("UPDATE turnledger_identity SET id = 'x'")
    raw.close()


def test_a_ledger_made_before_ids_gets_one_at_its_next_open(tmp_path):
    db = str(tmp_path / "old.db")
    with open_store(db):
        pass
    raw = sqlite3.connect(db)
    raw.execute("DROP TABLE turnledger_identity")  # as a ledger of an older version
    raw.commit()
    raw.close()
    with open_store(db) as store:
        given = store.backend.ledger_id
    with open_store(db) as store:
        assert store.backend.ledger_id == given is not None


def test_views_past_the_ledger_head_are_emptied(tmp_path):
    db = tmp_path / "v.db"
    _turns(db, 2)
    with open_store(str(db)) as store:
        views = SQLiteViewStore(str(tmp_path / "v.views.db"))
        try:
            assert views.tracking("session_history") > 0
            assert views.bind(store.backend.ledger_id, store.max_position()) is False
            assert views.bind(store.backend.ledger_id, 1) is True
            assert views.tracking("session_history") == 0
        finally:
            views.close()


def test_postgres_ledger_id_is_kept_and_views_bound(postgres_url):
    with open_store(postgres_url) as store:
        first = store.backend.ledger_id
    with open_store(postgres_url) as store:
        assert store.backend.ledger_id == first
        assert first is not None
        views = PostgresViewStore(postgres_url)
        try:
            views.commit("p", {"k": 1}, 5)
            assert bind_views(views, store) is views
            assert views.tracking("p") == 0  # past the empty ledger's head
            views.commit("p", {"k": 1}, 3)
            assert views.bind(first, 10) is False
            assert views.all("p", int) == {"k": 1}
            assert views.bind("another-ledger", 10) is True
            assert views.all("p", int) == {}
            assert views.tracking("p") == 0
        finally:
            views.close()


def test_postgres_views_of_a_recreated_ledger_are_rebuilt(postgres_url, tmp_path):
    config = parse_config(
        f'ledger = "{postgres_url}"\ndata_dir = "{tmp_path / "data"}"\n'
        "[memory]\nautosave = false\n"
    )

    async def turns(count: int) -> None:
        provider = ScriptedProvider([_answer] * count)
        async with bootstrap(config, provider=provider) as runtime:
            for n in range(count):
                outcome = await runtime.engine.run_turn("ops", "s1", f"turn {n}")
                assert outcome.completed, outcome
            runtime.memory.store_entry("ops", f"k{count}", "a fact")

    asyncio.run(turns(3))
    with open_store(postgres_url) as store:
        schema = postgres_url.rsplit("schema=", 1)[1]
        raw = psycopg.connect(postgres_url.split("?", 1)[0], autocommit=True)
        try:  # the ledger's tables dropped, the views' tables kept
            tables = raw.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)
            ).fetchall()
            for (table,) in tables:
                if table not in ("turnledger_view_state", "turnledger_tracking"):
                    raw.execute(f'DROP TABLE "{schema}"."{table}" CASCADE')
        finally:
            raw.close()
        del store
    asyncio.run(turns(1))
    with open_store(postgres_url) as store:
        service = MemoryService(store, config, ledger_url=postgres_url)
        try:
            assert [e.key for e in service.list("ops")] == ["k1"]
        finally:
            service.close()
