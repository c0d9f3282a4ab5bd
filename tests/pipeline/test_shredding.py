"""Forget that forgets: with shredding on, a forgotten content is gone from disk."""

from __future__ import annotations

from pathlib import Path

from turnledger.ledger.store import open_store
from turnledger.pipeline.config import Config
from turnledger.pipeline.memory import MemoryService
from turnledger.projections.memory.shred import FORGOTTEN

FORGETTABLE = "the vault code is 48151623"


def files_containing(folder: Path, needle: bytes) -> list[str]:
    return sorted(
        str(p.relative_to(folder))
        for p in folder.rglob("*")
        if p.is_file() and needle in p.read_bytes()
    )


def test_forgotten_content_leaves_no_trace_in_any_file(tmp_path):
    """After forget, no ledger, memory, key or WAL file holds the content."""
    ledger = str(tmp_path / "l.db")
    store = open_store(ledger)
    memory = MemoryService(
        store,
        Config(data_dir=str(tmp_path / "data")),
        ledger_url=ledger,
        shredding=True,
    )
    memory.store_entry("ops", "vault", FORGETTABLE, category="core")
    memory.store_entry("ops", "keep", "the office is in Lyon", category="core")
    assert memory.get("ops", "vault").content == FORGETTABLE
    assert files_containing(
        tmp_path, FORGETTABLE.encode()
    )  # the projection holds it in clear
    assert not any(
        FORGETTABLE.encode() in p.read_bytes() for p in tmp_path.glob("l.db*")
    )  # the ledger never held it in clear
    assert memory.forget("ops", "vault") is True
    memory.close()
    store.close()
    assert files_containing(tmp_path, FORGETTABLE.encode()) == []
    assert files_containing(tmp_path, b"48151623") == []


def test_rebuild_after_shredding_renders_forgotten(tmp_path):
    """A rebuild from the ledger succeeds; a shredded content reads [forgotten]."""
    ledger = str(tmp_path / "l.db")
    store = open_store(ledger)
    memory = MemoryService(store, Config(), ledger_url=ledger, shredding=True)
    memory.store_entry("ops", "vault", FORGETTABLE, category="core")
    memory.store_entry("ops", "keep", "the office is in Lyon", category="core")
    memory.keys().destroy(agent="ops", memory_key="vault")  # the key alone is gone
    memory.close()
    (tmp_path / "l.memory.db").unlink()
    rebuilt = MemoryService(store, Config(), ledger_url=ledger)
    try:
        assert rebuilt.get("ops", "vault").content == FORGOTTEN
        assert rebuilt.get("ops", "keep").content == "the office is in Lyon"
    finally:
        rebuilt.close()
        store.close()
