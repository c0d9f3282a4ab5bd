"""GenAI spans and log events into ledger appends: one atomic append per batch.

A session is the span's ``gen_ai.conversation.id`` (or that of another span
of the same trace in the batch), else its trace id; its agent is the
resource's ``service.name``. Each session's state (head version, the spans
already recorded, its messages so far, the open turn, the system prompt) is
folded from its stream when first seen and is current before every batch, so
spans of one trace arriving in several batches continue the same session, and
a span delivered twice (an exporter's retry) is recorded once. A batch reads a
known session from its stream again only when another writer may have
appended since the recorder's own last write (the ledger's last position says
so); a stale state could not write anyway, its append would be refused.

What a span records:

- a model call with content: the system prompt when it changed
  (``system_prompt.set``), the input messages not yet in the session (a user
  message opens a turn, closing the one before), ``model.called`` with usage
  and cost (priced by ``[pricing]``), the assistant's reply;
- a model call without content: ``model.called`` alone;
- a tool run: ``tool_result.recorded`` when its result was captured;
- the batch's recorded spans of a session: one ``item.recorded`` of framework
  ``otlp``, kind ``spans``, listing each span's trace id, span id and operation
  and the ids of those without content; that is how a later batch knows a span
  already recorded, and how ``audit`` tells a session whose conversation is
  not there.

A model call's content may come apart from its span, as log records emitted in
its context (:data:`~.genai.CONTENT_EVENTS`: the current form's
``gen_ai.client.inference.operation.details``, the previous form's message
events), by another exporter, before or after the span. A batch of log records
(:meth:`Recorder.record_logs`) records a session's GenAI content events in one
``item.recorded`` of kind ``log_events`` (each event whole, with a print that
knows it when sent again), in the session of their ``gen_ai.conversation.id``,
else of their trace. The events of a span not recorded yet are parked there:
the span reads them when it comes, as it reads its own events. Those of a span
recorded without content (or with what parked ones said) are recorded at once,
the messages the session does not hold yet and the reply, and the item lists
the span as ``applied`` (``audit`` then no longer counts it as without
content). Those of a span recorded with its own content are only kept. Events
that say nothing (content capture off) are counted, not recorded. A span whose
session is a ``gen_ai.conversation.id`` its log records do not carry is not
joined to them: they stay in the session of its trace.

Everything of one batch goes in one :meth:`~ledger.store.EventStore.append_atomic`:
all of it or nothing, durable when it returns.
"""

from __future__ import annotations

import hashlib
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final, TypeAlias, TypeVar
from uuid import UUID

import msgspec

from turnledger.ledger.errors import ConcurrencyError
from turnledger.ledger.events import (
    AssistantMessage,
    Event,
    ItemRecorded,
    ModelCalled,
    SessionOpened,
    SystemPromptSet,
    ToolCallRecord,
    ToolResultRecorded,
    TurnCompleted,
    TurnStarted,
)
from turnledger.ledger.ids import CONTROL_CHARACTERS, session_stream_id
from turnledger.ledger.store import Append, EventStore
from turnledger.pipeline.collect.decode import LogRecord, Span, SpanEvent
from turnledger.pipeline.collect.genai import (
    CONTENT_EVENTS,
    AssistantSaid,
    InputCache,
    ModelCall,
    Said,
    SpanReading,
    ToolCallSaid,
    ToolRun,
    ToolSaid,
    UserSaid,
    carries_content,
    read_call,
    read_span,
)
from turnledger.pipeline.collected import (
    FRAMEWORK,
    LISTED,
    LOGS_KIND,
    LOGS_LISTED,
    SPANS_KIND,
    LoggedEvent,
    LogsListed,
    SpansListed,
)
from turnledger.policies.pricing import (
    ModelPrice,
    PricingError,
    TokenUsage,
    price_usage,
)
from turnledger.policies.scrubbing import summarize

CHANNEL: Final = "otlp"
UNKNOWN: Final = "unknown"
_ATTEMPTS: Final = 3

