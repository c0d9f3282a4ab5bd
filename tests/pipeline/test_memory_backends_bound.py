"""Every memory backend is bound to its ledger (issue #25 item 6).

Delete the ledger, keep the memory store, run a turn: a PostgreSQL schema or a
Qdrant collection of the old ledger is emptied and caught up from the new one
(``memory list`` shows only the new ledger's memories); Markdown files, which
the user may have edited, are refused in one line naming the file (a turn
still runs: a recall that cannot be served never fails it).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from turnledger.pipeline.cli import main
from turnledger.projections.memory.embedding.static import (
    DEFAULT_STATIC_DIMS,
    StaticEmbedder,
)
from turnledger.projections.memory.markdown import MarkdownMemory
from turnledger.projections.memory.postgres import PostgresMemory
from turnledger.projections.memory.protocol import NewMemory
from turnledger.projections.memory.qdrant import QdrantMemory


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("TURNLEDGER_DB", "TURNLEDGER_CONFIG", "TURNLEDGER_VIEWS"):
        monkeypatch.delenv(name, raising=False)


def _cli(capsys, db: Path, config: Path, *args: str) -> tuple[int, str, str]:
    code = main(["--db", str(db), "--config", str(config), *args])
    out, err = capsys.readouterr()
    return code, out, err


def _listed(capsys, db: Path, config: Path) -> list[str]:
    code, out, err = _cli(
        capsys, db, config, "memory", "list", "--agent", "ops", "--json"
    )
    assert code == 0, err
    return sorted(e["key"] for e in json.loads(out))


def _store(capsys, db: Path, config: Path, key: str) -> tuple[int, str, str]:
    return _cli(capsys, db, config, "memory", "store", "--agent", "ops", key, "a fact")


def _turn(capsys, db: Path, config: Path, tmp_path: Path) -> tuple[int, str, str]:
    script = tmp_path / "script.toml"
    script.write_text('[[steps]]\ntext = "hi"\n')
    return _cli(
        capsys,
        db,
        config,
        "run",
        str(script),
        "--agent",
        "ops",
        "--session",
        "s1",
        "--turn",
        "t",
    )


def _delete_ledger(db: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)


def _rebuilt_after_the_ledger_is_recreated(
    capsys, tmp_path: Path, config: Path
) -> None:
    db = tmp_path / "x.db"
    for key in ("old-1", "old-2", "old-3"):
        assert _store(capsys, db, config, key)[0] == 0
    assert _listed(capsys, db, config) == ["old-1", "old-2", "old-3"]
    _delete_ledger(db)
    code, _out, err = _turn(capsys, db, config, tmp_path)
    assert code == 0, err
    assert _listed(capsys, db, config) == []
    assert _store(capsys, db, config, "new")[0] == 0
    assert _listed(capsys, db, config) == ["new"]


def test_a_postgres_memory_of_a_deleted_ledger_is_rebuilt(
    capsys, tmp_path, postgres_url
):
    config = tmp_path / "turnledger.toml"
    config.write_text(
        f'[memory]\nbackend = "postgres.shared"\n'
        f'[storage.postgres.shared]\nurl = "{postgres_url}"\n'
    )
    _rebuilt_after_the_ledger_is_recreated(capsys, tmp_path, config)


def test_a_qdrant_memory_of_a_deleted_ledger_is_rebuilt(capsys, tmp_path):
    config = tmp_path / "turnledger.toml"
    config.write_text(
        f'data_dir = "{tmp_path / "data"}"\n[memory]\nbackend = "qdrant"\n'
        '[embedding]\nprovider = "local"\nmodel = "all-MiniLM-L6-v2-static"\n'
    )
    _rebuilt_after_the_ledger_is_recreated(capsys, tmp_path, config)
    assert (tmp_path / "data" / "qdrant").is_dir()


def test_a_markdown_memory_of_a_deleted_ledger_is_refused_in_one_line(capsys, tmp_path):
    config = tmp_path / "turnledger.toml"
    config.write_text(
        f'data_dir = "{tmp_path / "data"}"\n[memory]\nbackend = "markdown"\n'
    )
    db = tmp_path / "m.db"
    code, _out, err = _store(capsys, db, config, "old")
    assert code == 0, err
    assert _listed(capsys, db, config) == ["old"]
    workspace = tmp_path / "data" / "agents" / "ops" / "workspace"
    recorded = workspace / "memory" / ".ledger_id"
    assert len(recorded.read_text().strip()) == 32
    _delete_ledger(db)

    code, _out, err = _turn(capsys, db, config, tmp_path)
    assert code == 0, err  # a recall that cannot be served never fails a turn
    code, out, err = _cli(
        capsys, db, config, "memory", "list", "--agent", "ops", "--json"
    )
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1, err
    assert ".ledger_id" in err
    assert "move MEMORY.md and memory/ out of" in err
    assert "old" in (workspace / "MEMORY.md").read_text() or any(
        "old" in p.read_text() for p in (workspace / "memory").glob("*.md")
    )  # the user's files are kept as they were

    (workspace / "memory").rename(tmp_path / "moved")
    (workspace / "MEMORY.md").unlink(missing_ok=True)
    code, _out, err = _turn(capsys, db, config, tmp_path)
    assert code == 0, err
    assert _listed(capsys, db, config) == []
    assert _store(capsys, db, config, "new")[0] == 0
    assert _listed(capsys, db, config) == ["new"]
    assert "old" not in (workspace / "MEMORY.md").read_text()


def test_markdown_files_past_the_ledger_head_are_refused(tmp_path):
    memory = MarkdownMemory(tmp_path / "w", agent="ops")
    assert memory.bind("a" * 32, 0) is False
    assert (tmp_path / "w" / "memory" / ".ledger_id").read_text() == "a" * 32 + "\n"
    assert memory.bind("a" * 32, 0) is False
    (tmp_path / "w" / "memory" / ".applied_position").write_text("9")
    with pytest.raises(ValueError, match=r"position 9 past the ledger's end \(4\)"):
        memory.bind("a" * 32, 4)
    assert memory.bind("a" * 32, 9) is False


def test_a_postgres_memory_past_the_head_or_of_another_ledger_is_emptied(postgres_url):
    memory = PostgresMemory(postgres_url)
    try:
        assert memory.bind("one", 0) is False
        memory.apply([], 5)
        assert memory.bind("one", 5) is False
        assert memory.applied_position() == 5
        assert memory.bind("one", 4) is True
        assert memory.applied_position() == 0
        memory.apply([], 3)
        assert memory.bind("two", 10) is True
        assert memory.applied_position() == 0
        assert memory.bind("two", 10) is False
    finally:
        memory.close()


def test_a_qdrant_memory_past_the_head_or_of_another_ledger_is_emptied():
    memory = QdrantMemory(embedder=StaticEmbedder(DEFAULT_STATIC_DIMS))
    fact = NewMemory(
        agent="ops", key="k", content="a fact", entry_id="e1", at=datetime.now(UTC)
    )
    try:
        assert memory.bind("one", 0) is False
        memory.store(fact)
        memory.apply([], 5)
        assert memory.bind("one", 5) is False
        assert memory.count(agents=["ops"]) == 1
        assert memory.bind("one", 4) is True
        assert memory.applied_position() == 0
        assert memory.count(agents=["ops"]) == 0
        memory.store(fact)
        assert memory.bind("two", 10) is True
        assert memory.count(agents=["ops"]) == 0
        assert memory.bind("two", 10) is False
    finally:
        memory.close()
