"""A Hypothesis state machine: engine turns, trims, crashes, forks, rewinds and re-runs.

Sessions on a real ledger (SQLite, and PostgreSQL: it must answer under
CI=true) are driven step by step through the real engine, built by
:func:`~turnledger.pipeline.bootstrap.bootstrap` with a scripted model and two
tools under a small context budget (so the engine trims): turns with 0-2 tool
calls; crashes (a tool dies with the process: the turn is left open, the
runtime is rebuilt as after a restart, and the next turn of the session repairs
it); forks of any session, forks of forks too, at any position; rewinds of any
session to any position under either memory rule; redos (a rewind to just
before a session's last rewind); and offline re-runs of any session. After every
step:

- every session exports pairing-valid in every export format;
- a fork's history as of its own fork event equals its source's history as of
  the fork point;
- right after a rewind (or redo) to a position, the history is exactly what it
  was then (trims recorded since are undone);
- the history and ``replay`` at sampled positions equal an independent fold of
  the prefix (the stream's events, a fork's source prefix read separately and
  put first);
- every projection of the catalogue, caught up live, equals a rebuild and the
  fold of the whole ledger;
- a re-run of a session under the recorded policies is pairing-valid and
  identical, turn by turn.

The suite runs a few short examples; ``TURNLEDGER_MACHINE_EXAMPLES`` and
``TURNLEDGER_MACHINE_STEPS`` make it longer (``benchmarks/stress_timetravel.py``
runs it at 100 x 40 by default).
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any
from uuid import UUID

import msgspec
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from tests.conftest import drop_schema, fresh_schema_url, require_postgres
from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import (
    HistoryTrimmed,
    SessionForked,
    SessionRewound,
    TurnFailed,
)
from turnledger.ledger.store import open_store
from turnledger.pipeline.bootstrap import Runtime, bootstrap
from turnledger.pipeline.config import Config
from turnledger.pipeline.config.sections import RuntimeConfig, StorageConfig
from turnledger.pipeline.export import (
    EXPORT_FORMATS,
    ExportOptions,
    prepare_history,
    render,
)
from turnledger.pipeline.formats import count_pairing, parse_transcript
from turnledger.pipeline.providers.base import ChatRequest, ChatResponse, ToolSpec
from turnledger.pipeline.sessions import SessionRef, list_sessions, load_history
from turnledger.pipeline.timetravel import TimeTravelError, fork_session, rewind_session
from turnledger.pipeline.timetravel.replay import replay_session
from turnledger.pipeline.timetravel.rerun import rerun_session
from turnledger.pipeline.tools.base import ToolContext, ToolOutcome
from turnledger.policies.messages import ToolCall
from turnledger.policies.pairing import audit_pairing
from turnledger.projections.base import digest, fold
from turnledger.projections.catalog import PROJECTIONS
from turnledger.projections.history import (
    SESSION_HISTORY,
    SESSION_TRANSCRIPT,
    SessionHistoryState,
)
from turnledger.projections.history.fold import compacted
from turnledger.projections.history.read import provider_messages
from turnledger.projections.lineage import segments
from turnledger.projections.queries import SessionHistories
from turnledger.projections.runner import ProjectionRunner
from turnledger.projections.views import SQLiteViewStore

SEEN: Counter[str] = Counter()
"""What the steps did (a stress script prints it; tests may check coverage)."""

EXAMPLES = int(os.environ.get("TURNLEDGER_MACHINE_EXAMPLES", "6"))
STEPS = int(os.environ.get("TURNLEDGER_MACHINE_STEPS", "14"))
MAX_SESSIONS = 6
AGENT = "ops"


class Crash(BaseException):
    """The process dies inside a tool (no ``except Exception`` catches it)."""


class CrashTool:
    """A tool during which the process dies."""

    spec = ToolSpec(name="crash", description="the process dies here")

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutcome:
        del arguments, context
        raise Crash


class EchoTool:
    """A tool answering ``n`` characters (bounded by the engine when long)."""

    spec = ToolSpec(name="echo", description="say n characters")

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutcome:
        del context
        return ToolOutcome(output="e" * int(arguments.get("n", 1)))


class Script:
    """A model answering from a queue the machine fills before each turn."""

    name = "scripted"
    model = "scripted-1"

    def __init__(self) -> None:
        self.queue: list[ChatResponse] = []
        self.pairing: list[bool] = []

    async def complete(self, request: ChatRequest) -> ChatResponse:
        self.pairing.append(audit_pairing(request.messages).clean)
        return self.queue.pop(0) if self.queue else ChatResponse(text="done")

    async def aclose(self) -> None:
        """Nothing to release."""


def _exact(events: list[Recorded]) -> SessionHistoryState:
    """The history fold of a prefix, independently of the readers' shortcuts."""
    state = fold(SESSION_HISTORY, events).get(
        str(events[0].stream_id) if events else "", SESSION_HISTORY.initial("")
    )
    if state.missing_through:  # a rewind undid a trim the compacting fold dropped
        whole = fold(SESSION_TRANSCRIPT, events)[str(events[0].stream_id)]
        state = compacted(whole)
    return state


