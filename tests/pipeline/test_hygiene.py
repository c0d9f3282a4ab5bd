"""Scheduled memory hygiene: retention applied as recorded events after turns."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.pipeline.test_engine import FakeProvider, answer
from turnledger.ledger.events import MemoryForgotten
from turnledger.ledger.ids import memory_stream_id
from turnledger.ledger.store import open_store
from turnledger.pipeline.bootstrap import bootstrap
from turnledger.pipeline.config import ConfigError, parse_config
from turnledger.pipeline.memory import MemoryService
from turnledger.pipeline.memory.hygiene import HygieneSchedule


def test_the_schedule_runs_when_due_and_records_events(tmp_path):
    path = str(tmp_path / "l.db")
    store = open_store(path)
    memory = MemoryService(store, parse_config(""), ledger_url=path)
    memory.store_entry(
        "ops", "chat1", "we talked", category="conversation", session="s1"
    )
    memory.store_entry("ops", "fact", "a core fact")
    now = [datetime.now(UTC) + timedelta(days=40)]  # the chat row is now 40 days old
    schedule = HygieneSchedule(memory, 24, clock=lambda: now[0])
    report = schedule.run_if_due("ops")
    assert report is not None
    assert report.recorded == 1
    forgotten = [
        r.event
        for r in store.read_stream(memory_stream_id("ops"))
        if isinstance(r.event, MemoryForgotten)
    ]
    assert [(f.key, f.source) for f in forgotten] == [("chat1", "governance")]
    assert memory.get("ops", "fact") is not None
    assert schedule.run_if_due("ops") is None  # not due again for 24 hours
    now[0] += timedelta(hours=25)
    assert schedule.run_if_due("ops") is not None
    assert HygieneSchedule(memory, 0).run_if_due("ops") is None  # off
    memory.close()
    store.close()


async def test_the_engine_runs_hygiene_after_a_completed_turn(tmp_path):
    cfg = parse_config(f'data_dir = "{tmp_path / "d"}"\n[memory]\nhygiene_hours = 1\n')
    path = str(tmp_path / "l.db")
    store = open_store(path)
    async with bootstrap(
        cfg,
        provider=FakeProvider([answer("ok")]),
        store=store,
        ledger_url=path,
        tools={},
    ) as runtime:
        memory = runtime.memory
        memory.store_entry(
            "ops", "old_chat", "talk", category="conversation", session="s1"
        )
        engine = runtime.engine
        later = datetime.now(UTC) + timedelta(days=31)
        engine.finisher.hygiene = HygieneSchedule(memory, 1, clock=lambda: later)
        assert (await engine.run_turn("ops", "s1", "hello there friend")).completed
        assert memory.get("ops", "old_chat") is None
    store.close()


def test_bad_hygiene_hours_are_config_errors():
    with pytest.raises(ConfigError, match="hygiene_hours"):
        parse_config("[memory]\nhygiene_hours = -1\n")
