"""The observer view: a bounded, scrubbed timeline of what happened, per stream.

Each ledger event becomes zero or more :class:`ObserverItem` (kinds modelled on
ZeroClaw's ``ObserverEvent``, reference §8.2): session and turn start/end, model
request/response, tool call, tool result, memory recall/store/forget/supersede,
knowledge capture, media attachment, history trim and errors. Items carry ids,
counts, sizes, durations, flags and text that went through
:func:`policies.scrubbing.summarize` (scrubbed, at most 200 characters plus an
ellipsis). They never carry raw payloads: no user input, assistant text, tool
output, memory content, node names or file names. Unlike ZeroClaw, tool-call
arguments are scrubbed and bounded too (§8.3 [gap]).

A state is kept per stream (a session stream, or the stream a memory event was
written to) and holds its newest ``limit`` items (default 200) plus a count of
those it dropped, so the loss is visible. A view with another limit has another
name (``observer_view_<limit>``), so changing the limit builds fresh states
rather than mixing bounds.

:func:`render_item` turns an item into a structlog event dict,
:func:`emit_observer_items` logs items through any structlog-like logger, and
:func:`export_spans` sends them to OpenTelemetry when it is installed.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Any, Final, Literal, Protocol, TypeAlias

import msgspec

from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import (
    EVENT_TYPES,
    AssistantMessage,
    Event,
    HistoryTrimmed,
    KnowledgeCaptured,
    MediaAttached,
    MemoryForgotten,
    MemoryRecalled,
    MemoryStored,
    MemorySuperseded,
    ModelCalled,
    PromptAssembled,
    SessionOpened,
    ToolResultRecorded,
    TurnCompleted,
    TurnFailed,
    TurnStarted,
)
from turnledger.policies.lifecycle import LifecycleDeclaration
from turnledger.policies.scrubbing import (
    ELLIPSIS,
    SUMMARY_LIMIT,
    scrub_text,
    summarize,
)
from turnledger.policies.structured_scrubbing import JsonValue, scrub_json

ObserverKind: TypeAlias = Literal[
    "session_start",
    "turn_start",
    "llm_request",
    "llm_response",
    "tool_call",
    "tool_result",
    "memory_recall",
    "memory_store",
    "memory_forget",
    "memory_supersede",
    "knowledge_capture",
    "media_attached",
    "history_trimmed",
    "turn_end",
    "error",
]
"""What an observer item reports."""

DEFAULT_LIMIT: Final = 200
"""Items kept per stream by default."""

ID_LIMIT: Final = 64
"""The character bound of an id, name or label (before the ellipsis)."""

MAX_KEYS: Final = 16
"""Memory keys listed at most per recall item."""

NOT_JSON: Final = "[arguments withheld: not JSON]"
"""The summary of tool-call arguments that do not parse as JSON."""


class ObserverItem(msgspec.Struct, frozen=True, kw_only=True):
    """One observer event: ids, numbers and scrubbed, bounded text only.

    Attributes:
        kind: What it reports.
        position: The ledger position of the event it comes from.
        at: When that event was recorded (UTC).
        turn_id: The turn, when there is one.
        name: The model, tool, memory backend, relation or failing component.
        call_id: The tool call's id, for tool calls and results.
        success: Whether the call or turn succeeded, when that applies.
        summary: Scrubbed, bounded text (arguments, an error, a query, a reason).
        figures: Counts, sizes, tokens, durations (ms) and costs (USD).
        labels: Short scrubbed, bounded values (origin, provider, mime...).
        keys: Memory keys involved (scrubbed, bounded, at most ``MAX_KEYS``).
    """

    kind: ObserverKind
    position: int
    at: datetime
    turn_id: str = ""
    name: str = ""
    call_id: str = ""
    success: bool | None = None
    summary: str = ""
    figures: dict[str, int | float] = msgspec.field(default_factory=dict)
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    keys: tuple[str, ...] = ()


class ObserverState(msgspec.Struct, frozen=True, kw_only=True):
    """The timeline of one stream.

    Attributes:
        agent: The agent alias (from ``session.opened``, or a memory event).
        session_key: The session key, for session streams (bounded).
        channel: The channel, for session streams (bounded).
        items: The newest items, oldest first.
        dropped: How many older items the bound dropped.
    """

    agent: str = ""
    session_key: str = ""
    channel: str = ""
    items: tuple[ObserverItem, ...] = ()
    dropped: int = 0


def _short(text: str) -> str:
    return summarize(text, ID_LIMIT) if text else ""


def _text(text: str | None) -> str:
    return summarize(text) if text else ""


def _item(recorded: Recorded, kind: ObserverKind, **fields: Any) -> ObserverItem:
    turn_id = getattr(recorded.event, "turn_id", "")
    return ObserverItem(
        kind=kind,
        position=recorded.position,
        at=recorded.recorded_at,
        turn_id=_short(turn_id),
        **fields,
    )


def observe(recorded: Recorded) -> tuple[ObserverItem, ...]:
    """Return the observer items of one recorded event (pure).

    Args:
        recorded: Any recorded event.

    Returns:
        Its items: one per event, one per tool call of an assistant message (none
        for a message without tool calls), two for a failed turn (its end and its
        error).
    """
    return _turn_items(recorded) or _memory_items(recorded)


def _turn_items(recorded: Recorded) -> tuple[ObserverItem, ...]:
    """Items of the session, turn, model and tool events."""
    match recorded.event:
        case SessionOpened(channel=channel):
            return (_item(recorded, "session_start", labels=_labels(channel=channel)),)
        case TurnStarted() as started:
            return (_turn_started(recorded, started),)
        case PromptAssembled() as prompt:
            return (_prompt_assembled(recorded, prompt),)
        case ModelCalled() as call:
            return (_model_called(recorded, call),)
        case AssistantMessage() as message:
            return _tool_calls(recorded, message)
        case ToolResultRecorded() as result:
            return (_tool_result(recorded, result),)
        case HistoryTrimmed() as trim:
            return (_history_trimmed(recorded, trim),)
        case TurnCompleted(iterations=iterations, duration_ms=duration):
            figures = {"iterations": iterations, "duration_ms": duration}
            return (_item(recorded, "turn_end", success=True, figures=figures),)
        case TurnFailed(kind=failure, error=error):
            labels = _labels(failure=failure)
            return (
                _item(recorded, "turn_end", success=False, labels=labels),
                _item(recorded, "error", name="turn", summary=_text(error)),
            )
        case _:
            return ()


def _memory_items(recorded: Recorded) -> tuple[ObserverItem, ...]:
    """Items of the memory, knowledge and media events (never their content)."""
    match recorded.event:
        case MemoryRecalled() as recall:
            return (_memory_recalled(recorded, recall),)
        case MemoryStored(key=key, category=category, source=source):
            labels = _labels(category=category, source=source)
            return (
                _item(recorded, "memory_store", keys=(_short(key),), labels=labels),
            )
        case MemoryForgotten(key=key, source=source, reason=reason):
            return (_memory_audit(recorded, "memory_forget", key, source, reason),)
        case MemorySuperseded(key=key, source=source, reason=reason):
            return (_memory_audit(recorded, "memory_supersede", key, source, reason),)
        case KnowledgeCaptured(relation=relation):
            return (_item(recorded, "knowledge_capture", name=_short(relation)),)
        case MediaAttached() as media:
            return (_media_attached(recorded, media),)
        case _:
            return ()


def _memory_audit(
    recorded: Recorded, kind: ObserverKind, key: str, source: str, reason: str
) -> ObserverItem:
    labels = _labels(source=source)
    return _item(
        recorded, kind, keys=(_short(key),), summary=_text(reason), labels=labels
    )


def _labels(**values: str) -> dict[str, str]:
    return {name: _short(value) for name, value in values.items() if value}


def _turn_started(recorded: Recorded, event: TurnStarted) -> ObserverItem:
    figures = {
        "input_chars": len(event.user_input),
        "attachments": len(event.attachments),
    }
    return _item(
        recorded, "turn_start", figures=figures, labels=_labels(origin=event.origin)
    )


def _prompt_assembled(recorded: Recorded, event: PromptAssembled) -> ObserverItem:
    figures = {
        "iteration": event.iteration,
        "sections": len(event.sections),
        "messages": sum(section.messages for section in event.sections),
        "chars": sum(section.chars for section in event.sections),
        "estimated_tokens": event.estimated_tokens,
    }
    return _item(recorded, "llm_request", figures=figures)


def _model_called(recorded: Recorded, event: ModelCalled) -> ObserverItem:
    figures = {
        "iteration": event.iteration,
        "input_tokens": event.input_tokens,
        "output_tokens": event.output_tokens,
        "cached_input_tokens": event.cached_input_tokens,
        "cache_write_tokens": event.cache_write_tokens,
        "reasoning_tokens": event.reasoning_tokens,
        "cost_usd": event.cost_usd,
        "duration_ms": event.duration_ms,
    }
    return _item(
        recorded,
        "llm_response",
        name=_short(event.model),
        success=event.success,
        summary=_text(event.error),
        figures=figures,
        labels=_labels(provider=event.provider),
    )


def _tool_calls(
    recorded: Recorded, event: AssistantMessage
) -> tuple[ObserverItem, ...]:
    return tuple(
        _item(
            recorded,
            "tool_call",
            name=_short(call.name),
            call_id=_short(call.id),
            summary=_arguments_summary(call.arguments),
            figures={
                "iteration": event.iteration,
                "argument_chars": len(call.arguments),
            },
        )
        for call in event.tool_calls
    )


def _arguments_summary(arguments: str) -> str:
    """Return scrubbed, bounded JSON arguments, or a marker when not JSON.

    The text is scrubbed first (secrets anywhere, object keys included), then
    parsed: every secret-looking key loses its whole value. Text that does not
    parse is withheld, size aside: the text patterns cannot see a secret key's
    value when its quote is unclosed (arguments cut mid-string).
    """
    if not arguments.strip():
        return ""
    try:
        value: JsonValue = msgspec.json.decode(scrub_text(arguments))
    except (msgspec.DecodeError, UnicodeEncodeError, RecursionError):
        return NOT_JSON  # RecursionError: nested past the decoder's depth
    # Bounded without another text pass: "[REDACTED]" is itself long enough to
    # look like a credential value and would be mangled.
    scrubbed = msgspec.json.encode(scrub_json(value)).decode()
    if len(scrubbed) <= SUMMARY_LIMIT:
        return scrubbed
    return scrubbed[:SUMMARY_LIMIT].rstrip() + ELLIPSIS


def _tool_result(recorded: Recorded, event: ToolResultRecorded) -> ObserverItem:
    figures = {
        "output_chars": len(event.output),
        "original_chars": event.original_chars,
        "kept_chars": event.kept_chars,
    }
    labels = _labels(
        provenance=event.provenance, truncated=str(event.truncated).lower()
    )
    return _item(
        recorded,
        "tool_result",
        name=_short(event.tool),
        call_id=_short(event.call_id),
        success=event.success,
        summary=_text(event.error),
        figures=figures,
        labels=labels,
    )


def _memory_recalled(recorded: Recorded, event: MemoryRecalled) -> ObserverItem:
    keys = tuple(_short(entry.key) for entry in event.entries[:MAX_KEYS])
    figures = {"entries": len(event.entries), "injected_chars": event.injected_chars}
    return _item(
        recorded,
        "memory_recall",
        name=_short(event.backend),
        # Never the query: older events recorded (scrubbed) user text there.
        figures=figures,
        keys=keys,
    )


def _media_attached(recorded: Recorded, event: MediaAttached) -> ObserverItem:
    # The file name and summary are user content: only the kind, type, size and
    # a digest prefix are shown.
    labels = _labels(media=event.kind, mime=event.mime, sha256=event.sha256[:16])
    figures = {"size_bytes": event.size_bytes}
    return _item(recorded, "media_attached", figures=figures, labels=labels)


def _history_trimmed(recorded: Recorded, event: HistoryTrimmed) -> ObserverItem:
    figures = {
        "dropped_messages": event.dropped_messages,
        "dropped_turns": event.dropped_turns,
        "kept_turns": event.kept_turns,
        "tokens_before": event.tokens_before,
        "tokens_after": event.tokens_after,
    }
    return _item(
        recorded, "history_trimmed", summary=_text(event.reason), figures=figures
    )


def _learn(state: ObserverState, event: Event) -> ObserverState:
    """Remember who a stream belongs to."""
    match event:
        case SessionOpened(agent=agent, session_key=key, channel=channel):
            return msgspec.structs.replace(
                state, agent=agent, session_key=_short(key), channel=_short(channel)
            )
        case (
            MemoryStored(agent=agent)
            | MemoryForgotten(agent=agent)
            | MemorySuperseded(agent=agent)
            | KnowledgeCaptured(agent=agent)
        ) if not state.agent:
            return msgspec.structs.replace(state, agent=agent)
        case _:
            return state


class ObserverView:
    """The observer projection: one bounded timeline per stream.

    Args:
        limit: Items kept per stream (>= 1); it is part of the name unless it
            is the default.

    Raises:
        ValueError: ``limit`` is below 1.
    """

    state_type: type[ObserverState] = ObserverState
    event_types: tuple[type[Event], ...] = EVENT_TYPES
    lifecycle: LifecycleDeclaration = LifecycleDeclaration(
        surface="Logs / observer",
        owner="projections.observer (ObserverView fold; structlog/OTel emitters)",
        durability="log",
        scope="session",
        reviewers_check=(
            "Logs and observer events are evidence and diagnostics, not memory. "
            "They carry ids, counts, durations, flags and scrubbed summaries of at "
            "most 200 characters: tool-call arguments and errors included, and "
            "never user input, assistant text, tool output or memory content."
        ),
    )

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        if limit < 1:
            msg = f"Expected an observer limit >= 1, found {limit}"
            raise ValueError(msg)
        self.limit = limit
        self.name = "observer_view"
        if limit != DEFAULT_LIMIT:
            self.name = f"observer_view_{limit}"

    def keys(self, recorded: Recorded) -> tuple[str, ...]:
        """Return the stream's key (every event is observed on its stream)."""
        return (str(recorded.stream_id),)

    def initial(self, key: str) -> ObserverState:  # noqa: ARG002 - same for all keys
        """Return an empty timeline."""
        return ObserverState()

    def evolve(self, state: ObserverState, recorded: Recorded) -> ObserverState:
        """Append the event's items, dropping the oldest beyond the limit."""
        items = observe(recorded)
        state = _learn(state, recorded.event)
        if not items:
            return state
        kept = (*state.items, *items)
        excess = max(0, len(kept) - self.limit)
        return msgspec.structs.replace(
            state, items=kept[excess:], dropped=state.dropped + excess
        )


