"""Property-based auditing as a state machine over a real SQLite ledger.

Hypothesis drives sessions step by step: turns start, the assistant makes 0-3
parallel calls, results come back (ok, failed, missing, duplicated, retried,
late, out of order, stray), turns complete, fail or crash (left open while the
next turn starts), trims drop history through any version, prompts record their
history digest, knowledge is captured, and sessions are exported in a random
format, re-parsed and imported into another agent (also as a multi-conversation
import that conflicts and must write nothing). After every step:

- the ledger is whole (``verify``) and holds exactly the events the model wrote;
- every session (native or imported) exports pairing-valid in all three formats:
  the export audits clean, and re-parsed it counts no unpaired call or result;
- every projection of the catalogue, caught up live in random page sizes, equals
  a rebuild and the in-memory fold of the whole ledger (digest);
- ``replay_session`` at sampled positions equals the fold of the stream's prefix,
  and its recorded prompt digests all re-derive.

:func:`tests.pipeline.test_session_properties.session_steps` generates whole
sessions for one-shot properties; this machine interleaves the same kinds of
steps across sessions and checks after each one.
"""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from uuid import UUID

import msgspec
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from turnledger.ledger.errors import ConcurrencyError
from turnledger.ledger.events import (
    AssistantMessage,
    Event,
    HistoryTrimmed,
    KnowledgeCaptured,
    ModelCalled,
    PromptAssembled,
    PromptSection,
    SessionOpened,
    ToolCallRecord,
    ToolResultRecorded,
    TurnCompleted,
    TurnFailed,
    TurnStarted,
)
from turnledger.ledger.ids import memory_stream_id, session_stream_id
from turnledger.ledger.store import open_store
from turnledger.ledger.verify import verify
from turnledger.pipeline.export import (
    EXPORT_FORMATS,
    ExportOptions,
    prepare_history,
    render,
)
from turnledger.pipeline.formats import count_pairing, parse_transcript
from turnledger.pipeline.importer import import_transcript
from turnledger.pipeline.sessions import load_history
from turnledger.pipeline.timetravel.replay import replay_session
from turnledger.policies.pairing import audit_pairing
from turnledger.projections.base import digest, fold
from turnledger.projections.catalog import PROJECTIONS
from turnledger.projections.history import SESSION_HISTORY, SESSION_TRANSCRIPT
from turnledger.projections.history.fold import fold_stream
from turnledger.projections.history.read import history_digest, visible_messages
from turnledger.projections.runner import ProjectionRunner
from turnledger.projections.views import SQLiteViewStore

MAX_SESSIONS = 6
"""Native and imported sessions together (each is exported after every step)."""

OUTCOMES = ("ok", "error", "missing", "duplicated", "retried", "late")
"""What happens to one call: answered, failed, never answered, answered twice,
failed then answered again (a retry), or answered during a later turn."""

HISTORY = SESSION_HISTORY.name

texts = st.text(max_size=24)
names = st.text(
    st.characters(
        blacklist_characters=[chr(c) for c in (*range(32), *range(127, 160))],
        blacklist_categories=("Cs",),
    ),
    min_size=1,
    max_size=8,
)  # tool call ids hold no control character (the ledger refuses them)
arguments = st.sampled_from(
    ['{"n": 1}', "{}", '{"path": "/tmp/x", "deep": {"a": [1, 2]}}', "[1, 2]", '"s"']
) | st.text(max_size=12)
calls = st.lists(st.tuples(names, names, arguments), max_size=3)
pick = st.integers(min_value=0, max_value=MAX_SESSIONS * 4)


@dataclass
class Session:
    """What the model knows about one session stream."""

    agent: str
    key: str
    stream: UUID
    version: int = 0
    turns: int = 0
    open_turn: str | None = None
    pending: list[ToolCallRecord] = field(default_factory=list)
    late: list[ToolCallRecord] = field(default_factory=list)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _exported(store, stream: UUID, fmt: str, options: ExportOptions) -> bytes:
    prepared = prepare_history(visible_messages(load_history(store, stream)), options)
    return msgspec.json.encode(render(prepared.messages, fmt))


