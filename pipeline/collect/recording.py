"""GenAI spans and log events into ledger appends: one atomic append per batch.

A session is the span's ``gen_ai.conversation.id`` (or that of another span
of the same trace in the batch), else its trace id; a conversation id naming
a response recorded before is that response's session (:mod:`.links`); its
agent is the resource's ``service.name``. Each session's state (head version, the spans
already recorded, its messages so far, the open turn, the system prompt) is
folded from its stream when first seen and is current before every batch, so
spans of one trace arriving in several batches continue the same session, and
a span delivered twice (an exporter's retry) is recorded once. A batch reads a
known session from its stream again only when another writer may have
appended since the recorder's own last write (the ledger's last position says
so); a stale state could not write anyway, its append would be refused. The
links to the sessions responses and traces went to are read from the ledger
so too: the whole ledger's at the first batch, then what others wrote.

What a span records:

- a model call with content: the system prompt when it changed
  (``system_prompt.set``), the input messages not yet in the session (a user
  message opens a turn, closing the one before), ``model.called`` with usage
  and cost (priced by ``[pricing]``), the assistant's reply;
- a model call without content: ``model.called`` alone;
- a tool run: ``tool_result.recorded`` when its result was captured, and
  before it a message carrying the call when the span says the arguments of a
  call the session does not hold; when the model's own message asking for the
  call comes later (by log events), both are taken out of the history
  (``items.removed``: the ledger keeps them) and the result is recorded again
  after that message;
- an ADK ``call_llm`` span sent after its model call span's batch (the child
  ends first): what its request and response say of the call when the call
  span held no content, as log events applied to it would
  (:mod:`.genai.adk`);
- the batch's recorded spans of a session: one ``item.recorded`` of framework
  ``otlp``, kind ``spans``, listing each span's trace id, span id and operation
  and the ids of those without content (and each model call span's parent);
  that is how a later batch knows a span already recorded, and how ``audit``
  tells a session whose conversation is not there.

A model call's content may come apart from its span, as log records emitted in
its context (:data:`~.genai.CONTENT_EVENTS`: the current form's
``gen_ai.client.inference.operation.details``, the previous form's message
events), by another exporter, before or after the span. A batch of log records
(:meth:`Recorder.record_logs`) records a session's GenAI content events in one
``item.recorded`` of kind ``log_events`` (each event whole, with a print that
knows it when sent again), in the session of their ``gen_ai.conversation.id``,
else the one their trace's spans went to (:mod:`.links`), else their trace's.
The events of a span not recorded yet are parked there: the span reads them
when it comes, as it reads its own events. Those of a span
recorded without content (or with what parked ones said) are recorded at once,
the messages the session does not hold yet and the reply, and the item lists
the span as ``applied`` (``audit`` then no longer counts it as without
content). Those of a span recorded with its own content are only kept. Events
that say nothing (content capture off) are counted, not recorded. Log records
that come before their span, when its session is not its trace's (a
``gen_ai.conversation.id`` the records do not carry, a response continued),
are kept in the session of their trace, parked; when the span comes, its
session takes them (listed in its own ``log_events`` item, the trace's
session's listing them as ``joined``) and the span reads them. Those of a
span never sent stay in the session of their trace.

Everything of one batch goes in one :meth:`~ledger.store.EventStore.append_atomic`:
all of it or nothing, durable when it returns.
"""

from __future__ import annotations

import hashlib
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Final, TypeVar
from uuid import UUID

import msgspec

from turnledger.ledger.errors import ConcurrencyError
from turnledger.ledger.ids import CONTROL_CHARACTERS, session_stream_id
from turnledger.ledger.store import Append, EventStore
from turnledger.pipeline.collect.decode import LogRecord, Span
from turnledger.pipeline.collect.genai import (
    CONTENT_EVENTS,
    InputCache,
    SpanReading,
    conversation_of,
    read_spans,
)
from turnledger.pipeline.collect.genai.adk import CARRIED, is_call_llm
from turnledger.pipeline.collect.links import SessionLinks
from turnledger.pipeline.collect.session import UNKNOWN, SessionBatch, SessionState
from turnledger.pipeline.collected import LoggedEvent
from turnledger.policies.pricing import ModelPrice

