"""A Hypothesis state machine: the SQLite store behaves like a plain in-memory model."""

from __future__ import annotations

import tempfile
from pathlib import Path
from uuid import UUID

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from turnledger.ledger.errors import ConcurrencyError, InvalidEventError
from turnledger.ledger.events import Event, ModelCalled, TurnCompleted, TurnStarted
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import Append, EventStore, open_store

texts = st.text(max_size=30)
id_chars = st.characters(
    blacklist_characters=[chr(c) for c in (*range(0x20), *range(0x7F, 0xA0))],
    blacklist_categories=("Cs",),
)  # identifiers hold no control character (tests/ledger/test_hostile_arguments.py)
ids = st.text(id_chars, min_size=1, max_size=30)
valid_events = st.one_of(
    st.builds(
        TurnStarted,
        turn_id=ids,
        origin=st.sampled_from(["interactive", "cron", "sub_turn"]),
        user_input=texts,
    ),
    st.builds(TurnCompleted, turn_id=ids, iterations=st.integers(0, 50)),
    st.builds(
        ModelCalled,
        turn_id=st.just("t"),
        provider=texts,
        model=texts,
        input_tokens=st.integers(0, 10**9),
    ),
)
invalid_event = st.builds(
    ModelCalled,
    turn_id=st.just("t"),
    provider=texts,
    model=texts,
    input_tokens=st.integers(max_value=-1),
)


class LedgerModel(RuleBasedStateMachine):
    """Random appends, batches, conflicts and bad input on SQLite vs a dict of lists."""

    streams = Bundle("streams")

    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.TemporaryDirectory()
        self.store: EventStore = open_store(str(Path(self.tmp.name) / "ledger.db"))
        self.model: dict[UUID, list[Event]] = {}
        self.log: list[tuple[UUID, int, Event]] = []

    def teardown(self) -> None:
        self.store.close()
        self.tmp.cleanup()

    @initialize(target=streams)
    def first_stream(self) -> UUID:
        return session_stream_id("agent", "s0")

    @rule(target=streams, key=st.text(id_chars, min_size=1, max_size=8))
    def new_stream(self, key: str) -> UUID:
        return session_stream_id("agent", key)

    def _apply(self, stream: UUID, events: list[Event]) -> None:
        head = len(self.model.setdefault(stream, []))
        for i, event in enumerate(events, start=1):
            self.log.append((stream, head + i, event))
        self.model[stream].extend(events)

    @rule(stream=streams, events=st.lists(valid_events, max_size=6))
    def append(self, stream: UUID, events: list[Event]) -> None:
        head = len(self.model.get(stream, []))
        result = self.store.append(stream, events, expected_version=head)
        assert result.last_version == head + len(events)
        self._apply(stream, events)

    @rule(
        stream=streams,
        events=st.lists(valid_events, min_size=1, max_size=3),
        skew=st.integers(-3, 3).filter(bool),
    )
    def stale_append(self, stream: UUID, events: list[Event], skew: int) -> None:
        head = len(self.model.get(stream, []))
        try:
            self.store.append(stream, events, expected_version=max(0, head + skew))
        except ConcurrencyError as e:
            assert e.found == head
        else:
            assert max(0, head + skew) == head  # only a clamped skew may succeed
            self._apply(stream, events)

    @rule(stream=streams, events=st.lists(valid_events, max_size=3), bad=invalid_event)
    def invalid_append(self, stream: UUID, events: list[Event], bad: Event) -> None:
        head = len(self.model.get(stream, []))
        try:
            self.store.append(stream, [*events, bad], expected_version=head)
        except InvalidEventError:
            pass
        else:
            raise AssertionError("an invalid event was accepted")

    @rule(data=st.data(), n=st.integers(1, 4))
    @precondition(lambda self: bool(self.model))
    def batch(self, data: st.DataObject, n: int) -> None:
        appends = []
        planned: dict[UUID, int] = {}
        for _ in range(n):
            stream = data.draw(st.sampled_from(sorted(self.model)))
            events = data.draw(st.lists(valid_events, min_size=1, max_size=3))
            stale = data.draw(st.booleans())
            head = planned.get(stream, len(self.model[stream]))
            expected = head + 1 if stale else head
            appends.append(Append(stream, events, expected))
            if not stale:
                planned[stream] = head + len(events)
        results = self.store.append_batch(appends)
        for append, result in zip(appends, results, strict=True):
            if isinstance(result, ConcurrencyError):
                assert append.expected_version != len(self.model[append.stream_id])
            else:
                self._apply(append.stream_id, list(append.events))

    @invariant()
    def streams_match(self) -> None:
        for stream, events in self.model.items():
            assert [r.event for r in self.store.read_stream(stream)] == events
            assert self.store.stream_version(stream) == len(events)

    @invariant()
    def global_log_matches(self) -> None:
        recorded = list(self.store.iter_all(page_size=7))
        assert [(r.stream_id, r.version, r.event) for r in recorded] == self.log
        positions = [r.position for r in recorded]
        assert positions == sorted(set(positions))
        assert self.store.max_position() == (positions[-1] if positions else 0)


LedgerModel.TestCase.settings = settings(
    max_examples=40, stateful_step_count=25, deadline=None
)
TestLedgerModel = LedgerModel.TestCase