OBSERVER_VIEW: Final = ObserverView()
"""The observer projection with the default limit."""


def timeline(
    states: Mapping[str, ObserverState],
    *,
    agent: str | None = None,
    limit: int = DEFAULT_LIMIT,
) -> tuple[ObserverItem, ...]:
    """Return the newest items of several streams, merged in ledger order.

    Args:
        states: Observer states by stream id.
        agent: Only streams of this agent; all when ``None``.
        limit: Items returned at most (the newest ones).

    Returns:
        Items sorted by position, oldest first.
    """
    merged = sorted(
        (
            item
            for state in states.values()
            if agent in (None, state.agent)
            for item in state.items
        ),
        key=lambda item: item.position,
    )
    return tuple(merged[-limit:]) if limit > 0 else ()


def render_item(item: ObserverItem) -> dict[str, Any]:
    """Return an item as a structlog event dict (``event`` is ``observer.<kind>``).

    Labels and figures become top-level fields; empty optional fields are left
    out; ``at`` is an ISO 8601 string and ``keys`` a list.
    """
    fields: dict[str, Any] = {
        "event": f"observer.{item.kind}",
        "position": item.position,
        "at": item.at.isoformat(),
    }
    optional = {"turn_id": item.turn_id, "name": item.name, "call_id": item.call_id}
    fields.update((name, value) for name, value in optional.items() if value)
    if item.success is not None:
        fields["success"] = item.success
    if item.summary:
        fields["summary"] = item.summary
    if item.keys:
        fields["keys"] = list(item.keys)
    fields.update(item.labels)
    fields.update(item.figures)
    return fields


