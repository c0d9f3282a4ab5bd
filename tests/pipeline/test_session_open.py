"""Sessions open from their snapshot plus the newer events, never from version 1."""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgspec

from tests.contracts.store_contract import turn_events
from turnledger.ledger.events import HistoryTrimmed, SessionOpened
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import open_store
from turnledger.pipeline.bootstrap import bootstrap
from turnledger.pipeline.config import Config
from turnledger.pipeline.providers.base import ChatResponse
from turnledger.pipeline.providers.scripted import ScriptedProvider
from turnledger.projections.base import fold
from turnledger.projections.history import (
    SESSION_HISTORY,
    SESSION_TRANSCRIPT,
    SessionHistoryState,
)
from turnledger.projections.history.read import visible_messages
from turnledger.projections.queries import SessionHistories
from turnledger.projections.runner import ProjectionRunner
from turnledger.projections.views import SQLiteViewStore

AGENT = "ops"
KEY = "long"


def record_long_session(path: str, events: int) -> int:
    """Append a session of about ``events`` events, trimmed every 20 turns."""
    stream = session_stream_id(AGENT, KEY)
    store = open_store(path, synchronous="OFF")
    try:
        version = store.append(
            stream, [SessionOpened(agent=AGENT, session_key=KEY)], expected_version=0
        ).last_version
        turn = 0
        while version < events:
            batch = []
            for _ in range(20):
                batch += turn_events(f"t{turn}")
                turn += 1
            # Every 20 turns the engine would have trimmed all but the newest.
            batch.append(
                HistoryTrimmed(
                    turn_id=f"t{turn - 1}",
                    dropped_messages=1,
                    dropped_turns=19,
                    kept_turns=1,
                    tokens_before=10,
                    tokens_after=5,
                    reason="context token budget exceeded",
                    dropped_through_version=version + len(batch) - 10,
                )
            )
            version = store.append(stream, batch, expected_version=version).last_version
        return version
    finally:
        store.close()


def test_a_50000_event_session_opens_from_its_snapshot(tmp_path: Path):
    """Opening reads the events after the snapshot, not the 50,000 before it."""
    ledger = str(tmp_path / "l.db")
    head = record_long_session(ledger, 50_000)
    stream = session_stream_id(AGENT, KEY)
    store = open_store(ledger)
    views = SQLiteViewStore(str(tmp_path / "v.db"))
    try:
        ProjectionRunner(store, views, [SESSION_HISTORY]).catch_up()
        histories = SessionHistories(store, views)
        state, version = histories.open(stream)
        assert version == head
        assert histories.events_read == 0
        full = fold(SESSION_HISTORY, store.read_stream(stream))[str(stream)]
        assert state == full
        # The snapshot is bounded by what the provider sees, not by the session.
        assert len(state.entries) < 100
        assert state.trimmed_entries > 10_000
        # Newer events than the snapshot are read, and only those.
        store.append(stream, turn_events("late"), expected_version=head)
        state, version = histories.open(stream)
        assert histories.events_read == len(turn_events("late"))
        assert version == head + len(turn_events("late"))
        assert state == fold(SESSION_HISTORY, store.read_stream(stream))[str(stream)]
    finally:
        views.close()
        store.close()


def test_the_engine_opens_a_long_session_without_reading_it_all(tmp_path: Path):
    """A turn on a 50,000-event session reads only the snapshot's tail."""
    ledger = str(tmp_path / "l.db")
    record_long_session(ledger, 50_000)
    config = Config(ledger=ledger, data_dir=str(tmp_path / "data"))
    with open_store(ledger) as store:
        views = SQLiteViewStore(str(tmp_path / "l.views.db"))
        ProjectionRunner(store, views, [SESSION_HISTORY]).catch_up()
        views.close()

    async def turn() -> tuple[bool, int]:
        provider = ScriptedProvider([ChatResponse(text="fine")])
        async with bootstrap(config, provider=provider) as runtime:
            outcome = await runtime.engine.run_turn(AGENT, KEY, "and now?")
            return outcome.completed, runtime.histories.events_read

    completed, read = asyncio.run(turn())
    assert completed
    assert read == 0


def test_a_view_written_before_compaction_is_not_used_as_a_snapshot(tmp_path: Path):
    """An old (uncompacted) state in the view is ignored: the stream is folded."""
    ledger = str(tmp_path / "l.db")
    record_long_session(ledger, 500)
    stream = session_stream_id(AGENT, KEY)
    with open_store(ledger) as store:
        views = SQLiteViewStore(str(tmp_path / "v.db"))
        stale = SessionHistoryState(agent="someone else")
        views.commit(SESSION_HISTORY.name, {str(stream): stale}, 1)
        histories = SessionHistories(store, views)
        state = histories.get(stream)
        views.close()
        assert state.agent == AGENT
        assert histories.events_read == store.stream_version(stream)


def test_history_and_transcript_show_the_same_visible_messages(tmp_path: Path):
    """Compaction drops only what trims hid: the visible history is the same."""
    ledger = str(tmp_path / "l.db")
    record_long_session(ledger, 2_000)
    stream = session_stream_id(AGENT, KEY)
    with open_store(ledger) as store:
        events = store.read_stream(stream)
    compact = fold(SESSION_HISTORY, events)[str(stream)]
    whole = fold(SESSION_TRANSCRIPT, events)[str(stream)]
    assert visible_messages(compact) == visible_messages(whole)
    assert compact.trimmed_entries == whole.trimmed_entries
    assert len(whole.entries) == len(compact.entries) + compact.trimmed_entries
    assert msgspec.structs.replace(whole, entries=compact.entries, compacted=True) == (
        compact
    )


def test_the_linear_stream_fold_equals_the_event_by_event_fold(tmp_path: Path):
    """fold_stream gives exactly the fold's state, for both history folds."""
    from turnledger.projections.history.fold import fold_stream

    ledger = str(tmp_path / "l.db")
    record_long_session(ledger, 3_000)
    stream = session_stream_id(AGENT, KEY)
    with open_store(ledger) as store:
        events = store.read_stream(stream)
    for projection in (SESSION_HISTORY, SESSION_TRANSCRIPT):
        expected = fold(projection, events)[str(stream)]
        assert fold_stream(projection, projection.initial(""), events) == expected
        # From any midpoint state too (what advance does with a snapshot).
        middle = len(events) // 2
        start = fold(projection, events[:middle])[str(stream)]
        assert fold_stream(projection, start, events[middle:]) == expected
