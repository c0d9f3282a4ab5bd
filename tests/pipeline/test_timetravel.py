"""Time travel: point-in-time reads, forks and rewinds, through the real engine.

Every test runs on SQLite and on the real PostgreSQL server (``ledger`` fixture).
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from turnledger.ledger.events import (
    AssistantMessage,
    MemoryStored,
    MemorySuperseded,
    SessionForked,
    SessionOpened,
    SessionRewound,
    TurnCompleted,
    TurnStarted,
)
from turnledger.ledger.ids import memory_stream_id, session_stream_id
from turnledger.ledger.store import open_store
from turnledger.pipeline.bootstrap import bootstrap
from turnledger.pipeline.config import Config
from turnledger.pipeline.providers.base import ChatResponse
from turnledger.pipeline.providers.scripted import ScriptedProvider
from turnledger.pipeline.sessions import list_sessions, load_history, resolve_session
from turnledger.pipeline.timetravel import (
    TimeTravelError,
    fork_session,
    fork_tree,
    resolve_at,
    rewind_session,
)
from turnledger.pipeline.timetravel.replay import replay_session
from turnledger.projections.base import fold
from turnledger.projections.history import SESSION_HISTORY
from turnledger.projections.history.read import provider_messages, visible_messages
from turnledger.projections.lineage import last_version_at, lineage
from turnledger.projections.queries import SessionHistories, cost_records

AGENT = "ops"


@pytest.fixture(name="ledger", params=["sqlite", "postgres"])
def _ledger(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "turnledger.db")
    return str(request.getfixturevalue("postgres_url"))


def run_turns(url: str, key: str, texts: list[str]) -> None:
    """Run one engine turn per text in session ``key`` (the model echoes)."""
    provider = ScriptedProvider([ChatResponse(text=f"answer to {t}") for t in texts])

    async def main() -> None:
        async with bootstrap(Config(ledger=url), provider=provider) as runtime:
            for text in texts:
                outcome = await runtime.engine.run_turn(AGENT, key, text)
                assert outcome.completed

    asyncio.run(main())


def texts_of(url: str, key: str, *, at: int | None = None) -> list[str]:
    with open_store(url) as store:
        ref = resolve_session(store, key)
        state = SessionHistories(store).get(ref.stream_id, at=at)
    return [m.text for m in visible_messages(state)]


def turn_ids(url: str, key: str) -> list[str]:
    with open_store(url) as store:
        ref = resolve_session(store, key)
        return [
            r.event.turn_id
            for r in store.read_stream(ref.stream_id)
            if isinstance(r.event, TurnStarted)
        ]


def test_history_at_a_position_a_turn_and_a_time(ledger: str):
    """``--at`` resolves a position, a turn id and an ISO time to the same prefix."""
    run_turns(ledger, "s", ["one", "two", "three"])
    first = turn_ids(ledger, "s")[0]
    with open_store(ledger) as store:
        ref = resolve_session(store, "s")
        events = lineage(store, ref.stream_id)
        at_turn = resolve_at(events, first)
        end_of_first = next(
            r for r in events if r.position == at_turn
        ).recorded_at.isoformat()
        assert resolve_at(events, str(at_turn)) == at_turn
        assert resolve_at(events, end_of_first) >= at_turn
        with pytest.raises(TimeTravelError, match="Expected a position, a turn id"):
            resolve_at(events, "no-such-thing")
    assert texts_of(ledger, "s", at=at_turn) == ["one", "answer to one"]
    assert texts_of(ledger, "s", at=0) == []
    assert len(texts_of(ledger, "s")) == 6


def test_a_fork_is_one_event_and_its_history_is_the_source_prefix(ledger: str):
    """Forking writes one event; the fork's history equals the source's prefix."""
    run_turns(ledger, "s", ["one", "two", "three"])
    second = turn_ids(ledger, "s")[1]
    with open_store(ledger) as store:
        ref = resolve_session(store, "s")
        before = store.max_position()
        report = fork_session(store, ref, second, new_key="s-b")
        assert store.max_position() - before == 1
        fork_ref = resolve_session(store, "s-b")
        own = store.read_stream(fork_ref.stream_id)
        assert [type(r.event) for r in own] == [SessionForked]
        prefix = SessionHistories(store).get(ref.stream_id, at=report.at)
        forked = SessionHistories(store).get(fork_ref.stream_id)
        assert provider_messages(forked) == provider_messages(prefix)
        assert report.source_version == len(
            [r for r in store.read_stream(ref.stream_id) if r.position <= report.at]
        )
        assert "s-b" in [s.key for s in list_sessions(store)]
    assert texts_of(ledger, "s-b") == ["one", "answer to one", "two", "answer to two"]


def test_the_engine_runs_turns_on_a_fork_and_forks_of_forks(ledger: str):
    """New turns on a fork follow the prefix; a fork of a fork composes twice."""
    run_turns(ledger, "s", ["one", "two"])
    first = turn_ids(ledger, "s")[0]
    with open_store(ledger) as store:
        fork_session(store, resolve_session(store, "s"), first, new_key="f1")
    run_turns(ledger, "f1", ["alt"])
    assert texts_of(ledger, "f1") == ["one", "answer to one", "alt", "answer to alt"]
    with open_store(ledger) as store:
        f1 = resolve_session(store, "f1")
        alt = turn_ids(ledger, "f1")[0]
        fork_session(store, f1, alt, new_key="f2")
        tree = fork_tree(store, resolve_session(store, "f2"))
        assert tree.session == "s"
        assert [n.session for n in tree.forks] == ["f1"]
        assert [n.session for n in tree.forks[0].forks] == ["f2"]
    run_turns(ledger, "f2", ["deeper"])
    assert texts_of(ledger, "f2")[-4:] == [
        "alt",
        "answer to alt",
        "deeper",
        "answer to deeper",
    ]
    assert texts_of(ledger, "s")[-2:] == ["two", "answer to two"]
    with open_store(ledger) as store:
        f2 = resolve_session(store, "f2")
        report = replay_session(store, f2.stream_id)
        assert report.ok
        assert report.checks
        state = load_history(store, f2.stream_id)
        assert len(visible_messages(state)) == 6
        # Costs follow the lineage: the 3 model calls that made f2's history.
        buckets = cost_records(store, stream_id=f2.stream_id)
        assert buckets[f"session:{f2.stream_id}"].totals.calls == 3


def test_a_fork_refuses_an_existing_key_and_writes_nothing(ledger: str):
    run_turns(ledger, "s", ["one"])
    run_turns(ledger, "other", ["x"])
    with open_store(ledger) as store:
        before = store.max_position()
        with pytest.raises(TimeTravelError, match="Expected a new session key"):
            fork_session(store, resolve_session(store, "s"), "1", new_key="other")
        assert store.max_position() == before


def test_rewind_hides_turns_visibly_and_redo_brings_them_back(ledger: str):
    """A rewind is one event; the engine's next turn follows it; redo restores."""
    run_turns(ledger, "s", ["one", "two", "three"])
    ids = turn_ids(ledger, "s")
    with open_store(ledger) as store:
        ref = resolve_session(store, "s")
        head = store.max_position()
        report = rewind_session(store, ref, ids[0])
        assert report.turns == (ids[1], ids[2])
        assert report.hidden == 4
        assert store.max_position() - head == 1
        rewound = store.read_stream(ref.stream_id)[-1]
        assert isinstance(rewound.event, SessionRewound)
    assert texts_of(ledger, "s") == ["one", "answer to one"]
    run_turns(ledger, "s", ["four"])
    assert texts_of(ledger, "s") == ["one", "answer to one", "four", "answer to four"]
    with open_store(ledger) as store:
        ref = resolve_session(store, "s")
        redo = rewind_session(store, ref, str(head))
        assert redo.restored == 4
        with pytest.raises(TimeTravelError, match="Expected a point before"):
            rewind_session(store, ref, str(store.max_position()))
        assert replay_session(store, ref.stream_id).ok
    assert len(texts_of(ledger, "s")) == 6


