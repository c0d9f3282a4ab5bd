"""With a cipher key, every SQLite side file of a running install is encrypted (#26).

A canary written through a turn and a memory store is grepped for in the raw
bytes of the view and memory files and their -wal and -shm while the runtime
still has them open, and after: no hit. ``project rebuild``, ``memory
reindex`` and the memory commands work on the encrypted files; a side file
that does not fit the key is refused at the command line in one line, exit 2;
without the ``sqlcipher`` extra a key is refused naming it.
"""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest

from turnledger.adapters.langgraph.store import TurnledgerStore
from turnledger.ledger.events import SessionOpened
from turnledger.ledger.file_keys import FileKeyError
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.key_check import CIPHER_KEY_ENV
from turnledger.ledger.sqlite.encrypted import SQLCIPHER_EXTRA, is_clear_database
from turnledger.ledger.store import open_store
from turnledger.ledger.subject_keys import open_sqlite_keys
from turnledger.pipeline.bootstrap import bootstrap
from turnledger.pipeline.cli import main
from turnledger.pipeline.config import parse_config
from turnledger.pipeline.memory import MemoryService
from turnledger.pipeline.providers.base import ChatRequest, ChatResponse
from turnledger.pipeline.providers.scripted import ScriptedProvider
from turnledger.projections.views import SQLiteViewStore

KEY_A = base64.b64encode(b"a" * 32).decode()
KEY_C = base64.b64encode(b"c" * 32).decode()
CANARY = "CANARY-narwhal-5517"
SIDE = ("turnledger.views.db", "turnledger.memory.db", "turnledger.keys.db")


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("TURNLEDGER_DB", "TURNLEDGER_CONFIG", "TURNLEDGER_VIEWS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(CIPHER_KEY_ENV, KEY_A)


def raw_hits(folder: Path, text: str) -> list[str]:
    return sorted(
        p.name
        for p in folder.iterdir()
        if p.is_file() and text.encode() in p.read_bytes()
    )


def _echo(request: ChatRequest) -> ChatResponse:
    return ChatResponse(text=f"noted {request.messages[-1].text}")


def test_a_canary_through_a_turn_and_a_memory_store_is_in_no_file(tmp_path):
    config = parse_config('ledger = "turnledger.db"\n[memory]\nshredding = true\n')

    async def go() -> list[str]:
        provider = ScriptedProvider([_echo])
        async with bootstrap(config, provider=provider) as runtime:
            outcome = await runtime.engine.run_turn("ops", "s1", f"remember {CANARY}")
            assert outcome.completed, outcome
            runtime.memory.store_entry("ops", "vault", f"{CANARY} in memory")
            runtime.runner.catch_up()
            found = runtime.memory.backend("ops").get("vault", agents=["ops"])
            assert found is not None
            assert found.content == f"{CANARY} in memory"
            names = sorted(p.name for p in tmp_path.iterdir())
            assert "turnledger.views.db-wal" in names  # open: the logs are there
            assert "turnledger.memory.db-wal" in names
            return raw_hits(tmp_path, CANARY) + raw_hits(tmp_path, "in memory")

    assert asyncio.run(go()) == []  # while open
    assert raw_hits(tmp_path, CANARY) == []  # after close
    for name in SIDE:
        assert (tmp_path / name).exists(), name
        assert not is_clear_database(tmp_path / name), name


def cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def stored(capsys, content: str) -> None:
    code, _, err = cli(capsys, "memory", "store", "--agent", "ops", "k1", content)
    assert code == 0, err


def test_project_rebuild_and_memory_commands_on_encrypted_files(capsys, tmp_path):
    stored(capsys, f"{CANARY} helix editor")
    code, out, err = cli(capsys, "project", "rebuild", "--json")
    assert code == 0, err
    applied = json.loads(out)
    assert applied["observer_view"] >= 1
    code, out, _ = cli(capsys, "project", "status", "--json")
    assert code == 0
    assert all(row["position"] == row["ledger"] for row in json.loads(out))
    code, out, _ = cli(capsys, "memory", "recall", "--agent", "ops", "helix", "--json")
    assert code == 0
    assert CANARY in out
    assert raw_hits(tmp_path, CANARY) == []
    assert not is_clear_database(tmp_path / "turnledger.views.db")


def test_memory_reindex_on_an_encrypted_memory(capsys, tmp_path):
    stored(capsys, f"{CANARY} helix editor")
    (tmp_path / "turnledger.toml").write_text('[embedding]\nprovider = "local"\n')
    code, out, err = cli(capsys, "memory", "reindex", "--agent", "ops", "--json")
    assert code == 0, err
    assert json.loads(out)["embedded"] == 1
    code, out, _ = cli(
        capsys, "memory", "recall", "--agent", "ops", "which text editor", "--json"
    )
    assert code == 0
    assert CANARY in out
    assert raw_hits(tmp_path, CANARY) == []


def test_a_view_file_of_another_key_is_refused_in_one_line(capsys, tmp_path):
    stored(capsys, "hello")
    views = tmp_path / "turnledger.views.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{views}{suffix}").unlink(missing_ok=True)
    SQLiteViewStore(str(views), cipher_key=KEY_C).close()  # another key's file
    before = views.read_bytes()
    code, out, err = cli(capsys, "project", "status")
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert "found it does not: it was encrypted with another key" in err
    assert views.read_bytes() == before