# Why a log record was not recorded (Recorder.record_logs's outcomes).
NOT_CONTENT_EVENT: Final = "not a GenAI content event"
OUTSIDE_SPANS: Final = "a GenAI content event outside any span"
ALREADY_LOGGED: Final = "already in the ledger"
WITHOUT_CONTENT: Final = "without content (capture off)"
_UNRECORDABLE: Final = frozenset({NOT_CONTENT_EVENT, OUTSIDE_SPANS})

MAX_SESSIONS: Final = 4096
"""Sessions whose state the recorder keeps between batches (the least recently
written beyond it are folded again from their stream when they come back)."""

_Print: TypeAlias = tuple[str, str, tuple[str, ...]]
_Done = TypeVar("_Done")


class SessionWritten(msgspec.Struct, frozen=True, kw_only=True):
    """One session a batch wrote to: its agent, key, stream and events written."""

    agent: str
    session: str
    stream: str
    events: int


class BatchReport(msgspec.Struct, frozen=True, kw_only=True):
    """What one batch of spans recorded and what it only counted.

    Attributes:
        spans: Spans received.
        mapped: Model call and tool spans recorded.
        duplicates: Spans already in the ledger (sent again), not written twice.
        without_content: Recorded spans whose messages were not captured.
        extra_choices: Output choices after a call's first (not recorded).
        known: GenAI spans of other operations, by operation (counted only).
        unknown: Spans of no known shape, by what they lacked (counted only).
        sessions: The sessions written to.
        events: Events written.
    """

    spans: int
    mapped: int
    duplicates: int = 0
    without_content: int = 0
    extra_choices: int = 0
    known: dict[str, int] = msgspec.field(default_factory=dict)
    unknown: dict[str, int] = msgspec.field(default_factory=dict)
    sessions: tuple[SessionWritten, ...] = ()
    events: int = 0


class LogsReport(msgspec.Struct, frozen=True, kw_only=True):
    """What one batch of log records recorded and what it only counted.

    Attributes:
        records: Log records received.
        parked: GenAI message events recorded before their span (read by it
            when it comes).
        applied: Events whose span was recorded without content: what they
            say is recorded now.
        span_had_content: Events of a span recorded with its content (kept in
            the ledger, not recorded twice).
        duplicates: Events already in the ledger (sent again).
        without_content: GenAI message events that say nothing (content
            capture off): counted, not recorded.
        unknown: Records not recorded, by why (counted only).
        sessions: The sessions written to.
        events: Ledger events written.
    """

    records: int
    parked: int = 0
    applied: int = 0
    span_had_content: int = 0
    duplicates: int = 0
    without_content: int = 0
    unknown: dict[str, int] = msgspec.field(default_factory=dict)
    sessions: tuple[SessionWritten, ...] = ()
    events: int = 0


