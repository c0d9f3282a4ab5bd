"""A rewind undoes the trims recorded after its point: the history is exactly as then.

Turns run through the engine under a small context budget, so it trims; a
rewind to a point before a trim brings the trimmed messages back (the session's
history, a point-in-time read, replay's digests and the next prompt agree), and
a redo (a rewind to after the trim) puts the trim back in effect.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from turnledger.ledger.events import HistoryTrimmed, SessionRewound
from turnledger.ledger.store import EventStore, open_store
from turnledger.pipeline.bootstrap import bootstrap
from turnledger.pipeline.config import Config
from turnledger.pipeline.config.sections import RuntimeConfig
from turnledger.pipeline.providers.base import ChatRequest, ChatResponse
from turnledger.pipeline.providers.scripted import ScriptedProvider
from turnledger.pipeline.sessions import resolve_session
from turnledger.pipeline.timetravel import rewind_session
from turnledger.pipeline.timetravel.replay import replay_session
from turnledger.projections.history import SESSION_HISTORY
from turnledger.projections.history.fold import compacted
from turnledger.projections.history.read import provider_messages
from turnledger.projections.queries import SessionHistories
from turnledger.projections.runner import ProjectionRunner
from turnledger.projections.views import SQLiteViewStore


@pytest.fixture(name="url", params=["sqlite", "postgres"])
def _url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "ledger.db")
    return str(request.getfixturevalue("postgres_url"))


async def _turns(
    url: str, data: Path, texts: list[str], budget: int
) -> list[ChatRequest]:
    provider = ScriptedProvider([ChatResponse(text=f"ok {t[:8]}") for t in texts])
    config = Config(
        data_dir=str(data), runtime=RuntimeConfig(context_budget_tokens=budget)
    )
    async with bootstrap(config, provider=provider, ledger_url=url) as runtime:
        for text in texts:
            outcome = await runtime.engine.run_turn("ops", "s", text)
            assert outcome.completed
    return provider.requests


def _texts(first: int, n: int) -> list[str]:
    return [f"turn {i} " + f"word{i} " * 40 for i in range(first, first + n)]


def _before_first_trim(store: EventStore, stream) -> int:
    events = store.read_stream(stream)
    index = next(i for i, r in enumerate(events) if isinstance(r.event, HistoryTrimmed))
    return events[index - 1].position


def test_a_rewind_before_a_trim_restores_what_it_hid(url: str, tmp_path: Path) -> None:
    asyncio.run(_turns(url, tmp_path / "data", _texts(0, 5), budget=150))
    with open_store(url) as store:
        ref = resolve_session(store, "s")
        stream = ref.stream_id
        histories = SessionHistories(store)
        end = store.max_position()
        assert histories.get(stream).trims >= 1
        point = _before_first_trim(store, stream)
        then = histories.get(stream, at=point)
        assert then.trims == 0
        report = rewind_session(store, ref, str(point))
        assert report.trims_undone >= 1
        now = histories.get(stream)
        assert provider_messages(now) == provider_messages(then)
        assert (now.trims, now.trimmed_through) == (0, 0)
        # The transcript fold, compacted, agrees (the compacting fold had
        # dropped what the trim hid: it is marked missing and refolded).
        whole = histories.transcript(stream)
        assert provider_messages(compacted(whole)) == provider_messages(now)
        assert now == compacted(whole)
        # A snapshot view that folded the rewind is not used as a snapshot.
        views = SQLiteViewStore(str(tmp_path / "views.db"))
        try:
            ProjectionRunner(store, views, [SESSION_HISTORY]).catch_up()
            viewed = SessionHistories(store, views)
            assert viewed.snapshot(stream) is None
            assert viewed.get(stream) == now
        finally:
            views.close()
        # Redo: a rewind to the end before the rewind puts the trims back.
        redo = rewind_session(store, ref, str(end))
        assert redo.trims_undone == 0
        again = histories.get(stream)
        assert provider_messages(again) == provider_messages(
            histories.get(stream, at=end)
        )
        assert again.trims >= 1
        # Back again before the trim, then one more turn under a larger budget:
        # its prompt holds the messages the trim had hidden.
        rewind_session(store, ref, str(point))
        restored = [
            m for m in provider_messages(histories.get(stream)) if m.role != "system"
        ]
    requests = asyncio.run(_turns(url, tmp_path / "data", _texts(9, 1), budget=30_000))
    sent = [m for m in requests[0].messages if m.role != "system"]
    assert sent[: len(restored)] == restored
    assert sent[0].text.startswith("turn 0 ")
    with open_store(url) as store:
        replay = replay_session(store, stream)
        assert replay.checks
        assert all(c.ok for c in replay.checks)
        rewinds = [
            r for r in store.read_stream(stream) if isinstance(r.event, SessionRewound)
        ]
        assert len(rewinds) == 3
        # A point-in-time read between the rewinds is exact too.
        at = rewinds[0].position
        expected = compacted(SessionHistories(store).transcript(stream, at=at))
        assert SessionHistories(store).get(stream, at=at) == expected