def test_a_clear_side_file_with_a_key_now_set_is_refused(capsys, tmp_path, monkeypatch):
    """A key set on an install whose files are clear: no file is kept in clear."""
    monkeypatch.delenv(CIPHER_KEY_ENV)
    stored(capsys, "hello")
    assert is_clear_database(tmp_path / "turnledger.memory.db")
    monkeypatch.setenv(CIPHER_KEY_ENV, KEY_A)  # the ledger, clear so far, takes it
    code, _, err = cli(capsys, "memory", "list", "--agent", "ops")
    assert code == 2
    assert err.count("\n") == 1
    assert "memory database" in err
    assert "found it in clear" in err
    assert is_clear_database(tmp_path / "turnledger.memory.db")  # untouched


def test_an_encrypted_side_file_without_the_key_is_refused(
    capsys, tmp_path, monkeypatch
):
    """A ledger still in clear, its view file encrypted: no key is refused."""
    with open_store("turnledger.db", cipher_key=""):
        pass
    views = tmp_path / "turnledger.views.db"
    SQLiteViewStore(str(views)).close()  # keyed from the environment
    before = views.read_bytes()
    monkeypatch.delenv(CIPHER_KEY_ENV)
    code, _, err = cli(capsys, "project", "status")
    assert code == 2
    assert err.count("\n") == 1
    assert "Expected a cipher key (TURNLEDGER_CIPHER_KEY) for the view store" in err
    assert views.read_bytes() == before


def test_without_the_extra_a_key_is_refused_naming_it(capsys, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "sqlcipher3.dbapi2", None)
    code, out, err = cli(capsys, "memory", "store", "--agent", "ops", "k", "v")
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert err.rstrip().endswith(SQLCIPHER_EXTRA)
    assert not (tmp_path / "turnledger.memory.db").exists()


def clear_install(capsys, monkeypatch) -> None:
    """An install made without a key: memory (sealed), views and key store."""
    monkeypatch.delenv(CIPHER_KEY_ENV)
    code, _, err = cli(
        capsys, "memory", "store", "--agent", "ops", "k1", f"{CANARY} a", "--shred"
    )
    assert code == 0, err
    code, _, err = cli(capsys, "memory", "store", "--agent", "ops", "k2", "helix b")
    assert code == 0, err
    assert cli(capsys, "project", "catch-up")[0] == 0
    monkeypatch.setenv(CIPHER_KEY_ENV, KEY_A)


