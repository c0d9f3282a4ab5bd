"""One catch-up loop for every tracked read model: views and memory backends.

Two runners catching one view up at once (two processes on one view file) never
apply an event twice: a page the other committed first, or committed between
this runner's position read and its apply, is refused and the loop goes on from
the other's position. A memory backend is caught up by the same loop, through
:class:`BackendTarget` (its filter and its event opener), and one followed live
in small pages equals one rebuilt in a single pass.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
import pytest

from tests.projections.test_runner import fill, view_digest
from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import MemoryForgotten, MemoryStored, MemorySuperseded
from turnledger.ledger.ids import memory_stream_id
from turnledger.ledger.store import open_store
from turnledger.projections.base import digest, fold
from turnledger.projections.history import SESSION_HISTORY
from turnledger.projections.memory.apply import BackendTarget
from turnledger.projections.memory.markdown import MarkdownMemory
from turnledger.projections.memory.sqlite import SQLiteMemory
from turnledger.projections.runner import ProjectionRunner, ViewTarget, catch_up
from turnledger.projections.views import SQLiteViewStore


class Interrupted(ViewTarget):
    """A view target another runner overtakes, part way into its page, every
    other apply (another process committing between its read and its apply)."""

    def __init__(self, views, theirs) -> None:
        super().__init__(views, SESSION_HISTORY)
        self.store = None
        self.theirs = theirs
        self.pages = 0

    def apply(self, page: Sequence[Recorded], reached: int) -> None:
        self.pages += 1
        if self.pages % 2 == 1 and len(page) > 1:
            other = ViewTarget(self.theirs, SESSION_HISTORY)
            catch_up(self.store, other, until=page[-2].position)
        super().apply(page, reached)


def test_two_runners_on_one_view_apply_each_event_once(tmp_path):
    store = open_store(str(tmp_path / "ledger.db"))
    fill(store, sessions=3, turns=6)
    path = str(tmp_path / "views.db")
    mine, theirs = SQLiteViewStore(path), SQLiteViewStore(path)
    target = Interrupted(mine, theirs)
    target.store = store
    applied = catch_up(store, target, page_size=5)
    expected = digest(fold(SESSION_HISTORY, store.iter_all()))
    assert view_digest(mine) == view_digest(theirs) == expected
    assert mine.tracking(SESSION_HISTORY.name) == store.max_position()
    assert target.pages > 2  # it was overtaken and went on
    assert 0 < applied < len(list(store.iter_all(types=SESSION_HISTORY.event_types)))
    store.close()


def test_a_runner_overtaken_entirely_applies_nothing(tmp_path):
    store = open_store(str(tmp_path / "ledger.db"))
    fill(store, sessions=2, turns=3)
    path = str(tmp_path / "views.db")
    mine, theirs = SQLiteViewStore(path), SQLiteViewStore(path)
    other = ProjectionRunner(store, theirs, [SESSION_HISTORY])

    class Overtaken(ViewTarget):
        def apply(self, page, reached):
            other.catch_up()  # everything, before this runner's first apply
            super().apply(page, reached)

    applied = catch_up(store, Overtaken(mine, SESSION_HISTORY))
    assert applied == 0
    assert view_digest(mine) == digest(fold(SESSION_HISTORY, store.iter_all()))
    store.close()


def test_a_memory_backend_is_caught_up_by_the_same_loop(tmp_path):
    store = open_store(str(tmp_path / "ledger.db"))
    for agent in ("ops", "other"):
        stream = memory_stream_id(agent)
        store.append(
            stream,
            [
                MemoryStored(agent=agent, key="k1", content="sealed:one"),
                MemoryStored(agent=agent, key="k2", content="sealed:two"),
                MemoryForgotten(agent=agent, key="k2"),
            ],
            expected_version=0,
        )
    memory = SQLiteMemory(tmp_path / "memory.db")
    seen: list[str] = []

    def opened(recorded: Recorded) -> Recorded:
        event = recorded.event
        if isinstance(event, MemoryStored):
            plain = event.content.removeprefix("sealed:")
            return msgspec.structs.replace(
                recorded, event=msgspec.structs.replace(event, content=plain)
            )
        return recorded

    def ops_only(recorded: Recorded) -> bool:
        seen.append(type(recorded.event).__name__)
        return getattr(recorded.event, "agent", "") == "ops"

    target = BackendTarget(
        memory, name="sqlite.default", accepts=ops_only, opened=opened
    )
    assert catch_up(store, target, page_size=2) == 3
    assert memory.applied_position() == store.max_position()
    assert [e.key for e in memory.list(agents=["ops"])] == ["k1"]
    assert memory.get("k1", agents=["ops"]).content == "one"
    assert memory.list(agents=["other"]) == []
    assert len(seen) == 6  # every memory event was offered, two agents' worth
    assert catch_up(store, target) == 0  # nothing new: nothing read or applied
    memory.close()
    store.close()


def _memory_rounds(store, round_: int) -> None:
    for agent in ("ops", "other"):
        stream = memory_stream_id(agent)
        events = [
            MemoryStored(agent=agent, key=f"r{round_}a", content=f"{agent} {round_} a"),
            MemoryStored(agent=agent, key=f"r{round_}b", content=f"{agent} {round_} b"),
        ]
        if round_:
            events += [
                MemoryForgotten(agent=agent, key=f"r{round_ - 1}a"),
                MemorySuperseded(
                    agent=agent, key=f"r{round_ - 1}b", superseded_by=f"r{round_}b"
                ),
                MemoryStored(agent=agent, key="shared", content=f"rewritten {round_}"),
            ]
        store.append(stream, events, expected_version=store.stream_version(stream))


def _entries(backend, agent: str) -> bytes:
    return msgspec.json.encode(
        sorted(backend.export(agents=[agent]), key=lambda e: e.key)
    )


@pytest.mark.parametrize("kind", ["sqlite", "markdown"])
def test_memory_caught_up_live_equals_a_rebuild(tmp_path, kind):
    """A backend followed live in small pages equals one rebuilt in one pass."""
    store = open_store(str(tmp_path / "ledger.db"))

    def open_backend(where: str):
        if kind == "sqlite":
            return SQLiteMemory(tmp_path / f"{where}.db")
        return MarkdownMemory(tmp_path / where, agent="ops")

    def ops_only(recorded: Recorded) -> bool:
        return getattr(recorded.event, "agent", "") == "ops"

    live = open_backend("live")
    for round_ in range(4):
        _memory_rounds(store, round_)
        catch_up(store, BackendTarget(live, accepts=ops_only), page_size=2)
    rebuilt = open_backend("rebuilt")
    catch_up(store, BackendTarget(rebuilt, accepts=ops_only))
    assert _entries(live, "ops") == _entries(rebuilt, "ops")
    keys = {e.key for e in rebuilt.export(agents=["ops"])}
    assert "r0a" not in keys  # forgotten
    assert {"r3a", "r3b", "shared"} <= keys
    assert live.applied_position() == rebuilt.applied_position() == store.max_position()
    live.close()
    rebuilt.close()
    store.close()