class LedgerSessions(RuleBasedStateMachine):
    """Sessions written step by step; exports, projections and replay checked."""

    def __init__(self) -> None:
        super().__init__()
        self._tmp = tempfile.TemporaryDirectory()
        root = Path(self._tmp.name)
        self.store = open_store(str(root / "ledger.db"), synchronous="OFF")
        self.live = SQLiteViewStore(str(root / "live.db"))
        self.rebuilt = SQLiteViewStore(str(root / "rebuilt.db"))
        self.live_runner = ProjectionRunner(self.store, self.live, PROJECTIONS)
        self.rebuild_runner = ProjectionRunner(self.store, self.rebuilt, PROJECTIONS)
        self.sessions: list[Session] = []
        self.knowledge: dict[str, int] = {}
        self.events = 0
        self.imports = 0
        self.call_serial = 0
        self.rnd = None

    def teardown(self) -> None:
        self.live.close()
        self.rebuilt.close()
        self.store.close()
        self._tmp.cleanup()

    # -- helpers --------------------------------------------------------------

    def _append(self, session: Session, events: list[Event]) -> None:
        result = self.store.append(
            session.stream, events, expected_version=session.version
        )
        assert result.first_version == session.version + 1
        session.version = result.last_version
        self.events += len(events)

    def _pick(self, index: int, wanted) -> Session:
        eligible = [s for s in self.sessions if wanted(s)]
        return eligible[index % len(eligible)]

    def _open(self, agent: str, key: str) -> None:
        session = Session(agent=agent, key=key, stream=session_stream_id(agent, key))
        self.sessions.append(session)
        self._append(session, [SessionOpened(agent=agent, session_key=key)])

    def _result(
        self, turn: str, call: ToolCallRecord, *, ok: bool, output: str
    ) -> ToolResultRecorded:
        return ToolResultRecorded(
            turn_id=turn,
            call_id=call.id,
            tool=call.name,
            success=ok,
            output=output if ok else "",
            error=None if ok else f"failed: {output}",
            original_chars=len(output),
            kept_chars=len(output),
        )

    # -- rules ----------------------------------------------------------------

    @initialize(rnd=st.randoms(use_true_random=False), agent=st.sampled_from("ab"))
    def first_session(self, rnd, agent):
        self.rnd = rnd
        self._open(agent, "s0")

    @precondition(lambda self: len(self.sessions) < MAX_SESSIONS)
    @rule(agent=st.sampled_from("ab"))
    def open_session(self, agent):
        self._open(agent, f"s{len(self.sessions)}")

    @rule(index=pick, text=texts, origin=st.sampled_from(["interactive", "cron"]))
    def start_turn(self, index, text, origin):
        """A new turn; one still open is a crash: it never ends."""
        session = self._pick(index, lambda s: True)
        session.turns += 1
        turn = f"t{session.turns}"
        session.open_turn = turn
        session.late.extend(session.pending)  # a crashed turn's calls may still answer
        session.pending = []
        self._append(
            session, [TurnStarted(turn_id=turn, origin=origin, user_input=text)]
        )

    @precondition(lambda self: any(s.open_turn for s in self.sessions))
    @rule(index=pick, made=calls, text=texts, tokens=st.integers(0, 5000))
    def assistant_calls(self, index, made, text, tokens):
        """The model answers with 0-3 parallel calls (ids unique, names random)."""
        session = self._pick(index, lambda s: s.open_turn)
        records = []
        for raw_id, name, args in made:
            self.call_serial += 1
            call_id = f"{raw_id}#{self.call_serial}"
            records.append(ToolCallRecord(id=call_id, name=name, arguments=args))
        session.pending.extend(records)
        turn = session.open_turn
        self._append(
            session,
            [
                ModelCalled(
                    turn_id=turn,
                    provider="scripted",
                    model="m",
                    input_tokens=tokens,
                    output_tokens=tokens // 10,
                    cost_usd=tokens / 1e6,
                ),
                AssistantMessage(turn_id=turn, text=text, tool_calls=tuple(records)),
            ],
        )

    @precondition(lambda self: any(s.pending for s in self.sessions))
    @rule(index=pick, data=st.data(), output=texts, stray=st.booleans())
    def record_results(self, index, data, output, stray):
        """Results of the pending calls, in any order, each with its outcome."""
        session = self._pick(index, lambda s: s.pending)
        turn = session.open_turn or f"t{session.turns}"
        pending, session.pending = session.pending, []
        order = data.draw(st.permutations(pending), label="completion order")
        events: list[Event] = []
        for call in order:
            what = data.draw(st.sampled_from(OUTCOMES), label=call.id)
            if what == "missing":
                continue
            if what == "late":
                session.late.append(call)
                continue
            first = self._result(turn, call, ok=what != "error", output=output)
            if what == "retried":
                first = self._result(turn, call, ok=False, output="timeout")
            events.append(first)
            if what == "duplicated":
                events.append(first)
            if what == "retried":
                events.append(self._result(turn, call, ok=True, output=output))
        if stray:
            unknown = ToolCallRecord(id=f"stray#{self.call_serial}", name="ghost")
            events.insert(0, self._result(turn, unknown, ok=True, output="?"))
        if events:
            self._append(session, events)

    @precondition(lambda self: any(s.late for s in self.sessions))
    @rule(index=pick, output=texts)
    def record_late_results(self, index, output):
        """Results of earlier turns' calls arrive now (misplaced in the history)."""
        session = self._pick(index, lambda s: s.late)
        turn = session.open_turn or f"t{session.turns}"
        late, session.late = session.late, []
        self._append(
            session, [self._result(turn, c, ok=True, output=output) for c in late]
        )

    @precondition(lambda self: any(s.open_turn for s in self.sessions))
    @rule(index=pick, how=st.sampled_from(["completed", "failed"]), text=texts)
    def end_turn(self, index, how, text):
        session = self._pick(index, lambda s: s.open_turn)
        turn = session.open_turn
        session.open_turn = None
        session.late.extend(session.pending)
        session.pending = []
        if how == "completed":
            events = [
                AssistantMessage(turn_id=turn, text=text, iteration=1),
                TurnCompleted(turn_id=turn),
            ]
        else:
            events = [TurnFailed(turn_id=turn, kind="provider_error", error=text)]
        self._append(session, events)

    @precondition(lambda self: any(s.open_turn for s in self.sessions))
    @rule(index=pick)
    def crash(self, index):
        """The process dies mid-turn: nothing more is written for that turn."""
        session = self._pick(index, lambda s: s.open_turn)
        session.open_turn = None
        session.pending = []

    @rule(index=pick, data=st.data())
    def trim(self, index, data):
        """A trim through any version already written (a turn boundary or not)."""
        session = self._pick(index, lambda s: True)
        through = data.draw(st.integers(0, session.version), label="through")
        self._append(
            session,
            [
                HistoryTrimmed(
                    turn_id=session.open_turn or f"t{session.turns}",
                    dropped_messages=through,
                    dropped_turns=1,
                    kept_turns=1,
                    tokens_before=100,
                    tokens_after=50,
                    reason="context token budget exceeded",
                    dropped_through_version=through,
                    breadcrumb=data.draw(st.booleans(), label="breadcrumb"),
                )
            ],
        )

    @rule(index=pick)
    def assemble_prompt(self, index):
        """A prompt records the digest of the history it was built from."""
        session = self._pick(index, lambda s: True)
        messages = visible_messages(load_history(self.store, session.stream))
        self._append(
            session,
            [
                PromptAssembled(
                    turn_id=session.open_turn or f"t{session.turns}",
                    sections=(
                        PromptSection(
                            name="history",
                            chars=sum(m.chars for m in messages),
                            messages=len(messages),
                            digest=history_digest(messages),
                        ),
                    ),
                    fingerprint=_sha(f"{session.stream}{session.version}"),
                )
            ],
        )

    @rule(
        agent=st.sampled_from("ab"),
        triple=st.tuples(*[st.sampled_from(["x", "y", "z"])] * 3),
    )
    def capture_knowledge(self, agent, triple):
        stream = memory_stream_id(agent)
        version = self.knowledge.get(agent, 0)
        subject, relation, obj = triple
        event = KnowledgeCaptured(
            agent=agent, subject=subject, relation=relation, object=obj
        )
        result = self.store.append(stream, [event], expected_version=version)
        self.knowledge[agent] = result.last_version
        self.events += 1

    @precondition(lambda self: len(self.sessions) < MAX_SESSIONS)
    @rule(
        index=pick,
        fmt=st.sampled_from(EXPORT_FORMATS),
        budget=st.sampled_from([0, 30, 300]),
        max_chars=st.sampled_from([0, 10, 1000]),
        conflict=st.booleans(),
    )
    def import_export(self, index, fmt, budget, max_chars, conflict):
        """Export a session, parse it back, import it into another agent."""
        source = self._pick(index, lambda s: True)
        data = _exported(
            self.store,
            source.stream,
            fmt,
            ExportOptions(budget_tokens=budget, max_tool_result_chars=max_chars),
        )
        parsed = parse_transcript(data, format=fmt)
        counts = count_pairing(parsed)
        assert (counts.unpaired_calls, counts.unpaired_results) == (0, 0)
        self.imports += 1
        agent, key = f"imported-{fmt}", f"copy{self.imports}"
        if conflict and parsed.conversations:
            # Two conversations, the second onto an existing session: the whole
            # import is refused, and the first (new) session gets nothing either.
            taken = self.sessions[index % len(self.sessions)]
            (conversation,) = parsed.conversations
            fresh = f"fresh{self.imports}"
            both = msgspec.structs.replace(
                parsed,
                conversations=(
                    msgspec.structs.replace(conversation, id=fresh),
                    msgspec.structs.replace(conversation, id=taken.key),
                ),
            )
            before = self.store.max_position()
            with pytest.raises(ConcurrencyError):
                import_transcript(self.store, both, agent=taken.agent)
            assert self.store.max_position() == before
            assert self.store.stream_version(session_stream_id(taken.agent, fresh)) == 0
        report = import_transcript(self.store, parsed, agent=agent, session=key)
        (imported,) = report.sessions
        session = Session(
            agent=agent, key=imported.session, stream=UUID(imported.stream)
        )
        session.version = imported.events
        self.sessions.append(session)
        self.events += imported.events
        copied = load_history(self.store, session.stream)
        assert sum(len(e.message.tool_calls) for e in copied.entries) == (
            counts.tool_calls
        )

    @rule(page=st.integers(1, 9))
    def live_catch_up(self, page):
        self.live_runner.catch_up(page_size=page)

    # -- invariants -----------------------------------------------------------

    @invariant()
    def ledger_is_whole(self):
        report = verify(self.store)
        assert report.ok, report.problems
        assert report.events == self.events == self.store.count()

    @invariant()
    def every_export_is_pairing_valid(self):
        options = ExportOptions(
            budget_tokens=self.rnd.choice([0, 40, 200, 2000]),
            max_tool_result_chars=self.rnd.choice([0, 5, 1000]),
        )
        for session in self.sessions:
            history = visible_messages(load_history(self.store, session.stream))
            prepared = prepare_history(history, options)
            assert audit_pairing(prepared.messages).clean
            for fmt in EXPORT_FORMATS:
                data = msgspec.json.encode(render(prepared.messages, fmt))
                counts = count_pairing(parse_transcript(data, format=fmt))
                assert (counts.unpaired_calls, counts.unpaired_results) == (0, 0), (
                    fmt,
                    session.key,
                )
                assert counts.tool_calls == sum(
                    len(m.tool_calls) for m in prepared.messages
                ), fmt

    @invariant()
    def live_projections_equal_a_rebuild(self):
        self.live_runner.catch_up(page_size=self.rnd.randint(1, 9))
        # Live pages are small (every page boundary is a commit); a rebuild in
        # one page or in a few is enough to compare against.
        self.rebuild_runner.rebuild(page_size=self.rnd.choice([2, 7, 500]))
        whole = self.store.read_all(limit=self.events + 1)
        for projection in PROJECTIONS:
            name, kind = projection.name, projection.state_type
            live = digest(self.live.all(name, kind))
            assert digest(self.rebuilt.all(name, kind)) == live, name
            assert digest(fold(projection, whole)) == live, name

    @invariant()
    def replay_equals_the_fold_of_each_prefix(self):
        last = self.store.max_position()
        # Two sessions and two positions per step: over a run, every session
        # and position kind (before, at and between its events, the end) comes up.
        for session in self.rnd.sample(self.sessions, min(2, len(self.sessions))):
            events = self.store.read_stream(session.stream)
            positions = [e.position for e in events]
            candidates = [0, last, *positions, *(p - 1 for p in positions)]
            for at in self.rnd.sample(candidates, 2):
                prefix = [e for e in events if e.position <= at]
                state = fold(SESSION_HISTORY, prefix).get(
                    str(session.stream), SESSION_HISTORY.initial("")
                )
                # The linear stream fold the query API uses is the same fold.
                for folded in (SESSION_HISTORY, SESSION_TRANSCRIPT):
                    assert fold_stream(folded, folded.initial(""), prefix) == fold(
                        folded, prefix
                    ).get(str(session.stream), folded.initial(""))
                report = replay_session(self.store, session.stream, at=at)
                assert report.projections[HISTORY] == digest(
                    {str(session.stream): state}
                )
                assert report.events == len(prefix)
                assert report.messages == len(visible_messages(state))
                assert report.turns_completed == state.turns_completed
                assert report.ok, report.checks
            whole = replay_session(self.store, session.stream)
            assert whole.ok
            live = self.live.get(
                HISTORY, str(session.stream), SESSION_HISTORY.state_type
            )
            assert whole.projections[HISTORY] == digest({str(session.stream): live})


LedgerSessions.TestCase.settings = settings(
    max_examples=20,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
test_ledger_sessions = LedgerSessions.TestCase