def test_encrypt_files_encrypts_a_clear_install_in_place(capsys, tmp_path, monkeypatch):
    clear_install(capsys, monkeypatch)
    assert all(is_clear_database(tmp_path / name) for name in SIDE)
    assert "turnledger.memory.db" in raw_hits(tmp_path, "helix")
    code, out, err = cli(capsys, "encrypt-files", "--json")
    assert code == 0, err
    assert json.loads(out) == [
        {"file": "turnledger.views.db", "kind": "view store", "encrypted_now": True},
        {"file": "turnledger.memory.db", "kind": "memory database", "encrypted_now": True},
        {"file": "turnledger.keys.db", "kind": "memory key store", "encrypted_now": True},
    ]  # fmt: skip
    assert not any(is_clear_database(tmp_path / name) for name in SIDE)
    assert raw_hits(tmp_path, "helix") == ["turnledger.db"]  # written without a key
    assert raw_hits(tmp_path, CANARY) == []
    code, out, _ = cli(capsys, "memory", "list", "--agent", "ops", "--json")
    assert code == 0
    assert CANARY in out  # the sealed content opens with the encrypted key store
    assert "helix b" in out
    code, out, _ = cli(capsys, "memory", "recall", "--agent", "ops", "helix", "--json")
    assert "helix b" in out
    code, out, _ = cli(capsys, "project", "status", "--json")
    assert all(row["position"] == row["ledger"] for row in json.loads(out))
    code, out, _ = cli(capsys, "encrypt-files")
    assert code == 0
    assert out.count("already encrypted") == 3


def test_encrypt_files_needs_a_key(capsys, monkeypatch):
    monkeypatch.delenv(CIPHER_KEY_ENV)
    code, out, err = cli(capsys, "encrypt-files")
    assert (code, out) == (2, "")
    assert err.count("\n") == 1
    assert "Expected a cipher key (TURNLEDGER_CIPHER_KEY) to encrypt with" in err


HOLDER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("ready", flush=True)
time.sleep(30)
"""


def test_encrypt_files_refuses_a_file_in_use(capsys, tmp_path, monkeypatch):
    """Another process has the memory open: refused in one line, left as it was."""
    clear_install(capsys, monkeypatch)
    memory = tmp_path / "turnledger.memory.db"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(memory)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "ready"
        code, _, err = cli(capsys, "encrypt-files")
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    assert code == 2
    assert err.count("\n") == 1
    assert (
        "Expected the memory database at 'turnledger.memory.db' free to encrypt" in err
    )
    assert is_clear_database(memory)
    assert not list(tmp_path.glob(".*.encrypting"))


def test_memory_rebuild_in_place_keeps_the_memory_and_its_backup_encrypted(
    capsys, tmp_path
):
    stored(capsys, f"{CANARY} helix editor")
    code, out, err = cli(
        capsys, "memory", "rebuild", "--agent", "ops", "--backend", "sqlite", "--json"
    )
    assert code == 0, err
    assert json.loads(out)["entries"] == 1
    backups = sorted(tmp_path.glob("turnledger.memory.db.bak-*"))
    assert len(backups) == 1
    assert not is_clear_database(backups[0])
    assert not is_clear_database(tmp_path / "turnledger.memory.db")
    assert raw_hits(tmp_path, CANARY) == []
    code, out, _ = cli(capsys, "memory", "recall", "--agent", "ops", "helix", "--json")
    assert code == 0
    assert CANARY in out


def test_a_postgresql_ledgers_memory_home_is_keyed_by_the_ledger(
    postgres_url, tmp_path, monkeypatch
):
    """The key given to open_store (none in the environment) keys the memory
    database and the key store in the ledger's home."""
    monkeypatch.delenv(CIPHER_KEY_ENV)
    config = parse_config(f'data_dir = "{tmp_path / "data"}"\n')
    with open_store(postgres_url, cipher_key=KEY_A) as store:
        service = MemoryService(store, config, ledger_url=postgres_url, shredding=True)
        try:
            service.store_entry("ops", "vault", f"{CANARY} pg")
            assert service.backend("ops").count(agents=["ops"]) == 1
            home = service.base
        finally:
            service.close()
    files = sorted(p.name for p in home.iterdir())
    assert "turnledger.memory.db" in files
    assert "turnledger.keys.db" in files
    assert not is_clear_database(home / "turnledger.memory.db")
    assert not is_clear_database(home / "turnledger.keys.db")
    assert raw_hits(home, CANARY) == []