class _State:
    """A session's stream, folded as far as the recorder needs it."""

    def __init__(self, agent: str, key: str) -> None:
        self.agent = agent
        self.key = key
        self.stream = session_stream_id(agent, key)
        self.version = 0
        self.epoch = -1  # the recorder's epoch when last read from its stream
        self.span_ids: set[str] = set()
        self.seen: list[_Print] = []
        self.results: set[str] = set()
        self.names: dict[str, str] = {}
        self.open_turn: str | None = None
        self.system: str | None = None
        # The last model call's input messages read, their prints, and its tool
        # results without an id (see _Builder._inputs).
        self.said: tuple[Said, ...] = ()
        self.said_prints: list[_Print] = []
        self.said_without_id: list[ToolSaid] = []
        # GenAI log events: those of spans not recorded yet, by span id, and
        # the prints of every one recorded (so one sent again is known).
        self.parked: dict[str, tuple[SpanEvent, ...]] = {}
        self.log_prints: set[str] = set()
        # Spans whose content comes by log events: recorded without content,
        # or with what log events parked before them said.
        self.by_logs: set[str] = set()

    def copy(self) -> _State:
        other = _State.__new__(_State)
        other.__dict__.update(self.__dict__)
        other.span_ids = set(self.span_ids)
        other.seen = list(self.seen)
        other.results = set(self.results)
        other.names = dict(self.names)
        other.parked = dict(self.parked)
        other.log_prints = set(self.log_prints)
        other.by_logs = set(self.by_logs)
        return other

    def fold(self, events: Iterable[Event]) -> None:
        for event in events:
            self.apply(event)

    def apply(self, event: Event) -> None:
        if type(event) is ModelCalled:
            return  # the most frequent event, and nothing to fold
        match event:
            case TurnStarted(turn_id=turn, user_input=text):
                self.seen.append(("u", text, ()))
                self.open_turn = turn
            case TurnCompleted():
                self.open_turn = None
            case AssistantMessage(text=text, tool_calls=calls):
                self.seen.append(("a", text, tuple(c.id for c in calls)))
                self.names.update((c.id, c.name) for c in calls)
            case ToolResultRecorded(call_id=call_id):
                self.results.add(call_id)
            case SystemPromptSet(text=text):
                self.system = text
            case ItemRecorded(framework="otlp", kind="spans", fields=fields):
                listed = LISTED.decode(fields)
                for entry in listed.spans:
                    self.span_ids.add(entry[1])
                    self.parked.pop(entry[1], None)  # its span read them
                self.by_logs.update(listed.without_content)
                self.by_logs.update(listed.from_logs)
            case ItemRecorded(framework="otlp", kind="log_events", fields=fields):
                self.fold_logs(LOGS_LISTED.decode(fields).events)
            case _:
                return

    def fold_logs(self, logged: Sequence[LoggedEvent]) -> None:
        """Note log events recorded: those of spans not recorded yet are parked."""
        for entry in logged:
            self.log_prints.add(entry.print)
            if entry.span_id not in self.span_ids:
                event = _span_event(entry)
                self.parked[entry.span_id] = (
                    *self.parked.get(entry.span_id, ()),
                    event,
                )