def test_rewind_supersedes_the_rewound_turns_memory_when_asked(ledger: str):
    """``supersede`` records one memory.superseded per live entry the turns wrote."""
    run_turns(ledger, "s", ["one"])
    with open_store(ledger) as store:
        ref = resolve_session(store, "s")
        mark = store.max_position()
        memory = memory_stream_id(AGENT)
        store.append(
            memory,
            [MemoryStored(agent=AGENT, key="before", content="x", session="s")],
            expected_version=store.stream_version(memory),
        )
        # A turn that wrote memory while it ran (recorded as the engine would).
        version = store.stream_version(ref.stream_id)
        store.append(
            ref.stream_id,
            [TurnStarted(turn_id="tm", origin="channel", user_input="remember vim")],
            expected_version=version,
        )
        store.append(
            memory,
            [MemoryStored(agent=AGENT, key="editor", content="vim", session="s")],
            expected_version=store.stream_version(memory),
        )
        store.append(
            ref.stream_id,
            [AssistantMessage(turn_id="tm", text="noted"), TurnCompleted(turn_id="tm")],
            expected_version=version + 1,
        )
        report = rewind_session(store, ref, str(mark), memory_rule="supersede")
        assert report.turns == ("tm",)
        assert report.memory_keys == ("editor",)
        assert report.superseded == ("editor",)
        last = store.read_stream(memory)[-1].event
        assert isinstance(last, MemorySuperseded)
        assert last.key == "editor"
        # Redo, then rewind again keeping memory: reported, nothing superseded.
        rewind_session(store, ref, "tm")
        head = store.max_position()
        kept = rewind_session(store, ref, str(mark))
        assert kept.memory_rule == "keep"
        assert kept.superseded == ()
        assert store.read_stream(memory)[-1].position < head


