"""Observer items out of the process: structlog event dicts, log lines and spans.

:func:`render_item` turns an :class:`~projections.observer.items.ObserverItem`
into a structlog event dict (``observer.<kind>``, labels and figures as top-level
fields), :func:`emit_observer_items` logs items through any structlog-like logger
(failures at warning level), and :func:`export_spans` sends a stream's items to
OpenTelemetry as spans when the optional ``opentelemetry-api`` is installed. They
carry only what an item carries: ids, numbers and scrubbed, bounded text.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Any, Protocol

from turnledger.projections.observer.items import ObserverItem


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