class Recorder:
    """Records batches of OTLP spans into the ledger (one batch at a time).

    Args:
        store: The ledger.
        pricing: The rate sheet model calls are priced with (``[pricing]``).
        agent: The agent of every session (default: each span's ``service.name``).
    """

    def __init__(
        self,
        store: EventStore,
        *,
        pricing: Mapping[str, ModelPrice] | None = None,
        agent: str | None = None,
    ) -> None:
        self.store = store
        self.pricing = dict(pricing or {})
        self.agent = agent
        self._inputs = InputCache()
        self._states: dict[UUID, _State] = {}
        self._lock = threading.Lock()
        # The ledger's last position when every cached state was last known
        # current (-1: unknown), and the epoch the cached states are read in:
        # one that moves whenever another writer may have moved a session.
        self._known = -1
        self._epoch = 0

    def record(
        self, spans: Sequence[Span], *, duplicates: list[str] | None = None
    ) -> BatchReport:
        """Record a batch atomically; returns once it is durable.

        ``duplicates``, when given, receives the id of each span found
        already recorded, once per span (:attr:`BatchReport.duplicates` of them).

        Raises:
            InvalidEventError: A span cannot be recorded; nothing was written.
            ConcurrencyError: Another writer kept moving the same sessions.
            StoreUnavailableError: The database failed; nothing was written.
        """
        report, found = self._attempts(lambda: self._record(spans))
        if duplicates is not None:
            duplicates.extend(found)
        return report

    def _record(self, spans: Sequence[Span]) -> tuple[BatchReport, list[str]]:
        """Record a batch; return its report and its duplicates' ids."""
        before = self._moved()
        readings = [(span, read_span(span, self._inputs)) for span in spans]
        known: Counter[str] = Counter()
        unknown: Counter[str] = Counter()
        conversations = {
            span.trace_id: r.conversation for span, r in readings if r.conversation
        }
        grouped: dict[tuple[str, str], list[tuple[Span, SpanReading]]] = {}
        cleaned: dict[str, str] = {}  # a batch's spans share a few names
        for span, reading in readings:
            if reading.kind == "known":
                known[reading.label] += 1
            elif reading.kind == "unknown":
                unknown[reading.label] += 1
            else:
                key = _cleaned(
                    cleaned,
                    reading.conversation
                    or conversations.get(span.trace_id)
                    or span.trace_id,
                )
                agent = self.agent or _cleaned(cleaned, span.service)
                grouped.setdefault((agent, key), []).append((span, reading))
        builders: list[_Builder] = []
        for (agent, key), members in grouped.items():
            builder = _Builder(self._state(agent, key).copy(), self.pricing)
            members.sort(key=lambda m: (m[0].start_ns, m[0].end_ns, m[0].span_id))
            for span, reading in members:
                builder.add(span, reading)
            builder.finish()
            builders.append(builder)
        written = self._write(before, builders)
        totals = Counter[str]()
        found: list[str] = []
        for builder in builders:
            totals.update(builder.counts)
            found.extend(builder.duplicates)
        return BatchReport(
            spans=len(spans),
            mapped=totals["mapped"],
            duplicates=totals["duplicates"],
            without_content=totals["without_content"],
            extra_choices=totals["extra_choices"],
            known=dict(known),
            unknown=dict(unknown),
            sessions=written,
            events=sum(w.events for w in written),
        ), found

    def record_logs(
        self, records: Sequence[LogRecord], *, outcomes: list[str] | None = None
    ) -> LogsReport:
        """Record a batch of log records atomically; returns once it is durable.

        ``outcomes``, when given, receives one entry per record, in order:
        ``""`` for a record recorded, else why not (:data:`NOT_CONTENT_EVENT`,
        :data:`OUTSIDE_SPANS`, :data:`ALREADY_LOGGED`, :data:`WITHOUT_CONTENT`).

        GenAI content events (:data:`~.genai.CONTENT_EVENTS`) emitted in a
        span's context are recorded in the session of their trace (or their
        ``gen_ai.conversation.id``); see the module's doc for what they become.

        Raises:
            InvalidEventError: A record cannot be recorded; nothing was written.
            ConcurrencyError: Another writer kept moving the same sessions.
            StoreUnavailableError: The database failed; nothing was written.
        """
        report, found = self._attempts(lambda: self._record_logs(records))
        if outcomes is not None:
            outcomes.extend(found)
        return report

    def _attempts(self, record: Callable[[], _Done]) -> _Done:
        """Record a batch, again while another writer moves its sessions."""
        with self._lock:
            for attempt in range(_ATTEMPTS):
                try:
                    return record()
                except ConcurrencyError:
                    self._states.clear()  # another writer: read them again
                    self._known = -1
                    if attempt == _ATTEMPTS - 1:
                        raise
            raise AssertionError  # pragma: no cover - the loop returns or raises

    def _record_logs(
        self, records: Sequence[LogRecord]
    ) -> tuple[LogsReport, list[str]]:
        """Record a batch of log records; return its report and each one's outcome."""
        before = self._moved()
        outcome = [""] * len(records)
        builders: list[_Builder] = []
        counts = Counter[str]()
        for (agent, key), spans in self._logs_by_session(records, outcome).items():
            builder = _Builder(self._state(agent, key).copy(), self.pricing)
            for span_id, (trace_id, logged) in spans.items():
                fresh = _fresh(logged, builder.state.log_prints, outcome)
                counts["duplicates"] += len(logged) - len(fresh)
                if not any(carries_content(_span_event(e)) for _, e in fresh):
                    for index, _entry in fresh:
                        outcome[index] = WITHOUT_CONTENT
                    counts["without_content"] += len(fresh)
                    continue
                builder.logs(trace_id, span_id, [e for _, e in fresh])
            builder.finish()
            if builder.logged:
                builders.append(builder)
        written = self._write(before, builders)
        for builder in builders:
            counts.update(builder.counts)
        return LogsReport(
            records=len(records),
            parked=counts["parked"],
            applied=counts["applied"],
            span_had_content=counts["span_had_content"],
            duplicates=counts["duplicates"],
            without_content=counts["without_content"],
            unknown=dict(Counter(o for o in outcome if o in _UNRECORDABLE)),
            sessions=written,
            events=sum(w.events for w in written),
        ), outcome

    def _logs_by_session(
        self, records: Sequence[LogRecord], outcome: list[str]
    ) -> dict[tuple[str, str], dict[str, tuple[str, list[tuple[int, LoggedEvent]]]]]:
        """The content events by session and span (with their places in the batch).

        The others' ``outcome`` says why they are not recorded.
        """
        cleaned: dict[str, str] = {}
        grouped: dict[
            tuple[str, str], dict[str, tuple[str, list[tuple[int, LoggedEvent]]]]
        ] = {}
        for index, record in enumerate(records):
            if record.event_name not in CONTENT_EVENTS:
                outcome[index] = NOT_CONTENT_EVENT
                continue
            if not record.trace_id or not record.span_id:
                outcome[index] = OUTSIDE_SPANS
                continue
            conversation = record.attributes.get("gen_ai.conversation.id")
            key = _cleaned(
                cleaned,
                conversation
                if isinstance(conversation, str) and conversation
                else record.trace_id,
            )
            agent = self.agent or _cleaned(cleaned, record.service)
            spans = grouped.setdefault((agent, key), {})
            spans.setdefault(record.span_id, (record.trace_id, []))[1].append(
                (index, _logged(record))
            )
        return grouped

    def _write(
        self, before: int, builders: Sequence[_Builder]
    ) -> tuple[SessionWritten, ...]:
        """Append the builders' events in one transaction; keep their states.

        ``before``: the ledger's last position when the batch began
        (:meth:`_moved`).
        """
        appends: list[Append] = []
        states: list[_State] = []
        for builder in builders:
            if not builder.events:
                continue
            state = builder.state
            ids = [s[1] for s in builder.listed] + [e.print for e in builder.logged]
            digest = hashlib.sha256(",".join(sorted(ids)).encode()).hexdigest()
            appends.append(
                Append(
                    state.stream,
                    builder.events,
                    state.version - len(builder.events),
                    f"otlp:{state.stream.hex}:{digest}",
                )
            )
            states.append(state)
        if appends:
            written = self.store.append_atomic(appends)
            positions = [p for result in written for p in result.positions]
            # Only our rows since ``before``: the cached states are still current.
            alone = min(positions) == before + 1 and max(positions) == before + len(
                positions
            )
            self._known = max(positions) if alone else -1
        for state in states:
            self._states.pop(state.stream, None)
            self._states[state.stream] = state  # the most recently used last
        while len(self._states) > MAX_SESSIONS:
            del self._states[next(iter(self._states))]  # read again when it returns
        return tuple(
            SessionWritten(
                agent=s.agent,
                session=s.key,
                stream=str(s.stream),
                events=len(a.events),
            )
            for s, a in zip(states, appends, strict=True)
        )

    def _moved(self) -> int:
        """The ledger's last position; a new epoch if others may have written.

        When the ledger's last position is the one our own last write left, no
        other writer has appended since, and every cached state is current: a
        batch then reads no session from its stream. Otherwise the cached
        states are read again, each when next used. (A stale state could not
        write anyway: its append would find the stream moved, and the batch is
        mapped again; this spares that round and the reads.)
        """
        last = self.store.max_position()
        if last != self._known:
            self._epoch += 1
            self._known = last
        return last

    def _state(self, agent: str, key: str) -> _State:
        stream = session_stream_id(agent, key)
        state = self._states.get(stream)
        if state is None:
            state = self._states[stream] = _State(agent, key)
        elif state.epoch == self._epoch:
            return state  # nobody else has written since it was read
        recorded = self.store.read_stream(stream, after=state.version)
        if recorded:
            state.fold(r.event for r in recorded)
            state.version = recorded[-1].version
        state.epoch = self._epoch
        return state


