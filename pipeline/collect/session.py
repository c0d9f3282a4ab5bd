"""One collected session: its state, and the events one batch writes to it.

:class:`SessionState` is a session's stream folded as far as the receiver
needs it (its head version, the spans and log events recorded, its messages so
far, the open turn, the system prompt); :class:`SessionBatch` turns one batch's
spans or log events of that session into ledger events, advancing a copy of
the state as it goes (see :mod:`.recording` for what each becomes, and for
the batch that writes them).
"""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final, TypeAlias

import msgspec

from turnledger.ledger.events import (
    AssistantMessage,
    Event,
    ItemRecorded,
    ItemsRemoved,
    ModelCalled,
    SessionOpened,
    SystemPromptSet,
    ToolCallRecord,
    ToolResultRecorded,
    TurnCompleted,
    TurnStarted,
)
from turnledger.ledger.ids import session_stream_id
from turnledger.pipeline.collect.decode import Span, SpanEvent
from turnledger.pipeline.collect.genai import (
    REDACTED_PART,
    AssistantSaid,
    ModelCall,
    Said,
    SpanReading,
    ToolCallSaid,
    ToolRun,
    ToolSaid,
    UserSaid,
    carries_content,
    read_call,
)
from turnledger.pipeline.collect.genai.adk import CARRIED, with_request
from turnledger.pipeline.collected import (
    FRAMEWORK,
    LISTED,
    LOGS_KIND,
    LOGS_LISTED,
    NO_PARTS,
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
"""The channel of a collected session."""
UNKNOWN: Final = "unknown"
"""A tool call's id or name the span did not say."""

_Print: TypeAlias = tuple[str, str, tuple[str, ...]]

AWAITED: Final = 256
"""Model call spans a session remembers by their parent's id (the most recent):
an ADK ``call_llm`` span (the parent) comes within a batch or two of its call's."""


class SessionState:
    """A session's stream, folded as far as the recorder needs it."""

    def __init__(self, agent: str, key: str) -> None:
        self.agent = agent
        self.key = key
        self.stream = session_stream_id(agent, key)
        self.version = 0
        self.epoch = -1  # the recorder's epoch when last read from its stream
        self.span_ids: set[str] = set()
        self.seen: list[_Print] = []
        self.seen_at: list[int] = []  # the version of each print's event
        self.results: set[str] = set()
        self.names: dict[str, str] = {}
        # Calls made (with an id) and not answered yet: their name and
        # arguments, by id (a tool span without a call id is paired with the
        # one it matches).
        self.pending: dict[str, tuple[str, str]] = {}
        # Calls whose tool run failed without sending its result: the error,
        # by call id (the result a later input holds is recorded as failed).
        self.failed: dict[str, str] = {}
        self.open_turn: str | None = None
        self.system: str | None = None
        # The last model call's input messages read, and their prints (see
        # SessionBatch._inputs).
        self.said: tuple[Said, ...] = ()
        self.said_prints: list[_Print] = []
        # GenAI log events: those of spans not recorded yet, by span id, and
        # the prints of every one recorded (so one sent again is known).
        self.parked: dict[str, tuple[LoggedEvent, ...]] = {}
        self.log_prints: set[str] = set()
        # Spans whose content comes by log events: recorded without content,
        # or with what log events parked before them said.
        self.by_logs: set[str] = set()
        # What tool spans recorded before the model said the call (its message
        # came later, by log events): each call's result, and the message a
        # tool span made for its call, by call id, with their versions. When
        # the model's message comes, they are placed after it (SessionBatch).
        self.result_at: dict[str, tuple[int, ToolResultRecorded]] = {}
        self.early: set[str] = set()  # results recorded before any call of theirs
        self.stand_ins: dict[str, int] = {}
        # Tool runs without a call id recorded before any call matched them:
        # their tool and arguments, by the span's call id (SessionBatch._tool).
        self.unpaired: dict[str, tuple[str, tuple[str, ...]]] = {}
        # Calls the model made without an id: their tool and arguments.
        self.idless: set[tuple[str, str]] = set()
        # Model call spans by their parent span's id (the AWAITED most recent),
        # and whether their content is still to come: an ADK call_llm span
        # sent after its call span's batch carries it (SessionBatch.carry).
        self.awaiting: dict[str, tuple[str, bool]] = {}

    def copy(self) -> SessionState:
        """A copy a batch advances (kept only once its append is durable)."""
        other = SessionState.__new__(SessionState)
        other.__dict__.update(self.__dict__)
        other.span_ids = set(self.span_ids)
        other.seen = list(self.seen)
        other.seen_at = list(self.seen_at)
        other.results = set(self.results)
        other.names = dict(self.names)
        other.pending = dict(self.pending)
        other.failed = dict(self.failed)
        other.parked = dict(self.parked)
        other.log_prints = set(self.log_prints)
        other.by_logs = set(self.by_logs)
        other.result_at = dict(self.result_at)
        other.early = set(self.early)
        other.stand_ins = dict(self.stand_ins)
        other.unpaired = dict(self.unpaired)
        other.idless = set(self.idless)
        other.awaiting = dict(self.awaiting)
        return other

    def fold(self, recorded: Iterable[tuple[int, Event]]) -> None:
        """Fold events read from the session's stream (version, event), in order."""
        for version, event in recorded:
            self.apply(event, version)

    def apply(self, event: Event, version: int) -> None:
        """Fold one event of the session (read, or written by a batch)."""
        if type(event) is ModelCalled:
            return  # the most frequent event, and nothing to fold
        match event:
            case TurnStarted(turn_id=turn, user_input=text):
                self._saw(("u", text, ()), version)
                self.open_turn = turn
            case TurnCompleted():
                self.open_turn = None
            case AssistantMessage():
                self._message(event, version)
            case ToolResultRecorded():
                self._result(event, version)
            case ItemsRemoved(framework="otlp", first_version=low, last_version=high):
                self._removed(range(low, high + 1))
            case SystemPromptSet(text=text):
                self.system = text
            case ItemRecorded(framework="otlp", kind="spans", fields=fields):
                self._spans(LISTED.decode(fields))
            case ItemRecorded(framework="otlp", kind="log_events", fields=fields):
                self._logs(LOGS_LISTED.decode(fields))
            case _:
                return

    def _spans(self, listed: SpansListed) -> None:
        for entry in listed.spans:
            self.span_ids.add(entry[1])
            self.parked.pop(entry[1], None)  # its span read them
            self.awaiting.pop(entry[1], None)  # a call_llm span: it came
        without = set(listed.without_content)
        for span_id, parent_id in listed.parents:
            self.await_parent(parent_id, span_id, bare=span_id in without)
        self.by_logs.update(listed.without_content)
        self.by_logs.update(listed.from_logs)
        self.by_logs.difference_update(listed.carried)  # a call_llm span gave it
        for call_id, version in listed.stand_ins:
            self.stand_ins[call_id] = version
            self.unsay(call_id, version)
        for _span_id, call_id, error in listed.without_result:
            if error and call_id not in self.results:
                self.failed[call_id] = error
        for call_id, tool, arguments in listed.unpaired:
            if call_id in self.result_at:  # not placed after its call since
                self.unpaired[call_id] = (tool, tuple(arguments))

    def _logs(self, listed: LogsListed) -> None:
        self.fold_logs(listed.events)
        self.clothe(listed.applied)
        for span_id in listed.joined:  # its span's session took them
            self.parked.pop(span_id, None)

    def await_parent(self, parent_id: str, span_id: str, *, bare: bool) -> None:
        """Remember a model call span by its parent's (the :data:`AWAITED` last).

        ``bare``: recorded without content (a ``call_llm`` span may bring it).
        """
        self.awaiting.pop(parent_id, None)
        self.awaiting[parent_id] = (span_id, bare)
        if len(self.awaiting) > AWAITED:
            del self.awaiting[next(iter(self.awaiting))]

    def clothe(self, span_ids: Iterable[str]) -> None:
        """Note spans whose content log events brought: none is awaited now."""
        dressed = set(span_ids)
        if dressed and self.awaiting:
            for parent_id, (span_id, bare) in list(self.awaiting.items()):
                if bare and span_id in dressed:
                    self.awaiting[parent_id] = (span_id, False)

    def unsay(self, call_id: str, version: int) -> None:
        """Forget the print of the message a tool span made for its call.

        The model did not say it: the inputs that follow hold the model's own
        message, which the prints match against. ``version``: the message's
        (the model's own message, said later, prints the same).
        """
        made: _Print = ("a", "", (call_id,))
        for i in range(len(self.seen) - 1, -1, -1):
            if self.seen_at[i] == version and self.seen[i] == made:
                del self.seen[i], self.seen_at[i]
                return

    def _saw(self, said: _Print, version: int) -> None:
        self.seen.append(said)
        self.seen_at.append(version)

    def _message(self, event: AssistantMessage, version: int) -> None:
        calls = event.tool_calls
        self._saw(
            ("a", event.text, tuple(c.id for c in calls) if calls else ()), version
        )
        for call in calls:
            self.names[call.id] = call.name
            if call.id == UNKNOWN:
                self.idless.add((call.name, call.arguments))
                continue
            if call.id in self.results:
                # An answered call's id named again: a call of its own (ADK
                # names a call by its tool and place when the model gave it
                # no id: get_weather_0 at every turn), whose result is to come.
                self.results.discard(call.id)
                self.failed.pop(call.id, None)
            self.pending[call.id] = (call.name, call.arguments)

    def _result(self, event: ToolResultRecorded, version: int) -> None:
        call_id = event.call_id
        if call_id == UNKNOWN:  # a result without an id: found again by its print
            self._saw(("r", event.error or event.output, ()), version)
        self.pending.pop(call_id, None)
        self.failed.pop(call_id, None)
        if call_id not in self.names:
            self.early.add(call_id)
        self.result_at[call_id] = (version, event)
        self.results.add(call_id)

    def _removed(self, gone: range) -> None:
        if self.seen_at and self.seen_at[-1] >= gone.start:  # their prints too
            kept = [i for i, at in enumerate(self.seen_at) if at not in gone]
            self.seen = [self.seen[i] for i in kept]
            self.seen_at = [self.seen_at[i] for i in kept]
        for call_id, (version, _event) in list(self.result_at.items()):
            if version in gone:
                self.early.discard(call_id)
                self.unpaired.pop(call_id, None)
                del self.result_at[call_id]
        for call_id, version in list(self.stand_ins.items()):
            if version in gone:
                del self.stand_ins[call_id]

    def fold_logs(self, logged: Sequence[LoggedEvent]) -> None:
        """Note log events recorded: those of spans not recorded yet are parked."""
        for entry in logged:
            self.log_prints.add(entry.print)
            if entry.span_id not in self.span_ids:
                self.parked[entry.span_id] = (
                    *self.parked.get(entry.span_id, ()),
                    entry,
                )


class SessionBatch:
    """The events one batch writes to a session: its spans' or its log events'.

    It advances the state it is given (a copy: the recorder keeps it once the
    batch is durable); :meth:`finish` closes the batch with its ``item.recorded``.
    """

    def __init__(self, state: SessionState, pricing: Mapping[str, ModelPrice]) -> None:
        self.state = state
        self.pricing = pricing
        self.events: list[Event] = []
        self.listed: list[tuple[str, str, str]] = []
        self.without: list[str] = []
        self.logged: list[LoggedEvent] = []
        self.applied: list[str] = []
        self.from_logs: list[str] = []
        self.stand_ins: list[tuple[str, int]] = []
        self.duplicates: list[str] = []
        self.skipped: Counter[str] = Counter()  # parts not recorded, by type
        self.without_inputs: list[str] = []
        self.without_outputs: list[str] = []
        self.without_result: list[tuple[str, str, str]] = []
        self.responses: list[str] = []
        self.unpaired: list[tuple[str, str, list[str]]] = []
        self.parked: list[str] = []  # spans whose log events the batch parked
        self.parents: list[tuple[str, str]] = []  # model call spans' parents
        self.carried: list[str] = []  # call spans a late call_llm span clothed
        self.joined: list[str] = []  # spans whose parked events another took
        self.last_turn = ""
        self.counts: Counter[str] = Counter()
        if state.version == 0:
            self._emit(
                SessionOpened(agent=state.agent, session_key=state.key, channel=CHANNEL)
            )

    def _emit(self, event: Event) -> None:
        self.events.append(event)
        self.state.apply(event, self.state.version + 1)
        self.state.version += 1

    def add(
        self, span: Span, reading: SpanReading, wrapper: Span | None = None
    ) -> bool:
        """Record one span of the session (one already recorded is counted).

        ``wrapper``: the ADK ``call_llm`` span of the batch that is a model
        call span's parent (the span read its request and response): listed
        with it (:data:`~.genai.adk.CARRIED`), so that sent again, it is
        known. Returns whether ``wrapper`` was sent again with it (counted as
        a duplicate, not as carried).
        """
        if span.span_id in self.state.span_ids:
            return self._sent_again(span, wrapper)
        turn = self._turn(span)
        content = True
        parked = self.state.parked.pop(span.span_id, ())
        if parked and reading.call is not None and not reading.call.content:
            # Its messages came first, as log events in its context.
            logged = tuple(span_event(entry) for entry in parked)
            with_logs = msgspec.structs.replace(span, events=(*span.events, *logged))
            reading = msgspec.structs.replace(reading, call=read_call(with_logs))
            self.from_logs.append(span.span_id)
            self.state.by_logs.add(span.span_id)
        if reading.call is not None:
            content = reading.call.content
            turn = self._call(span, reading.call)
            if wrapper is not None:
                self._list_carrier(wrapper)
            elif span.parent_id:
                self.parents.append((span.span_id, span.parent_id))
                self.state.await_parent(span.parent_id, span.span_id, bare=not content)
        elif reading.tool is not None:
            call_id, error = self._tool(span, reading.tool, turn)
            if reading.tool.result is None:
                # Its call's result may come with a later input (audit knows).
                self.without_result.append((span.span_id, call_id, error))
                self.counts["without_result"] += 1
        self.listed.append((span.trace_id, span.span_id, reading.label[:200]))
        if reading.response:
            self.responses.append(reading.response)
        self.state.span_ids.add(span.span_id)
        self.last_turn = turn
        self.counts["mapped"] += 1
        if not content:
            self.without.append(span.span_id)
            self.state.by_logs.add(span.span_id)
            self.counts["without_content"] += 1
        return False

    def _sent_again(self, span: Span, wrapper: Span | None = None) -> bool:
        """Count a span recorded before; whether its ``wrapper`` was too."""
        again = [span.span_id]
        if wrapper is not None and wrapper.span_id in self.state.span_ids:
            again.append(wrapper.span_id)
        self.counts["duplicates"] += len(again)
        self.duplicates.extend(again)
        return len(again) == 2

    def logs(self, trace_id: str, span_id: str, fresh: Sequence[LoggedEvent]) -> bool:
        """Record a span's new GenAI log events; whether any of them holds content.

        Events none of which holds content (capture off) are counted, not
        recorded. A span not recorded yet: they are parked, for the span to
        read when it comes. A span whose content comes by log events (recorded
        without content, or with what parked ones said): what they say is
        recorded now. A span recorded with its own content: they are only kept
        (in the item).
        """
        events = tuple(span_event(entry) for entry in fresh)
        if not any(carries_content(event) for event in events):
            self.counts["without_content"] += len(fresh)
            return False
        state = self.state
        self.logged.extend(fresh)
        state.log_prints.update(entry.print for entry in fresh)
        if span_id not in state.span_ids:
            state.parked[span_id] = (*state.parked.get(span_id, ()), *fresh)
            self.parked.append(span_id)
            self.counts["parked"] += len(fresh)
            return True
        if span_id not in state.by_logs:
            self.counts["span_had_content"] += len(fresh)
            return True
        span = Span(trace_id=trace_id, span_id=span_id, events=events)
        self.last_turn = self._said(span, read_call(span))
        if span_id not in self.applied:
            self.applied.append(span_id)
        state.clothe((span_id,))
        self.counts["applied"] += len(fresh)
        return True

    def carry(self, wrapper: Span) -> bool:
        """Record an ADK ``call_llm`` span sent after its call span's batch.

        Its call span (a child, which ends first) was recorded from its own
        attributes; when that held no content, what the ``call_llm`` span's
        request and response say is recorded now (as log events applied to
        it are), and the spans item lists the call span as ``carried``
        (``audit`` then no longer counts it as without content). The
        ``call_llm`` span is listed (:data:`~.genai.adk.CARRIED`): sent
        again, it is known. One sent again is counted as a duplicate
        (``False``: not carried again).
        """
        state = self.state
        if wrapper.span_id in state.span_ids:
            self._sent_again(wrapper)
            return False
        span_id, bare = state.awaiting.pop(wrapper.span_id)
        turn = self._turn(wrapper)
        if bare:
            span = with_request(
                Span(trace_id=wrapper.trace_id, span_id=span_id), wrapper
            )
            call = read_call(span)
            if call.content:
                turn = self._said(span, call)
                self.carried.append(span_id)
                state.by_logs.discard(span_id)
        self._list_carrier(wrapper)
        self.last_turn = turn
        return True

    def _list_carrier(self, wrapper: Span) -> None:
        """List a ``call_llm`` span that carried its call: sent again, it is known."""
        self.listed.append((wrapper.trace_id, wrapper.span_id, CARRIED))
        self.state.span_ids.add(wrapper.span_id)

    def give(self, span_id: str) -> tuple[LoggedEvent, ...]:
        """Hand over a span's parked log events to the span's own session.

        They came before the span, and went to the session of their trace;
        the span went to another (its ``gen_ai.conversation.id``, which the
        log records do not carry). The item lists the span as ``joined``.
        """
        events = self.state.parked.pop(span_id, ())
        if events:
            self.joined.append(span_id)
        return events

    def join(self, span: Span, events: Sequence[LoggedEvent]) -> None:
        """Take a span's log events another session held (:meth:`give`).

        Parked here for the span (added next) to read, and listed in the
        item as this session's own (a copy: sent again, they are known). A
        span this session recorded before (sent again) takes them as events
        coming after it (:meth:`logs`): what they say is recorded now when
        its content comes by log events.
        """
        self.counts["joined"] += len(events)
        state = self.state
        if span.span_id in state.span_ids:
            self.logs(span.trace_id, span.span_id, events)
            return
        state.parked[span.span_id] = (*state.parked.get(span.span_id, ()), *events)
        state.log_prints.update(entry.print for entry in events)
        self.logged.extend(events)

    def finish(self) -> None:
        """List the spans or log events recorded (one ``item.recorded``)."""
        # What the batch left out goes in its one item: the log events' or the spans'.
        skipped = dict(sorted(self.skipped.items()))
        unasked, unanswered = self.without_inputs, self.without_outputs
        if self.logged or self.joined:
            logs = LogsListed(
                events=self.logged,
                applied=self.applied,
                skipped=skipped,
                without_inputs=unasked,
                without_outputs=unanswered,
                joined=self.joined,
                parked=list(dict.fromkeys(self.parked)),
            )
            self._item(LOGS_KIND, msgspec.json.encode(logs).decode())
            skipped, unasked, unanswered = {}, [], []
        if not self.listed:
            return
        listed = SpansListed(
            spans=self.listed,
            without_content=self.without,
            from_logs=self.from_logs,
            # The stand-ins and runs still awaiting the model's message at the
            # batch's end (what a receiver folding this item last must hold).
            stand_ins=[
                (call, version)
                for call, version in self.stand_ins
                if self.state.stand_ins.get(call) == version
            ],
            skipped=skipped,
            without_inputs=unasked,
            without_outputs=unanswered,
            without_result=[
                # A failure a later input's result is still to be read as: one
                # this batch answered, or whose call it saw made again, is not.
                (span, call, error if self.state.failed.get(call) == error else "")
                for span, call, error in self.without_result
            ],
            responses=self.responses,
            unpaired=[run for run in self.unpaired if run[0] in self.state.unpaired],
            parents=self.parents,
            carried=self.carried,
        )
        self._item(SPANS_KIND, msgspec.json.encode(listed).decode())

    def _item(self, kind: str, fields: str) -> None:
        # Not folded into the state again: add() and logs() put it there already.
        turn = self.last_turn
        if not turn:  # a batch of log events alone
            first = self.logged[0].span_id if self.logged else self.joined[0]
            turn = self._turn_of(first)
        self.events.append(
            ItemRecorded(
                turn_id=turn,
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

    def _call(self, span: Span, call: ModelCall) -> str:
        """Record a model call: what it said, and its ``model.called``."""
        return self._said(span, call, called=True)

    def _said(self, span: Span, call: ModelCall, *, called: bool = False) -> str:
        """Record what a call said (and, when ``called``, its ``model.called``).

        Without ``called``, the call's ``model.called`` is recorded already
        (its span came before its log events), and an empty input is skipped.
        """
        state = self.state
        if call.without_inputs:  # the question is not in the ledger: listed
            self.without_inputs.append(span.span_id)
        if call.without_outputs:  # nor here the answer
            self.without_outputs.append(span.span_id)
        if call.system is not None and call.system != state.system:
            self._emit(SystemPromptSet.of(call.system, turn_id=state.open_turn))
            self.skipped.update(call.system_skipped)
        elif call.system is None and not state.seen and state.system is None:
            # System instructions without text (hidden): counted once, at the
            # session's first call, as a recorded prompt's parts are.
            self.skipped.update(call.system_skipped)
        if called or call.inputs:
            self._inputs(span, call.inputs)
        turn = self._turn(span)
        if called:
            self._emit(self._model_called(call, turn))
        for said in call.outputs:
            if not said.text and not said.calls and NO_PARTS in said.skipped:
                # An answer sent without parts (LiteLLM's asking for a tool):
                # counted, not recorded as an empty message; the next call's
                # input brings it, with its calls.
                self.skipped.update(said.skipped)
                continue
            self._assistant(said, turn)
        self.counts["extra_choices"] += call.extra_choices
        return turn

    def _model_called(self, call: ModelCall, turn: str) -> ModelCalled:
        return ModelCalled(
            turn_id=turn,
            provider=call.provider[:200],
            model=call.model[:200],
            **call.usage._asdict(),
            cost_usd=self._cost(call),
            duration_ms=call.duration_ms,
            success=call.success,
            error=None if call.error is None else summarize(call.error),
        )

    def _inputs(self, span: Span, inputs: tuple[Said, ...]) -> None:
        """Record the input messages the session does not hold yet.

        Those after the overlap (:func:`_overlap`), and, before it, those a
        client put ahead of the messages the session holds (a summary of
        earlier turns, retrieved context) that the session does not hold. A
        tool result with an id is recorded unless the session holds its
        call's (see :func:`_answered_before`); one without an id is placed by
        the overlap, as a message is.
        """
        state = self.state
        walked, spoken, start, before = self._unwalked(inputs)
        known = set(state.seen) if before else set()
        users = 0
        called: set[str] = set()  # the ids of the calls recorded from walked
        for at, said in enumerate(walked):
            if isinstance(said, ToolSaid) and said.call_id:
                if said.call_id not in state.results and (
                    said.call_id in called or not _answered_before(walked, at)
                ):
                    self._result(said, self._turn(span), provenance="imported")
                continue
            spoken += 1
            if spoken <= start and (spoken > before or _print(said) in known):
                continue
            if isinstance(said, ToolSaid):
                self._result(said, self._turn(span), provenance="imported")
            elif isinstance(said, UserSaid):
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
                self.skipped.update(said.skipped)
            else:
                self._assistant(said, self._turn(span))
                called.update(c.id for c in said.calls)

    def _unwalked(
        self, inputs: tuple[Said, ...]
    ) -> tuple[Sequence[Said], int, int, int]:
        """What of ``inputs`` to walk, its spoken messages before it, the overlap.

        The overlap (:func:`_overlap`) is where the spoken messages (user and
        assistant, and tool results without an id) of ``inputs`` the session
        holds already end, and how many come before those (a client's own
        head: a summary, context). A call's input usually repeats the
        session's previous call's input (``state.said``) and adds to it. When
        the overlap covers that head, the head is not walked again: its
        messages are all in the session, and its tool results with an id were
        recorded when first seen, by their ids, which stay in
        ``state.results`` (unless a call's id was named again since: a call
        of its own, whose result is to come; then the head is walked, as a
        receiver that did not read the previous input walks it). Otherwise
        all of ``inputs`` is walked.
        """
        state = self.state
        head = len(state.said)
        walked: Sequence[Said] = inputs
        spoken = 0
        if head and inputs[:head] == state.said and _results_held(state):
            prints = state.said_prints + _prints(inputs[head:])
            start, before = _overlap(state.seen, prints)
            if start >= len(state.said_prints):
                walked = inputs[head:]
                spoken = len(state.said_prints)
        else:
            prints = _prints(inputs)
            start, before = _overlap(state.seen, prints)
        state.said = inputs
        state.said_prints = prints
        return walked, spoken, start, before

    def _assistant(self, said: AssistantSaid, turn: str) -> None:
        """Record a message the model said (see :meth:`_placed_after`)."""
        early = self._placed_after(said)
        self._message(said, turn)
        self.skipped.update(said.skipped)
        for result in early:
            self._emit(result)

    def _placed_after(self, said: AssistantSaid) -> list[ToolResultRecorded]:
        """Take out of the history what tool spans recorded before this message.

        A tool span that came before the model call's message (which came
        later, by log events, or by the next call's input when the call's
        span holds no answer) recorded the call's result, and the call itself
        when it said the arguments. Both are removed from the history
        (``items.removed``: the ledger keeps them); the results are returned,
        to be recorded again after the message that asked for them. A run
        without a call id that matched no call then (its result recorded under
        its span's id) is the call's when it is the one such run of the call's
        tool and arguments (as :meth:`_paired` pairs one after its call): its
        result is recorded again, as the call's.
        """
        state = self.state
        early: list[ToolResultRecorded] = []
        if not (state.stand_ins or state.early or state.unpaired) or not said.calls:
            return early  # the usual case: the model's message came first
        for call in said.calls:
            versions = []
            if (stand_in := state.stand_ins.get(call.id)) is not None:
                versions.append(stand_in)
            result = state.result_at.get(call.id)
            if result is not None and (stand_in is not None or call.id in state.early):
                versions.append(result[0])
                early.append(result[1])
            elif result is None and (run := self._run_of(call, said.calls)):
                version, ran = state.result_at[run]
                versions.append(version)
                early.append(msgspec.structs.replace(ran, call_id=call.id))
            for version in versions:
                self._emit(
                    ItemsRemoved(
                        first_version=version,
                        last_version=version,
                        framework=FRAMEWORK,
                        reason="placed after the model's message asking for it",
                    )
                )
        return early

    def _message(self, said: AssistantSaid, turn: str) -> None:
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
        self.skipped.update(said.skipped)
        if call_id in self.state.failed and not said.is_error:
            # Its run failed: the text the model was sent, else the run's error.
            error = said.content or self.state.failed[call_id]
            said = msgspec.structs.replace(said, is_error=True, content=error)
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

    def _tool(self, span: Span, run: ToolRun, turn: str) -> tuple[str, str]:
        """Record a tool run: its result, or the failure of a run without one.

        Returns the call's id (the span's own ``otlp-<span id>`` when it is
        not known) and, for a run of a known call that failed without its
        result, its error (for the result a later input holds), else ``""``.
        """
        known = run.call_id
        if not known or known not in self.state.names:
            # Without an id, or with one no message of the model's named (ADK
            # sends its own, adk-<uuid>, where the messages hold the model's):
            # the one call made that the run answers, when there is one.
            known = self._paired(run) or known
        call_id = known or f"otlp-{span.span_id}"
        said_by_span = known and known not in self.state.names
        if run.arguments is not None and said_by_span:
            # Only this span says the call was made (the model call asking for
            # it was recorded without content): its message, carrying the call.
            # A span without a call id cannot tell: its call is not recorded.
            call = ToolCallSaid(id=call_id, name=run.name, arguments=run.arguments)
            self._message(AssistantSaid(text="", calls=(call,)), turn)
            self.state.stand_ins[call_id] = self.state.version
            self.state.unsay(call_id, self.state.version)
            self.stand_ins.append((call_id, self.state.version))
        if call_id in self.state.results:
            return call_id, ""
        if run.result is None:
            if not known or run.success:
                return call_id, ""
            # Failed without its result (the conventions send a result on
            # success only): a later input's result is that failure.
            error = run.error or "error"
            self.state.failed[call_id] = error
            return call_id, error
        failed = not run.success
        said = ToolSaid(
            call_id=call_id,
            content=run.result if not failed else (run.result or run.error or ""),
            name=run.name,
            is_error=failed,
        )
        self._result(said, turn, provenance="executed")
        if not known and run.name and run.arguments is not None:
            sent = _sent(run.arguments, run.called_with)
            if not any(
                _answers(run.name, sent, tool, made) for tool, made in self.state.idless
            ):  # else the call it ran was said, without an id: none comes later
                self.state.unpaired[call_id] = (run.name, sent)
                self.unpaired.append((call_id, run.name, list(sent)))
        return call_id, ""

    def _run_of(self, call: ToolCallSaid, calls: Sequence[ToolCallSaid]) -> str:
        """The call id of the one unpaired run of a call's tool and arguments.

        ``""`` when none, or when several runs or several of the message's
        ``calls`` are alike: not guessed.
        """
        if not self.state.unpaired or not call.id or call.id in self.state.results:
            return ""
        found = [
            run
            for run, (tool, sent) in self.state.unpaired.items()
            if _answers(tool, sent, call.name, call.arguments)
        ]
        alike = [
            c
            for c in calls
            if _answers(c.name, (c.arguments,), call.name, call.arguments)
        ]
        return found[0] if len(found) == 1 and len(alike) == 1 else ""

    def _paired(self, run: ToolRun) -> str:
        """The id of the one call a tool run without an id answers, else ``""``.

        Some instrumentations send tool spans without the call's id (the
        OpenAI Agents SDK's under OpenInference, LangChain's under
        OpenLLMetry). Such a run answers a call the session made and holds
        no result of, of the run's name and its very arguments (the same
        text, or the same JSON value; or the keyword arguments of the
        tool's Python call its instrumentation recorded, ``called_with``);
        when exactly one call is so, it is that call. None, or several alike
        (parallel calls of one tool with the same arguments): not guessed.
        """
        if not run.name or run.arguments is None:
            return ""
        sent = _sent(run.arguments, run.called_with)
        found = [
            call_id
            for call_id, (name, arguments) in self.state.pending.items()
            if _answers(run.name, sent, name, arguments)
        ]
        return found[0] if len(found) == 1 else ""

    def _cost(self, call: ModelCall) -> float:
        if call.model not in self.pricing:
            return 0.0  # unpriced: what price_usage answers, without its work
        usage = TokenUsage(model=call.model, **call.usage._asdict())
        try:
            return price_usage(usage, self.pricing).cost_usd
        except PricingError:
            return 0.0


_HIDDEN: Final = {"u": "U", "a": "A"}
"""The role of the print of a message whose text its instrumentation hid
(:data:`~.genai.REDACTED`), by the role of a message held: such a print
matches a held message of that role and calls, whatever its text (the session
may hold the text, from the output that said it)."""
_PARTLESS: Final = "N"
"""The role of the print of an assistant message sent without parts (its
instrumentation could not write them: a legacy function call, LiteLLM's call):
such a print matches a held assistant message of any text and calls."""

_HIDDEN_ROLES: Final = frozenset({*_HIDDEN.values(), _PARTLESS})


def _results_held(state: SessionState) -> bool:
    """Whether the session holds the results the last input read gave by id.

    None of those calls was named again since (a call of its own).
    """
    return all(
        said.call_id in state.results
        for said in state.said
        if isinstance(said, ToolSaid) and said.call_id
    )


def _answered_before(walked: Sequence[Said], at: int) -> bool:
    """Whether the result at ``at`` answered an earlier call of its id.

    It did when ``walked`` calls that id again after it: an id named again
    (ADK's ``get_weather_0``) is a call of its own, answered by the result
    after it. So a walk of an input holding a session's earlier calls of the
    id, with their results, passes over those results.
    """
    call_id = walked[at].call_id  # type: ignore[union-attr]
    return any(
        type(said) is AssistantSaid and any(c.id == call_id for c in said.calls)
        for said in walked[at + 1 :]
    )


def _sent(arguments: str, called_with: str | None) -> tuple[str, ...]:
    """What a tool run was sent: its arguments, and its Python call's.

    The keyword arguments of the tool's Python call count when its
    instrumentation recorded them (``called_with``).
    """
    return (arguments,) if called_with is None else (arguments, called_with)


def _answers(tool: str, sent: Sequence[str], name: str, arguments: str) -> bool:
    """Whether a run of ``tool`` sent ``sent`` ran the call ``name(arguments)``.

    The same tool, and the call's very arguments among what the run was sent
    (:func:`_sent`, :func:`_same_arguments`).
    """
    return tool == name and any(_same_arguments(arguments, a) for a in sent)


def _same_arguments(made: str, ran: str) -> bool:
    """Whether a call's arguments and a tool run's are the same text or JSON value."""
    if made == ran:
        return True
    try:
        return bool(msgspec.json.decode(made) == msgspec.json.decode(ran))
    except (msgspec.DecodeError, RecursionError):
        return False


def _prints(inputs: Sequence[Said]) -> list[_Print]:
    """The prints of the spoken messages: all but tool results with an id."""
    return [_print(s) for s in inputs if type(s) is not ToolSaid or not s.call_id]


def _print(said: Said) -> _Print:
    if isinstance(said, ToolSaid):
        return ("r", said.content, ())  # a result without an id
    hidden = REDACTED_PART in said.skipped
    if type(said) is UserSaid:
        return ("U" if hidden else "u", said.text, ())
    calls = said.calls  # type: ignore[union-attr]
    if not calls and not said.text and NO_PARTS in said.skipped:
        return (_PARTLESS, "", ())
    ids = tuple([c.id or UNKNOWN for c in calls]) if calls else ()
    return ("A" if hidden else "a", said.text, ids)


def _same(held: Sequence[_Print], sent: Sequence[_Print]) -> bool:
    """Whether ``sent`` is ``held`` (a hidden text matching any text).

    An assistant message sent without parts matches any assistant message.
    """
    return len(held) == len(sent) and all(
        h == s
        or (_HIDDEN.get(h[0]) == s[0] and h[2] == s[2])
        or (s[0] == _PARTLESS and h[0] in ("a", "A"))
        for h, s in zip(held, sent, strict=True)
    )


def _overlap(seen: Sequence[_Print], prints: Sequence[_Print]) -> tuple[int, int]:
    """Where the messages of ``prints`` the session holds end, and start.

    See :func:`_overlap_of`; a print of a hidden text (:data:`_HIDDEN`)
    matches a held message of its role and calls.
    """
    size = min(len(seen), len(prints))
    if size and seen[len(seen) - size :] == prints[:size]:
        return size, 0  # the usual call: its input continues the session
    if any(p[0] in _HIDDEN_ROLES for p in prints):
        return _overlap_of(seen, prints, _same)
    return _overlap_of(seen, prints, operator.eq)


def _overlap_of(
    seen: Sequence[_Print],
    prints: Sequence[_Print],
    same: Callable[[Sequence[_Print], Sequence[_Print]], bool],
) -> tuple[int, int]:
    """Where the messages of ``prints`` the session holds end, and start.

    The longest tail of ``seen`` that is a head of ``prints`` (a client that
    trimmed its history still matches): ``(its length, 0)``. Failing that, a
    client put messages of its own ahead of the conversation (a summary of the
    turns it dropped, retrieved context): the longest tail of ``seen`` found
    later in ``prints``, at its last place: ``(where it ends, where it
    starts)``. Else none of the session's last messages is in ``prints`` (the
    client dropped them all, or sends the call again): the messages at its head
    the session holds (the same summary, the same question) are held, and what
    follows is new: ``(how many, 0)``.
    """
    for size in range(min(len(seen), len(prints)), 0, -1):
        if same(seen[len(seen) - size :], prints[:size]):
            return size, 0
    for size in range(min(len(seen), len(prints) - 1), 0, -1):
        tail = seen[len(seen) - size :]
        for at in range(len(prints) - size, 0, -1):
            if same(tail, prints[at : at + size]):
                return at + size, at
    held = set(seen)
    for at, found in enumerate(prints):
        if found not in held and not (
            found[0] in _HIDDEN_ROLES and any(same([h], [found]) for h in held)
        ):
            return at, 0
    return len(prints), 0


def span_event(entry: LoggedEvent) -> SpanEvent:
    """A recorded log event as the span event it stands for (its body a field)."""
    return SpanEvent(
        name=entry.name,
        time_ns=entry.time_ns,
        attributes={**entry.attributes, "body": entry.body},
    )
