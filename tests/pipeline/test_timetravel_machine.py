"""A Hypothesis state machine: turns, trims, crashes, forks and rewinds at random points.

Sessions on a real SQLite ledger are driven step by step: turns with 0-2 tool
calls (all, some or none of the results recorded: a crash leaves the turn
open), trims through any version, forks of any session (forks of forks too) at
any position, and rewinds of any session to any position (redo included). After
every step:

- every session exports pairing-valid in every export format;
- a fork's history as of its own fork event equals its source's history as of
  the fork point;
- right after a rewind to a position (nothing trimmed or rewound since it),
  the history holds exactly the messages it held then;
- the history at sampled positions equals an independent fold of the prefix
  (the stream's events, a fork's source prefix read separately and put first);
- every projection of the catalogue, caught up live, equals a rebuild.

``replay --rerun`` is not built, so re-runs are not among the steps.
"""

from __future__ import annotations

import random
import tempfile
from dataclasses import dataclass
from pathlib import Path
from uuid import UUID

import msgspec
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import (
    AssistantMessage,
    Event,
    HistoryTrimmed,
    SessionForked,
    SessionOpened,
    ToolCallRecord,
    ToolResultRecorded,
    TurnCompleted,
    TurnStarted,
)
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import open_store
from turnledger.pipeline.export import (
    EXPORT_FORMATS,
    ExportOptions,
    prepare_history,
    render,
)
from turnledger.pipeline.formats import count_pairing, parse_transcript
from turnledger.pipeline.sessions import SessionRef, load_history
from turnledger.pipeline.timetravel import TimeTravelError, fork_session, rewind_session
from turnledger.policies.pairing import audit_pairing
from turnledger.projections.base import digest, fold
from turnledger.projections.catalog import PROJECTIONS
from turnledger.projections.history import SESSION_HISTORY, provider_messages
from turnledger.projections.queries import SessionHistories
from turnledger.projections.runner import ProjectionRunner
from turnledger.projections.views import SQLiteViewStore


@dataclass
class Session:
    ref: SessionRef
    open_turn: str | None = None