class _Builder:
    """The events of one session's spans in one batch (advances its state)."""

    def __init__(self, state: _State, pricing: Mapping[str, ModelPrice]) -> None:
        self.state = state
        self.pricing = pricing
        self.events: list[Event] = []
        self.listed: list[tuple[str, str, str]] = []
        self.without: list[str] = []
        self.logged: list[LoggedEvent] = []
        self.applied: list[str] = []
        self.from_logs: list[str] = []
        self.duplicates: list[str] = []
        self.last_turn = ""
        self.counts: Counter[str] = Counter()
        if state.version == 0:
            self._emit(
                SessionOpened(agent=state.agent, session_key=state.key, channel=CHANNEL)
            )

    def _emit(self, event: Event) -> None:
        self.events.append(event)
        self.state.apply(event)
        self.state.version += 1

    def add(self, span: Span, reading: SpanReading) -> None:
        if span.span_id in self.state.span_ids:
            self.counts["duplicates"] += 1
            self.duplicates.append(span.span_id)
            return
        turn = self.state.open_turn or f"otlp-{span.span_id}"
        content = True
        parked = self.state.parked.pop(span.span_id, ())
        if parked and reading.call is not None and not reading.call.content:
            # Its messages came first, as log events in its context.
            with_logs = msgspec.structs.replace(span, events=(*span.events, *parked))
            reading = msgspec.structs.replace(reading, call=read_call(with_logs))
            self.from_logs.append(span.span_id)
            self.state.by_logs.add(span.span_id)
        if reading.call is not None:
            content = reading.call.content
            turn = self._call(span, reading.call)
        elif reading.tool is not None:
            content = reading.tool.result is not None
            self._tool(span, reading.tool, turn)
        self.listed.append((span.trace_id, span.span_id, reading.label[:200]))
        self.state.span_ids.add(span.span_id)
        self.last_turn = turn
        self.counts["mapped"] += 1
        if not content:
            self.without.append(span.span_id)
            self.state.by_logs.add(span.span_id)
            self.counts["without_content"] += 1

    def logs(self, trace_id: str, span_id: str, fresh: Sequence[LoggedEvent]) -> None:
        """Record a span's GenAI log events not recorded yet.

        A span not recorded yet: they are parked, for the span to read when it
        comes. A span whose content comes by log events (recorded without
        content, or with what parked ones said): what they say is recorded now.
        A span recorded with its own content: they are only kept (in the item).
        """
        state = self.state
        self.logged.extend(fresh)
        state.log_prints.update(entry.print for entry in fresh)
        events = tuple(_span_event(entry) for entry in fresh)
        if span_id not in state.span_ids:
            state.parked[span_id] = (*state.parked.get(span_id, ()), *events)
            self.counts["parked"] += len(fresh)
            return
        if span_id not in state.by_logs:
            self.counts["span_had_content"] += len(fresh)
            return
        span = Span(trace_id=trace_id, span_id=span_id, events=events)
        self.last_turn = self._said(span, read_call(span))
        if span_id not in self.applied:
            self.applied.append(span_id)
        self.counts["applied"] += len(fresh)

    def finish(self) -> None:
        """List the spans or log events recorded (one ``item.recorded``)."""
        if self.logged:
            logs = LogsListed(events=self.logged, applied=self.applied)
            self._item(LOGS_KIND, msgspec.json.encode(logs).decode())
        if not self.listed:
            return
        listed = SpansListed(
            spans=self.listed, without_content=self.without, from_logs=self.from_logs
        )
        self._item(SPANS_KIND, msgspec.json.encode(listed).decode())

    def _item(self, kind: str, fields: str) -> None:
        # Not folded into the state again: add() and logs() put it there already.
        self.events.append(
            ItemRecorded(
                turn_id=self.last_turn or self._turn_of(self.logged[0].span_id),
                framework=FRAMEWORK,
                kind=kind,
                fields=fields,
                typed=True,
            )
        )
        self.state.version += 1

    def _turn(self, span: Span) -> str:
        return self._turn_of(span.span_id)

    def _turn_of(self, span_id: str) -> str:
        return self.state.open_turn or f"otlp-{span_id}"

    def _said(self, span: Span, call: ModelCall) -> str:
        """Record what a call said whose ``model.called`` is recorded already."""
        if call.system is not None and call.system != self.state.system:
            self._emit(SystemPromptSet.of(call.system, turn_id=self.state.open_turn))
        if call.inputs:
            self._inputs(span, call.inputs)
        turn = self._turn(span)
        for said in call.outputs:
            self._assistant(said, turn)
        self.counts["extra_choices"] += call.extra_choices
        return turn

    def _call(self, span: Span, call: ModelCall) -> str:
        state = self.state
        if call.system is not None and call.system != state.system:
            self._emit(SystemPromptSet.of(call.system, turn_id=state.open_turn))
        self._inputs(span, call.inputs)
        turn = self._turn(span)
        self._emit(
            ModelCalled(
                turn_id=turn,
                provider=call.provider[:200],
                model=call.model[:200],
                input_tokens=call.input_tokens,
                output_tokens=call.output_tokens,
                cached_input_tokens=min(call.cached_input_tokens, call.input_tokens),
                cost_usd=self._cost(call),
                duration_ms=call.duration_ms,
                success=call.success,
                error=None if call.error is None else summarize(call.error),
            )
        )
        for said in call.outputs:
            self._assistant(said, turn)
        self.counts["extra_choices"] += call.extra_choices
        return turn

    def _inputs(self, span: Span, inputs: tuple[Said, ...]) -> None:
        """Record the input messages the session does not hold yet."""
        state = self.state
        walked, spoken, start = self._unwalked(span, inputs)
        users = 0
        for said in walked:
            if isinstance(said, ToolSaid):
                if said.call_id not in state.results:
                    self._result(said, self._turn(span), provenance="imported")
                continue
            spoken += 1
            if spoken <= start:
                continue
            if isinstance(said, UserSaid):
                if self.state.open_turn is not None:
                    self._emit(TurnCompleted(turn_id=self.state.open_turn))
                users += 1
                suffix = "" if users == 1 else f"-{users}"
                self._emit(
                    TurnStarted(
                        turn_id=f"otlp-{span.span_id}{suffix}",
                        origin="interactive",
                        user_input=said.text,
                    )
                )
            else:
                self._assistant(said, self._turn(span))

    def _unwalked(
        self, span: Span, inputs: tuple[Said, ...]
    ) -> tuple[Sequence[Said], int, int]:
        """What of ``inputs`` to walk, its spoken messages before it, the overlap.

        The overlap is how many spoken messages (user and assistant) of
        ``inputs`` the session holds already (:func:`_overlap`). A call's input
        usually repeats the session's previous call's input (``state.said``)
        and adds to it. When the overlap covers that head, the head is not
        walked again: its messages are all in the session, and its tool
        results were recorded when first seen, by their ids, which stay in
        ``state.results``; only those without an id are looked at again, as a
        walk would. Otherwise all of ``inputs`` is walked.
        """
        state = self.state
        head = len(state.said)
        walked: Sequence[Said] = inputs
        spoken = 0
        if head and inputs[:head] == state.said:
            prints = state.said_prints + [
                _print(s) for s in inputs[head:] if not isinstance(s, ToolSaid)
            ]
            start = _overlap(state.seen, prints)
            if start >= len(state.said_prints):
                for said in state.said_without_id:
                    if said.call_id not in state.results:
                        self._result(said, self._turn(span), provenance="imported")
                walked = inputs[head:]
                spoken = len(state.said_prints)
        else:
            prints = [_print(s) for s in inputs if not isinstance(s, ToolSaid)]
            start = _overlap(state.seen, prints)
        without_id = [s for s in walked if isinstance(s, ToolSaid) and not s.call_id]
        if walked is not inputs:
            without_id = state.said_without_id + without_id
        state.said = inputs
        state.said_prints = prints
        state.said_without_id = without_id
        return walked, spoken, start

    def _assistant(self, said: AssistantSaid, turn: str) -> None:
        self._emit(
            AssistantMessage(
                turn_id=turn,
                text=said.text,
                tool_calls=tuple(
                    ToolCallRecord(
                        id=c.id or UNKNOWN,
                        name=c.name or UNKNOWN,
                        arguments=c.arguments,
                    )
                    for c in said.calls
                ),
            )
        )

    def _result(
        self, said: ToolSaid, turn: str, *, provenance: str = "imported"
    ) -> None:
        call_id = said.call_id or UNKNOWN
        self._emit(
            ToolResultRecorded(
                turn_id=turn,
                call_id=call_id,
                tool=said.name or self.state.names.get(call_id, UNKNOWN),
                success=not said.is_error,
                output="" if said.is_error else said.content,
                error=said.content if said.is_error else None,
                original_chars=len(said.content),
                kept_chars=len(said.content),
                provenance="executed" if provenance == "executed" else "imported",
            )
        )

    def _tool(self, span: Span, run: ToolRun, turn: str) -> None:
        call_id = run.call_id or f"otlp-{span.span_id}"
        said_by_span = run.call_id and run.call_id not in self.state.names
        if run.arguments is not None and said_by_span:
            # Only this span says the call was made (the model call asking for
            # it was recorded without content): its message, carrying the call.
            # A span without a call id cannot tell: its call is not recorded.
            call = ToolCallSaid(id=call_id, name=run.name, arguments=run.arguments)
            self._assistant(AssistantSaid(text="", calls=(call,)), turn)
        if run.result is None:
            return
        if call_id in self.state.results:
            return
        failed = not run.success
        said = ToolSaid(
            call_id=call_id,
            content=run.result if not failed else (run.result or run.error or ""),
            name=run.name,
            is_error=failed,
        )
        self._result(said, turn, provenance="executed")

    def _cost(self, call: ModelCall) -> float:
        if call.model not in self.pricing:
            return 0.0  # unpriced: what price_usage answers, without its work
        usage = TokenUsage(
            model=call.model,
            input_tokens=call.input_tokens,
            output_tokens=call.output_tokens,
            cached_input_tokens=min(call.cached_input_tokens, call.input_tokens),
        )
        try:
            return price_usage(usage, self.pricing).cost_usd
        except PricingError:
            return 0.0


