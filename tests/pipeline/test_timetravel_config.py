"""``[memory] rewind_memory``: the configured rule a rewind applies to memory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.pipeline.demo_ledgers import demo_db, run  # noqa: F401 - demo_db is the db fixture
from turnledger.ledger.events import MemorySuperseded
from turnledger.ledger.ids import memory_stream_id
from turnledger.ledger.store import open_store
from turnledger.pipeline.config import ConfigError, parse_config
from turnledger.pipeline.config.sections import REWIND_MEMORY_RULES
from turnledger.pipeline.timetravel import MEMORY_RULES, TimeTravelError, as_memory_rule


def _config(tmp_path: Path, rule: str) -> str:
    path = tmp_path / f"{rule}.toml"
    path.write_text(f'[memory]\nrewind_memory = "{rule}"\n')
    return str(path)


def _superseded(db: str, agent: str) -> list[str]:
    with open_store(db) as store:
        return [
            r.event.key
            for r in store.read_stream(memory_stream_id(agent))
            if isinstance(r.event, MemorySuperseded)
        ]


def test_the_configured_rule_is_applied_and_the_flag_overrides_it(
    db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    supersede = _config(tmp_path, "supersede")
    # Two forks at the session's start, so each rewind hides the demo's turns.
    for key in ("a", "b"):
        code, _, err = run(
            capsys, "--db", db, "fork", "demo-1", "--at", "999999", "--as", key
        )
        assert code == 0, err
    code, out, _ = run(
        capsys, "--db", db, "--config", supersede, "rewind", "a", "--to", "1", "--json"
    )
    assert code == 0, out
    report = json.loads(out)
    assert report["memory_rule"] == "supersede"
    assert report["memory_keys"]
    assert report["superseded"] == report["memory_keys"]
    assert sorted(_superseded(db, "demo")) == sorted(report["superseded"])
    # --memory keep overrides the configured supersede: nothing more superseded.
    before = _superseded(db, "demo")
    code, out, _ = run(
        capsys,
        "--db",
        db,
        "--config",
        supersede,
        "rewind",
        "b",
        "--to",
        "1",
        "--memory",
        "keep",
        "--json",
    )
    assert code == 0, out
    report = json.loads(out)
    assert (report["memory_rule"], report["superseded"]) == ("keep", [])
    assert _superseded(db, "demo") == before


def test_without_a_configured_rule_a_rewind_keeps(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "--db", db, "rewind", "demo-1", "--to", "1", "--json")
    assert code == 0, out
    report = json.loads(out)
    assert (report["memory_rule"], report["superseded"]) == ("keep", [])
    assert report["memory_keys"]
    assert _superseded(db, "demo") == []


def test_an_invalid_rule_is_refused_naming_the_key_and_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    db = str(tmp_path / "turnledger.db")
    assert run(capsys, "--db", db, "demo")[0] == 0
    with open_store(db) as store:
        before = store.max_position()
    bad = _config(tmp_path, "drop")
    for extra in ((), ("--memory", "keep")):
        code, out, err = run(
            capsys, "--db", db, "--config", bad, "rewind", "demo-1", "--to", "1", *extra
        )
        assert (code, out) == (2, "")
        assert err.count("\n") == 1
        assert "memory.rewind_memory" in err
        assert "'drop'" in err
    with open_store(db) as store:
        assert store.max_position() == before  # nothing written
    with pytest.raises(ConfigError, match=r"memory\.rewind_memory: expected one of"):
        parse_config('[memory]\nrewind_memory = "undo"\n')
    assert parse_config('[memory]\nrewind_memory = "supersede"\n').memory.rewind_memory
    with pytest.raises(TimeTravelError, match="found 'undo'"):
        as_memory_rule("undo")


def test_the_config_and_the_engine_know_the_same_rules() -> None:
    assert REWIND_MEMORY_RULES == MEMORY_RULES
