"""OpenTelemetry spans by the GenAI semantic conventions, from the ledger.

Spans are derived from recorded events, so each is linked to the ledger
position it came from (``turnledger.ledger.position``, ``turnledger.ledger.stream``):

- a turn (``turn.started`` .. ``turn.completed``/``turn.failed``) is an
  ``invoke_agent {agent}`` span (``gen_ai.operation.name = invoke_agent``,
  ``gen_ai.agent.name``, ``gen_ai.conversation.id`` = the session key);
- a ``model.called`` event is a ``chat {model}`` client span, a child of its turn
  (``gen_ai.provider.name``, ``gen_ai.request.model``, ``gen_ai.response.model``,
  ``gen_ai.usage.input_tokens``, ``gen_ai.usage.output_tokens``,
  ``gen_ai.usage.cache_read.input_tokens``,
  ``gen_ai.usage.cache_creation.input_tokens``,
  ``gen_ai.usage.reasoning.output_tokens`` (each 0 when the provider reported
  none), ``error.type`` for a failed call), lasting the call's recorded
  duration;
- a ``tool_result.recorded`` event is an ``execute_tool {tool}`` span
  (``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``gen_ai.tool.type``).

Every name, id and key an event carries that is put on a span (span names
included: agent, session key, turn id and origin, provider, model, tool, call
id, failure kind) is scrubbed of credentials and bounded to 64 characters, like
the observer's labels.

Content is off by default: no prompt, answer, tool argument or output is put on
a span. With ``[telemetry] capture_content = true`` the turn span carries the
user input and the chat span the answer (``gen_ai.input.messages`` /
``gen_ai.output.messages``), both scrubbed of credentials and bounded to 200
characters.

``[telemetry]`` enables it: ``console = true`` prints spans to stdout,
``otlp_endpoint = "http://host:4318/v1/traces"`` sends them over OTLP/HTTP (the
``opentelemetry-exporter-otlp-proto-http`` package). The runtime exports the
events a run appended when it closes.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import (
    AssistantMessage,
    ModelCalled,
    SessionOpened,
    ToolResultRecorded,
    TurnCompleted,
    TurnFailed,
    TurnStarted,
)
from turnledger.ledger.store import EventStore
from turnledger.pipeline.config.sections import TelemetryConfig
from turnledger.pipeline.errors import PipelineError
from turnledger.policies.scrubbing import scrub_text, summarize

TRACER_NAME: Final = "turnledger"
_PAGE: Final = 2_000


class TelemetryError(PipelineError, ValueError):
    """Telemetry is configured but cannot run (a package is missing)."""


def _nanos(moment: datetime) -> int:
    at = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment
    return (at - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1) * 1000


def _messages(role: str, text: str) -> str:
    content = summarize(scrub_text(text))
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": content}]}])


_LABEL_LIMIT: Final = 64


def _label(text: str) -> str:
    """A name, id or key put on a span: scrubbed and bounded (64 characters)."""
    return summarize(text, _LABEL_LIMIT) if text else ""


def _linked(recorded: Recorded) -> dict[str, Any]:
    return {
        "turnledger.ledger.position": recorded.position,
        "turnledger.ledger.stream": str(recorded.stream_id),
    }


class _Spans:
    """Turns a stream of recorded events into spans on a tracer."""

    def __init__(self, tracer: Any, trace: Any, *, capture_content: bool) -> None:
        self.tracer = tracer
        self.trace = trace
        self.capture = capture_content
        self.sessions: dict[object, tuple[str, str]] = {}
        self.turns: dict[tuple[object, str], Any] = {}
        self.last_chat: dict[tuple[object, str], tuple[Any, int]] = {}
        self.started = 0

    def _start(self, name: str, start: int, **kw: Any) -> Any:
        self.started += 1
        return self.tracer.start_span(name, start_time=start, **kw)

    def _child_of(self, recorded: Recorded, turn_id: str) -> Any:
        parent = self.turns.get((recorded.stream_id, turn_id))
        return None if parent is None else self.trace.set_span_in_context(parent)

    def feed(self, recorded: Recorded) -> None:
        event, at = recorded.event, _nanos(recorded.recorded_at)
        match event:
            case SessionOpened(agent=agent, session_key=key):
                self.sessions[recorded.stream_id] = (agent, key)
            case TurnStarted():
                self._turn(recorded, event, at)
            case ModelCalled():
                self._chat(recorded, event, at)
            case AssistantMessage(turn_id=turn_id, text=text) if self.capture:
                pending = self.last_chat.pop((recorded.stream_id, turn_id), None)
                if pending is not None:
                    span, end = pending
                    if text:
                        span.set_attribute(
                            "gen_ai.output.messages", _messages("assistant", text)
                        )
                    span.end(end_time=end)
            case ToolResultRecorded():
                self._tool(recorded, event, at)
            case TurnCompleted(turn_id=turn_id) | TurnFailed(turn_id=turn_id):
                self._end_turn(recorded, turn_id, at)
            case _:
                pass

    def _turn(self, recorded: Recorded, event: TurnStarted, at: int) -> None:
        agent, key = self.sessions.get(recorded.stream_id, ("", ""))
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": _label(agent),
            "gen_ai.conversation.id": _label(key),
            "turnledger.turn.id": _label(event.turn_id),
            "turnledger.turn.origin": _label(event.origin),
            **_linked(recorded),
        }
        if self.capture:
            attributes["gen_ai.input.messages"] = _messages("user", event.user_input)
        span = self._start(f"invoke_agent {_label(agent)}", at, attributes=attributes)
        self.turns[(recorded.stream_id, event.turn_id)] = span

    def _chat(self, recorded: Recorded, event: ModelCalled, at: int) -> None:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": _label(event.provider),
            "gen_ai.request.model": _label(event.model),
            "gen_ai.response.model": _label(event.model),
            "gen_ai.usage.input_tokens": event.input_tokens,
            "gen_ai.usage.output_tokens": event.output_tokens,
            "gen_ai.usage.cache_read.input_tokens": event.cached_input_tokens,
            "gen_ai.usage.cache_creation.input_tokens": event.cache_write_tokens,
            "gen_ai.usage.reasoning.output_tokens": event.reasoning_tokens,
            "turnledger.cost_usd": event.cost_usd,
            **_linked(recorded),
        }
        if not event.success:
            attributes["error.type"] = _label((event.error or "error").split(":")[0])
        span = self._start(
            f"chat {_label(event.model)}",
            at - int(event.duration_ms * 1_000_000),
            context=self._child_of(recorded, event.turn_id),
            kind=self.trace.SpanKind.CLIENT,
            attributes=attributes,
        )
        if not event.success:
            span.set_status(self.trace.Status(self.trace.StatusCode.ERROR))
        if self.capture and event.success:  # ended with its answer, added then
            self.last_chat[(recorded.stream_id, event.turn_id)] = (span, at)
        else:
            span.end(end_time=at)

    def _tool(self, recorded: Recorded, event: ToolResultRecorded, at: int) -> None:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": _label(event.tool),
            "gen_ai.tool.call.id": _label(event.call_id),
            "gen_ai.tool.type": "function",
            **_linked(recorded),
        }
        if not event.success:
            attributes["error.type"] = "tool_error"
        span = self._start(
            f"execute_tool {_label(event.tool)}",
            at,
            context=self._child_of(recorded, event.turn_id),
            attributes=attributes,
        )
        span.end(end_time=at)

    def _end_turn(self, recorded: Recorded, turn_id: str, at: int) -> None:
        pending = self.last_chat.pop((recorded.stream_id, turn_id), None)
        if pending is not None:
            pending[0].end(end_time=pending[1])
        span = self.turns.pop((recorded.stream_id, turn_id), None)
        if span is None:
            return
        if isinstance(recorded.event, TurnFailed):
            span.set_attribute("error.type", _label(recorded.event.kind))
            span.set_status(self.trace.Status(self.trace.StatusCode.ERROR))
        span.end(end_time=at)


def _trace() -> Any:
    try:
        return importlib.import_module("opentelemetry.trace")
    except ImportError as e:
        msg = "Expected opentelemetry-api for [telemetry], found it not installed"
        raise TelemetryError(msg) from e


def emit_spans(
    events: Iterable[Recorded], tracer: Any, *, capture_content: bool = False
) -> int:
    """Emit GenAI spans for these events (in position order) on ``tracer``.

    Returns:
        How many spans were started (turns still open at the end are ended at
        their last event).
    """
    spans = _Spans(tracer, _trace(), capture_content=capture_content)
    last = 0
    for recorded in events:
        spans.feed(recorded)
        last = _nanos(recorded.recorded_at)
    for chat, end in spans.last_chat.values():
        chat.end(end_time=end)
    for span in spans.turns.values():
        span.end(end_time=last)
    return spans.started


def _events_after(store: EventStore, after: int) -> Iterator[Recorded]:
    return store.iter_all(after=after, page_size=_PAGE)


def tracer_provider(settings: TelemetryConfig) -> Any | None:
    """Build the SDK tracer provider ``[telemetry]`` asks for (``None``: off).

    Raises:
        TelemetryError: A needed package is not installed.
    """
    if not (settings.console or settings.otlp_endpoint):
        return None
    try:
        sdk = importlib.import_module("opentelemetry.sdk.trace")
        export = importlib.import_module("opentelemetry.sdk.trace.export")
        resources = importlib.import_module("opentelemetry.sdk.resources")
    except ImportError as e:
        msg = "Expected opentelemetry-sdk for [telemetry], found it not installed"
        raise TelemetryError(msg) from e
    resource = resources.Resource.create({"service.name": settings.service_name})
    provider = sdk.TracerProvider(resource=resource)
    if settings.console:
        provider.add_span_processor(
            export.SimpleSpanProcessor(export.ConsoleSpanExporter(out=sys.stdout))
        )
    if settings.otlp_endpoint:
        try:
            otlp = importlib.import_module(
                "opentelemetry.exporter.otlp.proto.http.trace_exporter"
            )
        except ImportError as e:
            msg = (
                "telemetry.otlp_endpoint: expected the "
                "opentelemetry-exporter-otlp-proto-http package, found it not installed"
            )
            raise TelemetryError(msg) from e
        exporter = otlp.OTLPSpanExporter(endpoint=settings.otlp_endpoint)
        provider.add_span_processor(export.BatchSpanProcessor(exporter))
    return provider


def export_run(
    store: EventStore, settings: TelemetryConfig, *, after: int, provider: Any = None
) -> int:
    """Export the spans of the events after ``after`` (a run's), then flush.

    Args:
        store: The ledger.
        settings: ``[telemetry]``.
        after: The last position before the run.
        provider: A tracer provider to use (default: :func:`tracer_provider`).

    Returns:
        How many spans were emitted (0 when telemetry is off).
    """
    made = provider if provider is not None else tracer_provider(settings)
    if made is None:
        return 0
    tracer = made.get_tracer(TRACER_NAME)
    count = emit_spans(
        _events_after(store, after), tracer, capture_content=settings.capture_content
    )
    made.force_flush()
    return count