class TimeTravelMachine(RuleBasedStateMachine):
    """Engine turns and time travel, checked after every step (SQLite)."""

    backend = "sqlite"

    def __init__(self) -> None:
        super().__init__()
        self.folder = Path(tempfile.mkdtemp())
        if self.backend == "sqlite":
            self.url = str(self.folder / "ledger.db")
        else:
            self.url = fresh_schema_url(require_postgres())
        self.store = open_store(self.url)
        memory = StorageConfig(path=str(self.folder / "memory.db"))
        self.config = Config(
            data_dir=str(self.folder / "data"),
            runtime=RuntimeConfig(context_budget_tokens=140, max_tool_result_chars=60),
            storage={"sqlite": {"default": memory}},
        )
        self.views = SQLiteViewStore(str(self.folder / "live.db"))
        self.rebuilt = SQLiteViewStore(str(self.folder / "rebuilt.db"))
        self.live = ProjectionRunner(self.store, self.views, PROJECTIONS)
        self.loop = asyncio.new_event_loop()
        self.script = Script()
        self.runtime = self._start()
        self.keys: list[str] = []
        self.turns = 0
        self.rnd = random.Random(0)

    def _start(self) -> Runtime:
        runtime = bootstrap(
            self.config,
            provider=self.script,
            store=self.store,
            ledger_url=self.url,
            views=str(self.folder / "engine-views.db"),
            tools={"echo": EchoTool(), "crash": CrashTool()},
        )
        return self.loop.run_until_complete(runtime.__aenter__())

    def _stop(self) -> None:
        self.loop.run_until_complete(self.runtime.__aexit__(None, None, None))

    def teardown(self) -> None:
        self._stop()
        self.loop.close()
        self.store.close()
        self.views.close()
        self.rebuilt.close()
        if self.backend != "sqlite":
            drop_schema(self.url)
        shutil.rmtree(self.folder, ignore_errors=True)

    def _sessions(self) -> list[SessionRef]:
        return [s for s in list_sessions(self.store) if s.agent == AGENT]

    def _pick(self, pick: int) -> SessionRef | None:
        sessions = self._sessions()
        return sessions[pick % len(sessions)] if sessions else None

    # -- steps ----------------------------------------------------------------

    @initialize(size=st.integers(1, 200))
    def first_turns(self, size: int) -> None:
        """Two turns in a first session, so every step has something to act on."""
        self._turn(0, new=True, calls=1, size=size, crash=False)
        self._turn(0, new=False, calls=0, size=size, crash=False)

    @rule(
        pick=st.integers(0, 99),
        new=st.booleans(),
        calls=st.integers(0, 2),
        size=st.integers(1, 200),
    )
    def turn(self, pick: int, new: bool, calls: int, size: int) -> None:
        """A turn through the engine: 0-2 tool calls, then an answer."""
        self._turn(pick, new=new, calls=calls, size=size, crash=False)

    @rule(pick=st.integers(0, 99), calls=st.integers(0, 2), size=st.integers(1, 200))
    def crash(self, pick: int, calls: int, size: int) -> None:
        """A turn during which the process dies in a tool (then a restart)."""
        self._turn(pick, new=False, calls=calls, size=size, crash=True)

    @rule(pick=st.integers(0, 99), size=st.integers(1, 200))
    def another_turn(self, pick: int, size: int) -> None:
        """A plain turn (turns are most of what sessions do)."""
        self._turn(pick, new=False, calls=0, size=size, crash=False)

    def _turn(
        self, pick: int, *, new: bool, calls: int, size: int, crash: bool
    ) -> None:
        """A turn through the engine; with ``crash`` the process dies in a tool."""
        ref = self._pick(pick)
        if ref is None or (new and len(self._sessions()) < MAX_SESSIONS):
            key = f"s{len(self._sessions())}"
        else:
            key = ref.key
        self.turns += 1
        tid = f"t{self.turns}"
        wanted = [
            ToolCall(id=f"{tid}c{i}", name="echo", arguments=f'{{"n": {size + i}}}')
            for i in range(calls)
        ]
        if crash:
            wanted.append(ToolCall(id=f"{tid}x", name="crash", arguments="{}"))
        self.script.queue = [ChatResponse(tool_calls=tuple(wanted))] if wanted else []
        self.script.queue.append(ChatResponse(text=f"answer {tid} " + "w " * size))
        text = f"question {tid} " + "q " * (size // 2)
        try:
            outcome = self.loop.run_until_complete(
                self.runtime.engine.run_turn(AGENT, key, text)
            )
        except Crash:
            # The process died: a new runtime, as after a restart.
            SEEN["crash"] += 1
            self.loop.run_until_complete(asyncio.sleep(0))
            self._stop()
            self.runtime = self._start()
            state = SessionHistories(self.store).get(self._ref(key).stream_id)
            assert state.open_turn is not None
            return
        assert outcome.completed, outcome
        assert all(self.script.pairing)
        SEEN["turn"] += 1
        tail = self.store.read_stream(self._ref(key).stream_id)[-8:]
        SEEN["turn that trimmed"] += any(
            isinstance(r.event, HistoryTrimmed) for r in tail
        )

    def _ref(self, key: str) -> SessionRef:
        return next(s for s in self._sessions() if s.key == key)

    @rule(pick=st.integers(0, 99), share=st.floats(0, 1))
    def fork(self, pick: int, share: float) -> None:
        source = self._pick(pick)
        if source is None or len(self._sessions()) >= MAX_SESSIONS:
            return
        at = max(1, int(share * self.store.max_position()))
        key = f"f{len(self._sessions())}"
        try:
            fork_session(self.store, source, str(at), new_key=key)
        except TimeTravelError:
            return  # a point before the source's first event
        first = self.store.read_stream(source.stream_id, limit=1)[0]
        SEEN[
            "fork of a fork" if isinstance(first.event, SessionForked) else "fork"
        ] += 1

    @rule(
        pick=st.integers(0, 99),
        share=st.floats(0, 1),
        rule_=st.sampled_from(["keep", "supersede"]),
    )
    def rewind(self, pick: int, share: float, rule_: str) -> None:
        ref = self._pick(pick)
        if ref is None:
            return
        self._rewind(ref, int(share * self.store.max_position()), rule_)

    @rule(pick=st.integers(0, 99))
    def redo(self, pick: int) -> None:
        """Rewind to just before the session's last rewind: what it hid is back."""
        ref = self._pick(pick)
        if ref is None:
            return
        rewinds = [
            r
            for r in self.store.read_stream(ref.stream_id)
            if isinstance(r.event, SessionRewound)
        ]
        if rewinds:
            SEEN["redo"] += 1
            self._rewind(ref, rewinds[-1].position - 1, "keep")

    def _rewind(self, ref: SessionRef, at: int, memory_rule: str) -> None:
        histories = SessionHistories(self.store)
        then = histories.get(ref.stream_id, at=at)
        before = histories.get(ref.stream_id)
        try:
            rewind_session(
                self.store,
                ref,
                str(at),
                memory_rule="supersede" if memory_rule == "supersede" else "keep",
            )
        except TimeTravelError:
            return  # a turn is open, or nothing would change
        SEEN["rewind undoing a trim" if then.trims < before.trims else "rewind"] += 1
        now = SessionHistories(self.store).get(ref.stream_id)
        assert provider_messages(now) == provider_messages(then)
        assert (now.trims, now.trimmed_through) == (then.trims, then.trimmed_through)

    @rule(pick=st.integers(0, 99))
    def rerun(self, pick: int) -> None:
        """A re-run under the recorded policies: pairing-valid and identical."""
        ref = self._pick(pick)
        if ref is None:
            return
        report = rerun_session(self.store, ref, self.config)
        assert all(t.pairing_valid for t in report.diff), report
        assert report.identical, [(t.turn, t.differences) for t in report.diff]
        events = [
            r.event for s in segments(self.store, ref.stream_id) for r in s.events
        ]
        SEEN["rerun"] += 1
        SEEN["rerun of a fork"] += isinstance(
            events and events[0], SessionForked
        ) or any(isinstance(e, SessionForked) for e in events)
        SEEN["rerun over a rewind"] += any(
            isinstance(e, SessionRewound) for e in events
        )
        SEEN["rerun over a crash"] += any(
            isinstance(e, TurnFailed) and e.kind == "interrupted" for e in events
        )

    # -- invariants -----------------------------------------------------------

    @invariant()
    def every_export_is_pairing_valid(self) -> None:
        options = ExportOptions(
            budget_tokens=self.rnd.choice([0, 40, 2000]),
            max_tool_result_chars=self.rnd.choice([0, 5, 1000]),
        )
        for ref in self._sessions():
            history = provider_messages(load_history(self.store, ref.stream_id))
            prepared = prepare_history(history, options)
            assert audit_pairing(prepared.messages).clean
            for fmt in EXPORT_FORMATS:
                data = msgspec.json.encode(render(prepared.messages, fmt))
                counts = count_pairing(parse_transcript(data, format=fmt))
                assert (counts.unpaired_calls, counts.unpaired_results) == (0, 0), fmt

    @invariant()
    def a_fork_starts_as_its_source_prefix(self) -> None:
        histories = SessionHistories(self.store)
        for ref in self._sessions():
            first = self.store.read_stream(ref.stream_id, limit=1)[0]
            if not isinstance(first.event, SessionForked):
                continue
            source = UUID(first.event.source_stream)
            start = histories.get(ref.stream_id, at=first.position)
            prefix = histories.get(source, at=first.event.source_position)
            assert provider_messages(start) == provider_messages(prefix)

    @invariant()
    def history_at_a_position_is_the_fold_of_its_prefix(self) -> None:
        last = self.store.max_position()
        sessions = self._sessions()
        for ref in self.rnd.sample(sessions, min(2, len(sessions))):
            stream = ref.stream_id
            for at in (self.rnd.randint(0, last), last):
                expected = _exact(self._prefix(stream, at))
                assert SessionHistories(self.store).get(stream, at=at) == expected
                replayed = replay_session(self.store, stream, at=at)
                assert replayed.projections[SESSION_HISTORY.name] == digest(
                    {str(stream): expected}
                )
                assert all(c.ok for c in replayed.checks)
            now = SessionHistories(self.store).get(stream)
            assert provider_messages(now) == provider_messages(
                _exact(self._prefix(stream, last))
            )

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


class PostgresTimeTravelMachine(TimeTravelMachine):
    """The same machine on the real PostgreSQL server (a schema per example)."""

    backend = "postgres"


_SETTINGS = settings(
    max_examples=EXAMPLES,
    stateful_step_count=STEPS,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TimeTravelMachine.TestCase.settings = _SETTINGS
PostgresTimeTravelMachine.TestCase.settings = _SETTINGS
test_time_travel_machine_sqlite = TimeTravelMachine.TestCase
test_time_travel_machine_postgres = PostgresTimeTravelMachine.TestCase
