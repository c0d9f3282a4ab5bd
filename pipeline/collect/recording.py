"""GenAI spans into ledger appends: one atomic append per batch of spans.

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

Everything of one batch goes in one :meth:`~ledger.store.EventStore.append_atomic`:
all of it or nothing, durable when it returns.
"""

from __future__ import annotations

import hashlib
import threading
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Final, TypeAlias
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
from turnledger.pipeline.collect.decode import Span
from turnledger.pipeline.collect.genai import (
    AssistantSaid,
    InputCache,
    ModelCall,
    Said,
    SpanReading,
    ToolCallSaid,
    ToolRun,
    ToolSaid,
    UserSaid,
    read_span,
)
from turnledger.pipeline.collected import FRAMEWORK, LISTED, SPANS_KIND, SpansListed
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

MAX_SESSIONS: Final = 4096
"""Sessions whose state the recorder keeps between batches (the least recently
written beyond it are folded again from their stream when they come back)."""

_Print: TypeAlias = tuple[str, str, tuple[str, ...]]


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

    def copy(self) -> _State:
        other = _State.__new__(_State)
        other.__dict__.update(self.__dict__)
        other.span_ids = set(self.span_ids)
        other.seen = list(self.seen)
        other.results = set(self.results)
        other.names = dict(self.names)
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
                self.span_ids.update(entry[1] for entry in LISTED.decode(fields).spans)
            case _:
                return


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
        with self._lock:
            for attempt in range(_ATTEMPTS):
                try:
                    report, found = self._record(spans)
                except ConcurrencyError:
                    self._states.clear()  # another writer: read them again
                    self._known = -1
                    if attempt == _ATTEMPTS - 1:
                        raise
                else:
                    if duplicates is not None:
                        duplicates.extend(found)
                    return report
            raise AssertionError  # pragma: no cover - the loop returns or raises

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
        appends: list[Append] = []
        states: list[_State] = []
        totals = Counter[str]()
        found: list[str] = []
        for (agent, key), members in grouped.items():
            state = self._state(agent, key).copy()
            builder = _Builder(state, self.pricing)
            members.sort(key=lambda m: (m[0].start_ns, m[0].end_ns, m[0].span_id))
            for span, reading in members:
                builder.add(span, reading)
            builder.finish()
            totals.update(builder.counts)
            found.extend(builder.duplicates)
            if builder.events:
                digest = hashlib.sha256(
                    ",".join(sorted(s[1] for s in builder.listed)).encode()
                ).hexdigest()
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
        return BatchReport(
            spans=len(spans),
            mapped=totals["mapped"],
            duplicates=totals["duplicates"],
            without_content=totals["without_content"],
            extra_choices=totals["extra_choices"],
            known=dict(known),
            unknown=dict(unknown),
            sessions=tuple(
                SessionWritten(
                    agent=s.agent,
                    session=s.key,
                    stream=str(s.stream),
                    events=len(a.events),
                )
                for s, a in zip(states, appends, strict=True)
            ),
            events=sum(len(a.events) for a in appends),
        ), found

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
            self.counts["without_content"] += 1

    def finish(self) -> None:
        """List the spans recorded (one ``item.recorded`` for the batch)."""
        if not self.listed:
            return
        listed = SpansListed(spans=self.listed, without_content=self.without)
        # Not folded into the state again: add() put its spans there already.
        self.events.append(
            ItemRecorded(
                turn_id=self.last_turn,
                framework=FRAMEWORK,
                kind=SPANS_KIND,
                fields=msgspec.json.encode(listed).decode(),
                typed=True,
            )
        )
        self.state.version += 1

    def _turn(self, span: Span) -> str:
        return self.state.open_turn or f"otlp-{span.span_id}"

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
