"""Observer items: what one ledger event shows an observer, scrubbed and bounded.

Each ledger event becomes zero or more :class:`ObserverItem` (kinds modelled on
ZeroClaw's ``ObserverEvent``, reference §8.2): session and turn start/end, model
request/response, tool call, tool result, memory recall/store/forget/supersede,
knowledge capture, media attachment, history trim and errors; :func:`observe` is
that mapping, pure. Items carry ids, counts, sizes, durations, flags and text that
went through :func:`policies.scrubbing.summarize` (scrubbed, at most 200
characters plus an ellipsis). They never carry raw payloads: no user input,
assistant text, tool output, memory content, node names or file names. Unlike
ZeroClaw, tool-call arguments are scrubbed and bounded too (§8.3 [gap]).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final, Literal, TypeAlias

import msgspec

from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import (
    AssistantMessage,
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
from turnledger.policies.scrubbing import (
    ELLIPSIS,
    SUMMARY_LIMIT,
    scrub_text,
    summarize,
)
from turnledger.policies.structured_scrubbing import JsonValue, scrub_json
from turnledger.projections.observer._text import short

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


def _text(text: str | None) -> str:
    return summarize(text) if text else ""


def _item(recorded: Recorded, kind: ObserverKind, **fields: Any) -> ObserverItem:
    turn_id = getattr(recorded.event, "turn_id", "")
    return ObserverItem(
        kind=kind,
        position=recorded.position,
        at=recorded.recorded_at,
        turn_id=short(turn_id),
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
            return (_item(recorded, "memory_store", keys=(short(key),), labels=labels),)
        case MemoryForgotten(key=key, source=source, reason=reason):
            return (_memory_audit(recorded, "memory_forget", key, source, reason),)
        case MemorySuperseded(key=key, source=source, reason=reason):
            return (_memory_audit(recorded, "memory_supersede", key, source, reason),)
        case KnowledgeCaptured(relation=relation):
            return (_item(recorded, "knowledge_capture", name=short(relation)),)
        case MediaAttached() as media:
            return (_media_attached(recorded, media),)
        case _:
            return ()


def _memory_audit(
    recorded: Recorded, kind: ObserverKind, key: str, source: str, reason: str
) -> ObserverItem:
    labels = _labels(source=source)
    return _item(
        recorded, kind, keys=(short(key),), summary=_text(reason), labels=labels
    )


def _labels(**values: str) -> dict[str, str]:
    return {name: short(value) for name, value in values.items() if value}


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
        name=short(event.model),
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
            name=short(call.name),
            call_id=short(call.id),
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
        name=short(event.tool),
        call_id=short(event.call_id),
        success=event.success,
        summary=_text(event.error),
        figures=figures,
        labels=labels,
    )


def _memory_recalled(recorded: Recorded, event: MemoryRecalled) -> ObserverItem:
    keys = tuple(short(entry.key) for entry in event.entries[:MAX_KEYS])
    figures = {"entries": len(event.entries), "injected_chars": event.injected_chars}
    return _item(
        recorded,
        "memory_recall",
        name=short(event.backend),
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