class ObserverLogger(Protocol):
    """What :func:`emit_observer_items` needs of a logger (a structlog one fits)."""

    def info(self, event: str, **kw: Any) -> Any:
        """Log at info level."""

    def warning(self, event: str, **kw: Any) -> Any:
        """Log at warning level."""


def emit_observer_items(logger: ObserverLogger, items: Iterable[ObserverItem]) -> int:
    """Log observer items: failures and errors at warning level, the rest at info.

    Args:
        logger: A structlog logger (or anything with ``info`` and ``warning``).
        items: The items, e.g. from :func:`observe` or a state.

    Returns:
        How many items were logged.
    """
    count = 0
    for item in items:
        fields = render_item(item)
        event = fields.pop("event")
        failed = item.kind == "error" or item.success is False
        (logger.warning if failed else logger.info)(event, **fields)
        count += 1
    return count


class OpenTelemetryNotInstalledError(ImportError):
    """The optional ``opentelemetry-api`` package is not installed."""


def _otel_trace() -> ModuleType:
    try:
        return importlib.import_module("opentelemetry.trace")
    except ImportError as e:
        msg = (
            "Expected the opentelemetry-api package for observer spans, found it "
            "not installed (pip install opentelemetry-api)"
        )
        raise OpenTelemetryNotInstalledError(msg) from e