_ATTEMPTS: Final = 3

NOT_CONTENT_EVENT: Final = "not a GenAI content event"
OUTSIDE_SPANS: Final = "a GenAI content event outside any span"
ALREADY_LOGGED: Final = "already in the ledger"
WITHOUT_CONTENT: Final = "without content (capture off)"
_UNRECORDABLE: Final = frozenset({NOT_CONTENT_EVENT, OUTSIDE_SPANS})

MAX_SESSIONS: Final = 4096
"""Sessions whose state the recorder keeps between batches (the least recently
written beyond it are folded again from their stream when they come back)."""

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
        without_content: Recorded model call spans whose messages were not
            captured.
        without_result: Recorded tool spans without their result (a later
            model call's input may bring it).
        without_inputs: Model call spans holding their answer but no message
            they answered (the question is not in the ledger).
        without_outputs: Model call spans holding the messages sent but no
            answer, the call not failed (the answer is not in the ledger).
        extra_choices: Output choices after a call's first (not recorded).
        parts: Message parts that hold no text (an image, a reasoning
            part...), by type: left out of the messages recorded, counted.
        known: GenAI spans of other operations, by operation (counted only).
        unknown: Spans of no known shape, by what they lacked (counted only).
        sessions: The sessions written to.
        events: Events written.
    """

    spans: int
    mapped: int
    duplicates: int = 0
    without_content: int = 0
    without_result: int = 0
    without_inputs: int = 0
    without_outputs: int = 0
    extra_choices: int = 0
    parts: dict[str, int] = msgspec.field(default_factory=dict)
    known: dict[str, int] = msgspec.field(default_factory=dict)
    unknown: dict[str, int] = msgspec.field(default_factory=dict)
    sessions: tuple[SessionWritten, ...] = ()
    events: int = 0


class LogsReport(msgspec.Struct, frozen=True, kw_only=True):
    """What one batch of log records recorded and what it only counted.

    Attributes:
        records: Log records received.
        parked: GenAI content events recorded before their span (read by it
            when it comes).
        applied: Events whose span was recorded without content (or with
            what parked events said): what they say is recorded now.
        span_had_content: Events of a span recorded with its content (kept in
            the ledger, not recorded twice).
        duplicates: Events already in the ledger (sent again).
        without_content: GenAI content events that say nothing (content
            capture off): counted, not recorded.
        without_inputs: Spans whose events held their answer but no message
            it answered (the question is not in the ledger).
        without_outputs: Spans whose events held the messages sent but no
            answer (the answer is not in the ledger).
        parts: Message parts that hold no text, by type (as
            :attr:`BatchReport.parts`).
        unknown: Records that are no GenAI content event of a span, by why
            (counted only).
        sessions: The sessions written to.
        events: Ledger events written.
    """

    records: int
    parked: int = 0
    applied: int = 0
    span_had_content: int = 0
    duplicates: int = 0
    without_content: int = 0
    without_inputs: int = 0
    without_outputs: int = 0
    parts: dict[str, int] = msgspec.field(default_factory=dict)
    unknown: dict[str, int] = msgspec.field(default_factory=dict)
    sessions: tuple[SessionWritten, ...] = ()
    events: int = 0


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
        self._links = SessionLinks()
        self._states: dict[UUID, SessionState] = {}
        self._lock = threading.Lock()
        # The ledger's last position when every cached state was last known
        # current (-1: unknown), and the epoch the cached states are read in:
        # one that moves whenever another writer may have moved a session.
        self._known = -1
        self._epoch = 0

    def catch_up(self) -> None:
        """Read the session links the ledger holds now (the first batch would).

        A receiver does it before it listens: on a large ledger, reading the
        whole ledger's links (every batch's listing) takes a while.

        Raises:
            StoreUnavailableError: The database failed.
        """
        with self._lock:
            self._moved()

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
        readings = read_spans(spans, self._inputs)
        known: Counter[str] = Counter()
        unknown: Counter[str] = Counter()
        sessions = self._sessions(readings)
        grouped: dict[tuple[str, str], list[tuple[Span, SpanReading]]] = {}
        for (span, reading), session in zip(readings, sessions, strict=True):
            if reading.kind == "known":
                known[reading.label] += 1
            elif session is not None:  # recorded (or an awaited call_llm span)
                grouped.setdefault(session, []).append((span, reading))
            elif reading.kind == "unknown":
                unknown[reading.label] += 1
        wrappers = {s.span_id: s for s, r in readings if r.label == CARRIED}
        builders = self._batches(grouped, known, wrappers)
        for builder in builders:
            builder.finish()
        try:
            written = self._write(before, builders)
        finally:
            self._links.forget_noted()
        for builder in builders:
            if builder.events:  # what its item says, as a restarted one reads it
                session = (builder.state.agent, builder.state.key)
                self._links.written(session, builder.listed, builder.responses)
            self._links.unpark(builder.joined)  # another session took them
        totals = Counter[str]()
        parts = Counter[str]()
        found: list[str] = []
        for builder in builders:
            totals.update(builder.counts)
            parts.update(builder.skipped)
            found.extend(builder.duplicates)
        return BatchReport(
            spans=len(spans),
            mapped=totals["mapped"],
            duplicates=totals["duplicates"],
            without_content=totals["without_content"],
            without_result=totals["without_result"],
            without_inputs=sum(len(b.without_inputs) for b in builders),
            without_outputs=sum(len(b.without_outputs) for b in builders),
            extra_choices=totals["extra_choices"],
            parts=dict(sorted(parts.items())),
            known=dict(+known),  # none left at 0
            unknown=dict(unknown),
            sessions=written,
            events=sum(w.events for w in written),
        ), found

    def _batches(
        self,
        grouped: dict[tuple[str, str], list[tuple[Span, SpanReading]]],
        known: Counter[str],
        wrappers: Mapping[str, Span],
    ) -> list[SessionBatch]:
        """Each session's batch, its spans added in the order they began.

        An ADK ``call_llm`` span whose call span the session recorded before
        is carried (:meth:`.SessionBatch.carry`) and counted in ``known``; one
        whose call span is in the batch (``wrappers``, by id) is listed with it
        (counted in ``known`` already, unless both were sent again).
        """
        batches: dict[tuple[str, str], SessionBatch] = {}
        for session, members in grouped.items():
            builder = self._batch(batches, session)
            members.sort(key=lambda m: (m[0].start_ns, m[0].end_ns, m[0].span_id))
            for span, reading in members:
                if reading.kind == "unknown":  # a call_llm span its call awaited
                    known[CARRIED] += builder.carry(span)
                    continue
                self._join(batches, builder, span)
                if builder.add(span, reading, wrappers.get(span.parent_id)):
                    known[CARRIED] -= 1  # sent again with its call span
        return list(batches.values())

    def _batch(
        self, batches: dict[tuple[str, str], SessionBatch], session: tuple[str, str]
    ) -> SessionBatch:
        """The batch of a session (begun from its state when first asked for)."""
        found = batches.get(session)
        if found is None:
            state = self._state(*session).copy()
            found = batches[session] = SessionBatch(state, self.pricing)
        return found

    def _join(
        self,
        batches: dict[tuple[str, str], SessionBatch],
        builder: SessionBatch,
        span: Span,
    ) -> None:
        """Bring a span's log events parked in another session to its own.

        They came first, to the session of their trace; the span went to
        another (a ``gen_ai.conversation.id`` the records do not carry).
        """
        holder = self._links.parked_in(span.span_id)
        if holder is not None and holder != (builder.state.agent, builder.state.key):
            events = self._batch(batches, holder).give(span.span_id)
            if events:
                builder.join(span, events)

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
        builders: list[SessionBatch] = []
        counts = Counter[str]()
        parts = Counter[str]()
        for (agent, key), spans in self._logs_by_session(records, outcome).items():
            builder = SessionBatch(self._state(agent, key).copy(), self.pricing)
            for span_id, (trace_id, logged) in spans.items():
                fresh = _fresh(logged, builder.state.log_prints, outcome)
                counts["duplicates"] += len(logged) - len(fresh)
                if not builder.logs(trace_id, span_id, [e for _, e in fresh]):
                    for index, _entry in fresh:
                        outcome[index] = WITHOUT_CONTENT
            builder.finish()
            counts.update(builder.counts)
            parts.update(builder.skipped)
            if builder.logged:
                builders.append(builder)
        written = self._write(before, builders)
        for builder in builders:
            for span_id in builder.parked:
                self._links.park(span_id, (builder.state.agent, builder.state.key))
        return LogsReport(
            records=len(records),
            parked=counts["parked"],
            applied=counts["applied"],
            span_had_content=counts["span_had_content"],
            duplicates=counts["duplicates"],
            without_content=counts["without_content"],
            without_inputs=sum(len(b.without_inputs) for b in builders),
            without_outputs=sum(len(b.without_outputs) for b in builders),
            parts=dict(sorted(parts.items())),
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
            session = self._linked(
                cleaned,
                conversation if isinstance(conversation, str) else None,
                record.trace_id,
                record.service,
            )
            spans = grouped.setdefault(session, {})
            spans.setdefault(record.span_id, (record.trace_id, []))[1].append(
                (index, _logged(record))
            )
        return grouped

    def _sessions(
        self, readings: Sequence[tuple[Span, SpanReading]]
    ) -> list[tuple[str, str] | None]:
        """The session of each span recorded (``None`` for a span only counted).

        Its conversation (``gen_ai.conversation.id``, ``session.id``), else
        the first one a span of its trace names (in the order the spans
        began), else its trace; a conversation id naming a response recorded
        before is that response's session, and a trace whose spans went to
        another session than its own before follows them there
        (:class:`~.links.SessionLinks`). Spans are taken in the order they
        began, so a continuation finds the response it continues in the batch.
        """
        order = sorted(
            range(len(readings)),
            key=lambda i: (readings[i][0].start_ns, readings[i][0].end_ns),
        )
        conversations: dict[str, str] = {}
        for i in order:
            span, reading = readings[i]
            if reading.conversation:
                conversations.setdefault(span.trace_id, reading.conversation)
        cleaned: dict[str, str] = {}  # a batch's spans share a few names
        found: list[tuple[str, str] | None] = [None] * len(readings)
        for i in order:
            span, reading = readings[i]
            if reading.kind == "unknown" and is_call_llm(span):
                found[i] = self._awaited_by(cleaned, span, conversations)
            if reading.kind in ("known", "unknown"):
                continue
            conversation = reading.conversation or conversations.get(span.trace_id)
            found[i] = session = self._linked(
                cleaned, conversation, span.trace_id, span.service
            )
            self._links.note(span, reading, session)
        return found

    def _awaited_by(
        self, cleaned: dict[str, str], wrapper: Span, conversations: dict[str, str]
    ) -> tuple[str, str] | None:
        """The session whose model call span an ADK ``call_llm`` span is the parent of.

        Its call span (which ends first) was recorded by an earlier batch, in
        the session the ``call_llm`` span's trace went to (or its
        conversation's); ``None`` when no session recorded such a span (ADK
        1.x's ``call_llm`` span, its only model span: of no known shape). One
        the session recorded already (sent again) is its duplicate.
        """
        conversation = conversation_of(wrapper.attributes) or conversations.get(
            wrapper.trace_id
        )
        session = self._linked(cleaned, conversation, wrapper.trace_id, wrapper.service)
        state = self._state(*session)
        if state.version == 0:  # no such session: nothing kept of it
            self._states.pop(state.stream, None)
            return None
        found = wrapper.span_id in state.awaiting or wrapper.span_id in state.span_ids
        return session if found else None  # the latter: sent again

    def _linked(
        self,
        cleaned: dict[str, str],
        conversation: str | None,
        trace_id: str,
        service: str,
    ) -> tuple[str, str]:
        """The session of a conversation or trace, following the links."""
        linked = self._links.continued(conversation)
        if linked is None and conversation is None:
            linked = self._links.of_trace(trace_id)
        if linked is not None:
            return linked
        return self._session_of(cleaned, conversation, trace_id, service)

    def _session_of(
        self,
        cleaned: dict[str, str],
        conversation: str | None,
        trace_id: str,
        service: str,
    ) -> tuple[str, str]:
        """A session's agent and key.

        The recorder's agent, else the service; the conversation, else the
        trace; both cleaned (and kept in ``cleaned`` for the batch's next ones).
        """
        key = _cleaned(cleaned, conversation or trace_id)
        return self.agent or _cleaned(cleaned, service), key

    def _write(
        self, before: int, builders: Sequence[SessionBatch]
    ) -> tuple[SessionWritten, ...]:
        """Append the builders' events in one transaction; keep their states.

        ``before``: the ledger's last position when the batch began
        (:meth:`_moved`).
        """
        appends: list[Append] = []
        states: list[SessionState] = []
        for builder in builders:
            if not builder.events:
                continue
            state = builder.state
            expected = state.version - len(builder.events)
            ids = [s[1] for s in builder.listed] + [e.print for e in builder.logged]
            ids += [f"joined:{span_id}" for span_id in builder.joined]
            digest = hashlib.sha256(",".join(sorted(ids)).encode()).hexdigest()
            # The key names this append at its place in the stream: a session
            # may list the same ids again later (a span joining records parked
            # for it a second time), which is another append, to be written.
            key = f"otlp:{state.stream.hex}:{expected}:{digest}"
            appends.append(Append(state.stream, builder.events, expected, key))
            states.append(state)
        if appends:
            written = self.store.append_atomic(appends)
            positions = [p for result in written for p in result.positions]
            # Only our rows since ``before``: the cached states are still current.
            alone = min(positions) == before + 1 and max(positions) == before + len(
                positions
            )
            self._known = max(positions) if alone else -1
            if alone:  # its links are noted already
                self._links.position = max(positions)
        for state in states:
            self._states.pop(state.stream, None)
            self._states[state.stream] = state  # the most recently used last
            self._links.opened(state.stream, (state.agent, state.key))
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
        self._links.follow(self.store, last)
        return last

    def _state(self, agent: str, key: str) -> SessionState:
        stream = session_stream_id(agent, key)
        state = self._states.get(stream)
        if state is None:
            state = self._states[stream] = SessionState(agent, key)
        elif state.epoch == self._epoch:
            return state  # nobody else has written since it was read
        recorded = self.store.read_stream(stream, after=state.version)
        if recorded:
            state.fold((r.version, r.event) for r in recorded)
            state.version = recorded[-1].version
        state.epoch = self._epoch
        return state


def _cleaned(cleaned: dict[str, str], text: str) -> str:
    """:func:`_clean` of ``text``, kept in ``cleaned`` for the batch's next spans."""
    found = cleaned.get(text)
    if found is None:
        found = cleaned[text] = _clean(text)
    return found


def _clean(text: str) -> str:
    """An identifier without control characters, at most 200 characters."""
    return CONTROL_CHARACTERS.sub("_", text)[:200] or UNKNOWN


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