def _print(said: UserSaid | AssistantSaid) -> _Print:
    if type(said) is UserSaid:
        return ("u", said.text, ())
    calls = said.calls  # type: ignore[union-attr]
    return ("a", said.text, tuple([c.id or UNKNOWN for c in calls]) if calls else ())


def _overlap(seen: Sequence[_Print], prints: Sequence[_Print]) -> int:
    """How many of ``prints`` the session already holds.

    The longest tail of ``seen`` that is a head of ``prints``: a client that
    trimmed its history still matches.
    """
    for size in range(min(len(seen), len(prints)), 0, -1):
        if seen[len(seen) - size :] == prints[:size]:
            return size
    return 0


def _cleaned(cleaned: dict[str, str], text: str) -> str:
    """:func:`_clean` of ``text``, kept in ``cleaned`` for the batch's next spans."""
    found = cleaned.get(text)
    if found is None:
        found = cleaned[text] = _clean(text)
    return found


def _clean(text: str) -> str:
    """An identifier without control characters, at most 200 characters."""
    return CONTROL_CHARACTERS.sub("_", text)[:200] or UNKNOWN


def _span_event(entry: LoggedEvent) -> SpanEvent:
    """A recorded log event as the span event it stands for (its body a field)."""
    return SpanEvent(
        name=entry.name,
        time_ns=entry.time_ns,
        attributes={**entry.attributes, "body": entry.body},
    )


def _logged(record: LogRecord) -> LoggedEvent:
    """A log record as recorded, with its print (a digest of all of it)."""
    whole = (
        record.trace_id,
        record.span_id,
        record.event_name,
        record.time_ns,
        record.attributes,
        record.body,
    )
    return LoggedEvent(
        span_id=record.span_id,
        name=record.event_name,
        time_ns=record.time_ns,
        attributes=record.attributes,
        body=record.body,
        print=hashlib.sha256(msgspec.json.encode(whole)).hexdigest(),
    )


def _fresh(
    logged: Sequence[tuple[int, LoggedEvent]], seen: set[str], outcome: list[str]
) -> list[tuple[int, LoggedEvent]]:
    """The events not recorded before (nor earlier in the batch).

    The others' ``outcome`` is :data:`ALREADY_LOGGED`.
    """
    fresh: list[tuple[int, LoggedEvent]] = []
    taken: set[str] = set()
    for index, entry in logged:
        if entry.print in seen or entry.print in taken:
            outcome[index] = ALREADY_LOGGED
        else:
            taken.add(entry.print)
            fresh.append((index, entry))
    return fresh