class TimeTravelMachine(RuleBasedStateMachine):
    """Turns, trims, crashes, forks and rewinds, checked after every step."""

    def __init__(self) -> None:
        super().__init__()
        self.folder = Path(tempfile.mkdtemp())
        self.store = open_store(str(self.folder / "l.db"), synchronous="OFF")
        self.views = SQLiteViewStore(str(self.folder / "v.db"))
        self.rebuilt = SQLiteViewStore(str(self.folder / "r.db"))
        self.live = ProjectionRunner(self.store, self.views, PROJECTIONS)
        self.sessions: list[Session] = []
        self.turns = 0
        self.rnd = random.Random(0)
        self._open("root")

    def _open(self, key: str) -> None:
        stream = session_stream_id("ops", key)
        self.store.append(
            stream, [SessionOpened(agent="ops", session_key=key)], expected_version=0
        )
        self.sessions.append(
            Session(ref=SessionRef(stream_id=stream, agent="ops", key=key))
        )

    def _append(self, session: Session, events: list[Event]) -> None:
        stream = session.ref.stream_id
        self.store.append(
            stream, events, expected_version=self.store.stream_version(stream)
        )

    def teardown(self) -> None:
        self.store.close()
        self.views.close()
        self.rebuilt.close()

    # -- steps ----------------------------------------------------------------

    @rule(pick=st.integers(0, 99), calls=st.integers(0, 2), results=st.integers(0, 2))
    def turn(self, pick: int, calls: int, results: int) -> None:
        session = self.sessions[pick % len(self.sessions)]
        self.turns += 1
        tid = f"t{self.turns}"
        ids = [f"{tid}c{i}" for i in range(calls)]
        events: list[Event] = [
            TurnStarted(turn_id=tid, origin="channel", user_input=tid)
        ]
        if ids:
            events.append(
                AssistantMessage(
                    turn_id=tid,
                    tool_calls=tuple(ToolCallRecord(id=c, name="t") for c in ids),
                )
            )
        events += [
            ToolResultRecorded(turn_id=tid, call_id=c, tool="t", output="ok")
            for c in ids[:results]
        ]
        crashed = results < calls
        if not crashed:
            events += [
                AssistantMessage(turn_id=tid, text=f"done {tid}", iteration=1),
                TurnCompleted(turn_id=tid),
            ]
        self._append(session, events)
        session.open_turn = tid if crashed else None

    @rule(pick=st.integers(0, 99), share=st.floats(0, 1))
    def trim(self, pick: int, share: float) -> None:
        session = self.sessions[pick % len(self.sessions)]
        state = SessionHistories(self.store).get(session.ref.stream_id)
        if not state.entries:
            return
        through = state.entries[int(share * (len(state.entries) - 1))].version
        self._append(
            session,
            [
                HistoryTrimmed(
                    turn_id=state.entries[-1].turn_id or "t0",
                    dropped_messages=1,
                    dropped_turns=1,
                    kept_turns=1,
                    tokens_before=2,
                    tokens_after=1,
                    reason="budget",
                    dropped_through_version=through,
                )
            ],
        )

    @rule(pick=st.integers(0, 99), share=st.floats(0, 1))
    def fork(self, pick: int, share: float) -> None:
        source = self.sessions[pick % len(self.sessions)]
        at = int(share * self.store.max_position())
        key = f"f{len(self.sessions)}"
        try:
            report = fork_session(self.store, source.ref, str(at), new_key=key)
        except TimeTravelError:
            return  # a point before the source's first event
        stream = UUID(report.stream)
        self.sessions.append(
            Session(ref=SessionRef(stream_id=stream, agent="ops", key=key))
        )
        forked = SessionHistories(self.store).get(stream)
        self.sessions[-1].open_turn = forked.open_turn

    @rule(pick=st.integers(0, 99), share=st.floats(0, 1))
    def rewind(self, pick: int, share: float) -> None:
        session = self.sessions[pick % len(self.sessions)]
        at = int(share * self.store.max_position())
        histories = SessionHistories(self.store)
        then = histories.get(session.ref.stream_id, at=at)
        before = histories.get(session.ref.stream_id)
        try:
            rewind_session(self.store, session.ref, str(at))
        except TimeTravelError:
            return  # a turn is open, or nothing would change
        now = SessionHistories(self.store).get(session.ref.stream_id)
        if then.trims == before.trims and not before.rewinds:
            # Nothing compacted or rewound since: the history is exactly as then.
            assert [e.version for e in now.entries] == [e.version for e in then.entries]

    # -- invariants -----------------------------------------------------------

    @invariant()
    def every_export_is_pairing_valid(self) -> None:
        options = ExportOptions(
            budget_tokens=self.rnd.choice([0, 40, 2000]),
            max_tool_result_chars=self.rnd.choice([0, 5, 1000]),
        )
        for session in self.sessions:
            history = provider_messages(load_history(self.store, session.ref.stream_id))
            prepared = prepare_history(history, options)
            assert audit_pairing(prepared.messages).clean
            for fmt in EXPORT_FORMATS:
                data = msgspec.json.encode(render(prepared.messages, fmt))
                counts = count_pairing(parse_transcript(data, format=fmt))
                assert (counts.unpaired_calls, counts.unpaired_results) == (0, 0), fmt

    @invariant()
    def a_fork_starts_as_its_source_prefix(self) -> None:
        histories = SessionHistories(self.store)
        for session in self.sessions:
            first = self.store.read_stream(session.ref.stream_id, limit=1)[0]
            if not isinstance(first.event, SessionForked):
                continue
            source = UUID(first.event.source_stream)
            start = histories.get(session.ref.stream_id, at=first.position)
            prefix = histories.get(source, at=first.event.source_position)
            assert provider_messages(start) == provider_messages(prefix)

    @invariant()
    def history_at_a_position_is_the_fold_of_its_prefix(self) -> None:
        last = self.store.max_position()
        for session in self.rnd.sample(self.sessions, min(2, len(self.sessions))):
            stream = session.ref.stream_id
            for at in (self.rnd.randint(0, last), last):
                events = self._prefix(stream, at)
                folded = fold(SESSION_HISTORY, events).get(
                    str(stream), SESSION_HISTORY.initial("")
                )
                assert SessionHistories(self.store).get(stream, at=at) == folded

    def _prefix(self, stream: UUID, at: int) -> list[Recorded]:
        """An independent composition: the source's events, then the stream's."""
        own = self.store.read_stream(stream)
        head: list[Recorded] = []
        if own and isinstance(own[0].event, SessionForked):
            forked = own[0].event
            source = UUID(forked.source_stream)
            head = [
                msgspec.structs.replace(r, stream_id=stream)
                for r in self._prefix(source, forked.source_position)
                if r.position <= at
            ]
        return head + [r for r in own if r.position <= at]

    @invariant()
    def live_projections_equal_a_rebuild(self) -> None:
        self.live.catch_up(page_size=self.rnd.randint(1, 9))
        ProjectionRunner(self.store, self.rebuilt, PROJECTIONS).rebuild(page_size=7)
        whole = self.store.read_all(limit=self.store.count() + 1)
        for projection in PROJECTIONS:
            name, kind = projection.name, projection.state_type
            live = digest(self.views.all(name, kind))
            assert digest(self.rebuilt.all(name, kind)) == live, name
            assert digest(fold(projection, whole)) == live, name


TimeTravelMachine.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_time_travel_machine = TimeTravelMachine.TestCase