def test_a_point_in_time_read_is_the_fold_of_the_prefix(ledger: str):
    """At every position, the query API's history is the fold of the prefix."""
    run_turns(ledger, "s", ["one", "two"])
    with open_store(ledger) as store:
        ref = resolve_session(store, "s")
        rewind_session(store, ref, turn_ids(ledger, "s")[0])
    run_turns(ledger, "s", ["three"])
    with open_store(ledger) as store:
        for at in range(store.max_position() + 1):
            prefix = [r for r in store.read_stream(ref.stream_id) if r.position <= at]
            folded = fold(SESSION_HISTORY, prefix).get(
                str(ref.stream_id), SESSION_HISTORY.initial("")
            )
            assert SessionHistories(store).get(ref.stream_id, at=at) == folded


def test_forking_a_fork_inside_its_prefix_forks_the_source(ledger: str):
    """A position before a fork's own events names the source's event there."""
    run_turns(ledger, "s", ["one", "two"])
    with open_store(ledger) as store:
        s = resolve_session(store, "s")
        second = turn_ids(ledger, "s")[1]
        fork_session(store, s, second, new_key="f1")
        first_end = resolve_at(lineage(store, s.stream_id), turn_ids(ledger, "s")[0])
        report = fork_session(
            store, resolve_session(store, "f1"), str(first_end), new_key="f3"
        )
        assert report.source_stream == str(s.stream_id)
        with pytest.raises(TimeTravelError, match="at or after the session's first"):
            fork_session(store, s, "0", new_key="f4")
    assert texts_of(ledger, "f3") == ["one", "answer to one"]


@given(
    pattern=st.lists(st.booleans(), min_size=1, max_size=40),
    probe=st.integers(0, 90),
)
@settings(max_examples=30, deadline=None)
def test_the_version_search_matches_a_scan(pattern: list[bool], probe: int):
    """last_version_at finds what a linear scan finds, however streams interleave."""
    with tempfile.TemporaryDirectory() as folder, open_store(f"{folder}/l.db") as store:
        mine, other = session_stream_id("ops", "a"), session_stream_id("ops", "b")
        for i, is_mine in enumerate(pattern):
            stream = mine if is_mine else other
            events = [TurnStarted(turn_id=f"t{i}", origin="channel", user_input="x")]
            if store.stream_version(stream) == 0:
                events.insert(0, SessionOpened(agent="ops", session_key=stream.hex[:6]))
            store.append(stream, events, expected_version=store.stream_version(stream))
        own = store.read_stream(mine)
        expected = max((r.version for r in own if r.position <= probe), default=0)
        assert last_version_at(store, mine, probe, len(own)) == expected
