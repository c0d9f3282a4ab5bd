"""ADR-005's install-wide ``[memory]`` keys (issue #25 item 7).

``[memory] backend`` is the backend of every agent that names none; an agent's
own ``[agents.<alias>.memory] backend`` wins. The reference's other ``[memory]``
keys are honoured (``search_mode``, ``embedding_cache_size``, ``auto_save``) or
refused in one line naming the key, what is expected and what was found.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from turnledger.ledger.store import open_store
from turnledger.pipeline.cli import main
from turnledger.pipeline.config import ConfigError, parse_config
from turnledger.pipeline.memory import MemoryService
from turnledger.pipeline.memory.wiring import MemoryWiring
from turnledger.projections.memory.sqlite import SQLiteMemory


def test_the_install_wide_backend_picks_the_backend_of_an_agent_naming_none(tmp_path):
    config = parse_config(
        f'data_dir = "{tmp_path / "data"}"\n'
        '[memory]\nbackend = "markdown"\n'
        "[agents.listed]\nautosave = false\n"
        '[agents.own.memory]\nbackend = "sqlite"\n'
    )
    assert config.backend_of("unlisted") == "markdown"
    assert config.backend_of("listed") == "markdown"
    assert config.backend_of("own") == "sqlite"  # the agent's own table wins
    assert config.agent("listed").memory == "markdown"
    assert config.scope("unlisted").backend == "markdown.default"
    assert config.scope("listed").backend == "markdown.default"
    assert config.scope("own").backend == "sqlite.default"

    db = str(tmp_path / "l.db")
    with open_store(db) as store:
        service = MemoryService(store, config, ledger_url=db)
        try:
            assert service.backend_ref("listed") == "markdown.default"
            assert service.backend_ref("own") == "sqlite.default"
            service.store_entry("listed", "color", "the sky is blue")
            service.store_entry("own", "shape", "the earth is round")
        finally:
            service.close()
    workspace = tmp_path / "data" / "agents" / "listed" / "workspace"
    assert "the sky is blue" in (workspace / "MEMORY.md").read_text()
    assert not (tmp_path / "data" / "agents" / "own").exists()
    assert (tmp_path / "l.memory.db").exists()  # the agent's own SQLite


def test_without_the_key_the_default_stays_sqlite():
    config = parse_config("")
    assert config.backend_of("any") == "sqlite"
    assert config.scope("any").backend == "sqlite.default"


def test_the_cli_honours_the_install_wide_backend(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TURNLEDGER_CONFIG", raising=False)
    (tmp_path / "turnledger.toml").write_text(
        f'data_dir = "{tmp_path / "data"}"\n[memory]\nbackend = "markdown"\n'
    )
    code = main(["--db", "l.db", "memory", "store", "--agent", "ops", "k", "a fact"])
    _out, err = capsys.readouterr()
    assert code == 0, err
    workspace = tmp_path / "data" / "agents" / "ops" / "workspace"
    assert "a fact" in (workspace / "MEMORY.md").read_text()
    assert not (tmp_path / "l.memory.db").exists()


def test_search_mode_and_cache_size_reach_the_sqlite_backend(tmp_path):
    config = parse_config(
        f'data_dir = "{tmp_path / "data"}"\n'
        '[memory]\nsearch_mode = "bm25"\nembedding_cache_size = 0\n'
    )
    wiring = MemoryWiring(config, ledger_url=str(tmp_path / "l.db"))
    try:
        _ref, backend = wiring.served("ops")
        assert isinstance(backend, SQLiteMemory)
        assert backend.search_mode == "bm25"
    finally:
        wiring.close()


def test_auto_save_is_the_reference_spelling_of_autosave():
    assert parse_config("[memory]\nauto_save = false\n").memory.autosave is False
    with pytest.raises(ConfigError, match=r"memory\.auto_save: expected it once"):
        parse_config("[memory]\nauto_save = false\nautosave = true\n")


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ('[memory]\nbackend = "bogus"\n', ("memory.backend:", "bogus")),
        (
            '[memory]\nbackend = "postgres.shared"\n',
            (
                (
                    "memory.backend = 'postgres.shared': expected "
                    "storage.postgres.shared.url, found none"
                ),
            ),
        ),
        (
            '[memory]\nbackend = "qdrant"\n[embedding]\nprovider = "none"\n',
            ("memory.backend = 'qdrant': Qdrant stores vectors only",),
        ),
        ("[memory]\nbackend = 3\n", ("memory.backend", "Expected `str`")),
        (
            "[memory]\nrerank_enabled = true\n",
            ("memory.rerank_enabled: expected [recall] decay", "found rerank_enabled"),
        ),
        (
            "[memory]\nmin_relevance_score = 0.5\n",
            ("memory.min_relevance_score: expected [recall] min_relevance",),
        ),
        (
            "[memory]\ndedup_on_write = true\n",
            ("memory.dedup_on_write: expected no dedup switch",),
        ),
        (
            '[memory.policy]\nthreat_scan = "strict"\n',
            ("memory.policy: expected no memory policy table", "threat_scan"),
        ),
        (
            '[memory]\nsearch_mode = "fuzzy"\n',
            ("memory.search_mode: expected one of hybrid, bm25, embedding", "fuzzy"),
        ),
        (
            "[memory]\nembedding_cache_size = -1\n",
            ("memory.embedding_cache_size: expected 0 (none)", "found -1"),
        ),
        ("[memory]\nnonsense = 1\n", ("nonsense",)),
    ],
)
def test_refusals_are_typed_one_liners(text, needles):
    with pytest.raises(ConfigError) as raised:
        parse_config(text)
    message = str(raised.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message, message


def test_a_refused_key_is_one_line_from_the_cli(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    config = Path("c.toml")
    config.write_text("[memory]\naudit_enabled = true\n")
    code = main(
        ["--config", str(config), "--db", "l.db", "memory", "list", "--agent", "ops"]
    )
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert "memory.audit_enabled: expected no audit switch" in err
    assert "found audit_enabled = True" in err