def test_the_langgraph_stores_memory_view_is_encrypted(tmp_path):
    view = tmp_path / "m.sqlite"
    with TurnledgerStore.from_url(str(tmp_path / "l.db"), memory_path=view) as store:
        store.put(("notes",), "n1", {"content": f"{CANARY} langgraph"})
        item = store.get(("notes",), "n1")
        assert item is not None
        assert item.value == {"content": f"{CANARY} langgraph"}
    assert not is_clear_database(view)
    assert raw_hits(tmp_path, CANARY) == []


def erasure_install(capsys, tmp_path, monkeypatch) -> Path:
    """Erasure on without a key: its key store is made in clear."""
    monkeypatch.delenv(CIPHER_KEY_ENV)
    (tmp_path / "turnledger.toml").write_text("[privacy]\nerasable = true\n")
    stored(capsys, f"{CANARY} sealed")
    erasure = tmp_path / "turnledger.erasure-keys.db"
    assert is_clear_database(erasure)
    return erasure


def test_a_clear_erasure_key_store_is_refused_then_encrypted(
    capsys, tmp_path, monkeypatch
):
    erasure = erasure_install(capsys, tmp_path, monkeypatch)
    monkeypatch.setenv(CIPHER_KEY_ENV, KEY_A)
    code, _, err = cli(capsys, "memory", "list", "--agent", "ops")
    assert code == 2
    assert err.count("\n") == 1
    assert "the erasure key store at" in err
    assert "found it in clear" in err
    code, out, err = cli(capsys, "encrypt-files", "--json")
    assert code == 0, err
    report = {row["kind"]: row["encrypted_now"] for row in json.loads(out)}
    assert report == {"erasure key store": True, "memory database": True}
    assert not is_clear_database(erasure)
    code, out, err = cli(capsys, "memory", "list", "--agent", "ops", "--json")
    assert code == 0, err
    assert CANARY in out
    assert [n for n in raw_hits(tmp_path, CANARY) if "erasure" in n] == []


def test_encrypt_files_with_a_wrong_key_encrypts_nothing(capsys, tmp_path, monkeypatch):
    """The ledger refuses the key before the clear erasure key store is touched."""
    monkeypatch.delenv(CIPHER_KEY_ENV)
    with open_store("turnledger.db", cipher_key=KEY_A, erasable=False) as store:
        opened = SessionOpened(agent="ops", session_key="k")
        store.append(session_stream_id("ops", "k"), [opened], expected_version=0)
        ledger_id = store.backend.ledger_id
    erasure = tmp_path / "turnledger.erasure-keys.db"
    keys = open_sqlite_keys(
        str(erasure), ledger_id=ledger_id, wrap_key=None, before_create=lambda: True
    )
    assert keys is not None
    keys.close()
    before = erasure.read_bytes()
    monkeypatch.setenv(CIPHER_KEY_ENV, KEY_C)
    code, out, err = cli(capsys, "encrypt-files")
    assert (code, out) == (2, "")
    assert err.count("\n") == 1
    assert "Expected the cipher key this ledger was encrypted with" in err
    assert erasure.read_bytes() == before
    monkeypatch.setenv(CIPHER_KEY_ENV, KEY_A)
    code, out, err = cli(capsys, "encrypt-files")
    assert code == 0, err
    assert "encrypted          erasure key store" in out
    assert not is_clear_database(erasure)


def test_bootstrap_refuses_a_view_file_of_another_key(tmp_path):
    """The library path: refused before a turn, nothing appended."""
    SQLiteViewStore(str(tmp_path / "turnledger.views.db"), cipher_key=KEY_C).close()
    config = parse_config('ledger = "turnledger.db"\n')

    async def start() -> None:
        async with bootstrap(config, provider=ScriptedProvider([_echo])) as runtime:
            await runtime.engine.run_turn("ops", "s1", "hello")

    with pytest.raises(FileKeyError, match="encrypted with another key"):
        asyncio.run(start())
    with open_store("turnledger.db") as store:
        assert store.max_position() == 0