def _nanos(moment: datetime) -> int:
    at = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment
    return (at - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1) * 1000


def export_spans(
    items: Iterable[ObserverItem], *, tracer_name: str = "turnledger.observer"
) -> int:
    """Send a stream's items to OpenTelemetry as spans.

    A ``turn_start`` opens a ``turn`` span that its ``turn_end`` closes; every
    other item becomes an ``observer.<kind>`` span, a child of its turn's span
    when that is open, ending at its recording time and lasting its
    ``duration_ms`` when it has one. Attributes are :func:`render_item`'s fields,
    so spans carry nothing a log line would not.

    Args:
        items: Items of one stream, oldest first.
        tracer_name: The instrumentation name of the tracer.

    Returns:
        How many spans were started.

    Raises:
        OpenTelemetryNotInstalledError: ``opentelemetry-api`` is not installed.
    """
    trace = _otel_trace()
    tracer = trace.get_tracer(tracer_name)
    open_turns: dict[str, Any] = {}
    started = 0
    last = 0
    for item in items:
        end = last = _nanos(item.at)
        attributes = {k: v for k, v in render_item(item).items() if k != "event"}
        if item.kind == "turn_end" and item.turn_id in open_turns:
            span = open_turns.pop(item.turn_id)
            span.set_attributes(attributes)
            span.end(end_time=end)
            continue
        parent = open_turns.get(item.turn_id)
        context = None if parent is None else trace.set_span_in_context(parent)
        start = end - int(float(item.figures.get("duration_ms", 0)) * 1_000_000)
        name = "turn" if item.kind == "turn_start" else f"observer.{item.kind}"
        span = tracer.start_span(
            name, context=context, start_time=start, attributes=attributes
        )
        started += 1
        if item.kind == "turn_start":
            open_turns[item.turn_id] = span
        else:
            span.end(end_time=end)
    for span in open_turns.values():
        span.end(end_time=last)
    return started
