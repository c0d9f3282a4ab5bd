"""``observe SESSION`` and ``costs --session`` follow a fork: its source prefix comes first."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.pipeline.demo_ledgers import demo_db, run  # noqa: F401 - demo_db is the db fixture
from turnledger.ledger.events import ModelCalled, TurnStarted
from turnledger.ledger.store import open_store
from turnledger.pipeline.bootstrap import bootstrap
from turnledger.pipeline.demo import demo_config
from turnledger.pipeline.providers.base import ChatResponse, Usage
from turnledger.pipeline.providers.scripted import ScriptedProvider
from turnledger.pipeline.sessions import resolve_session
from turnledger.projections.base import fold
from turnledger.projections.costs import COST_RECORDS, totals
from turnledger.projections.lineage import session_timeline


async def _turn_on(db: str, data: Path, key: str) -> None:
    provider = ScriptedProvider(
        [ChatResponse(text="on the fork", usage=Usage(input_tokens=7, output_tokens=3))]
    )
    async with bootstrap(demo_config(data), provider=provider, ledger_url=db) as rt:
        outcome = await rt.engine.run_turn("demo", key, "and now?")
    assert outcome.completed


def _fork(db: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> int:
    """Fork demo-1 as ``b`` at its second turn, run one turn on ``b``."""
    with open_store(db) as store:
        ref = resolve_session(store, "demo-1")
        second = [
            r.event.turn_id
            for r in store.read_stream(ref.stream_id)
            if isinstance(r.event, TurnStarted)
        ][1]
    code, out, err = run(
        capsys, "--db", db, "fork", "demo-1", "--at", second, "--as", "b", "--json"
    )
    assert code == 0, err
    asyncio.run(_turn_on(db, tmp_path / "fork-data", "b"))
    capsys.readouterr()
    return int(json.loads(out)["at"])


def _calls(db: str, key: str, at: int | None = None) -> int:
    with open_store(db) as store:
        ref = resolve_session(store, key)
        return sum(
            1
            for r in store.read_stream(ref.stream_id)
            if isinstance(r.event, ModelCalled) and (at is None or r.position <= at)
        )


def test_costs_of_a_fork_include_its_source_prefix(
    db: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    at = _fork(db, capsys, tmp_path)
    prefix, own, source = (
        _calls(db, "demo-1", at),
        _calls(db, "b"),
        _calls(db, "demo-1"),
    )
    assert (prefix, own) > (0, 0)
    assert prefix < source  # the fork point lies inside the source
    code, out, _ = run(capsys, "--db", db, "costs", "--session", "b", "--json")
    assert code == 0
    report = json.loads(out)
    assert report["total"]["calls"] == prefix + own
    code, out, _ = run(
        capsys, "--db", db, "costs", "--session", "b", "--by", "session", "--json"
    )
    assert [(r["group"], r["calls"]) for r in json.loads(out)["rows"]] == [
        ("demo/b", prefix + own)
    ]
    # The source is unchanged, and the whole ledger counts each call once.
    code, out, _ = run(capsys, "--db", db, "costs", "--session", "demo-1", "--json")
    assert json.loads(out)["total"]["calls"] == source
    code, out, _ = run(capsys, "--db", db, "costs", "--by", "agent", "--json")
    rows = json.loads(out)["rows"]
    assert [(r["group"], r["calls"]) for r in rows] == [("demo", source + own)]
    # The cost projection knows the fork's agent (per-agent totals).
    with open_store(db) as store:
        states = fold(COST_RECORDS, store.iter_all(types=COST_RECORDS.event_types))
    assert totals(states, "agent")["demo"].calls == source + own
    assert "" not in totals(states, "agent")


def test_observe_of_a_fork_includes_its_source_prefix(
    db: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    at = _fork(db, capsys, tmp_path)
    code, out, _ = run(
        capsys, "--db", db, "observe", "demo-1", "--json", "--limit", "100000"
    )
    assert code == 0
    source = [json.loads(line) for line in out.splitlines()]
    code, out, _ = run(
        capsys, "--db", db, "observe", "b", "--json", "--limit", "100000"
    )
    assert code == 0
    fork = [json.loads(line) for line in out.splitlines()]
    head = [i for i in fork if i["position"] <= at]
    assert head == [i for i in source if i["position"] <= at]
    assert head
    own = [i for i in fork if i["position"] > at]
    assert [i["event"] for i in own].count("observer.llm_response") == 1
    assert all(i["position"] > at for i in own)
    # --limit keeps the newest; the text form prints one line per item.
    code, out, _ = run(capsys, "--db", db, "observe", "b", "--json", "--limit", "2")
    assert [json.loads(line) for line in out.splitlines()] == fork[-2:]
    code, out, _ = run(capsys, "--db", db, "observe", "b")
    assert len(out.splitlines()) == len(fork)
    # The query the web timeline can call gives the same items.
    with open_store(db) as store:
        ref = resolve_session(store, "b")
        items = session_timeline(store, ref.stream_id, limit=100000)
        assert [i.position for i in items] == [i["position"] for i in fork]
        early = session_timeline(store, ref.stream_id, at=at, limit=100000)
    assert [i.position for i in early] == [i["position"] for i in head]


def test_observe_of_an_unknown_session_is_refused(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "--db", db, "observe", "nope")
    assert (code, out) == (2, "")
    assert err.count("\n") == 1
