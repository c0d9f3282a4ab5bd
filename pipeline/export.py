"""Provider-ready payloads from a session's history.

The same policies the turn engine uses shape the history: tool results bounded,
the history trimmed to a token budget (whole turns, breadcrumb), pairing repaired
(a dangling call gets an explicit interrupted result), and the memory context
injected into the last user message when asked. The result is rendered in one of
seven formats (:data:`EXPORT_FORMATS`) and is always pairing-valid by that
format's rule. The system prompt goes where each format wants it: ``system``
messages in place (OpenAI chat, LangChain, Pydantic AI), the top-level ``system``
(Anthropic), ``instructions`` for the leading ones and ``developer`` messages for
later ones (Responses), ``systemInstruction`` (Gemini); ADK events have no place
for it. Results already bounded when recorded are never bounded twice (see
:func:`policies.bounding.make_result_bounder`).

Model usage: the formats that keep a model response's usage
(:data:`~pipeline.formats.writers.CARRIES_USAGE`: LangChain, Pydantic AI, ADK)
get each assistant message's recorded ``model.called`` usage and model
(:func:`recorded_usage`); the request payloads of the other four have no place
for it.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, TypeAlias

import msgspec

from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import AssistantMessage, ModelCalled
from turnledger.pipeline.formats.model import ModelUsage
from turnledger.pipeline.formats.writers import (
    CARRIES_USAGE,
    UsageOf,
    to_adk,
    to_gemini,
    to_langchain,
    to_pydantic_ai,
)
from turnledger.policies.bounding import make_result_bounder
from turnledger.policies.messages import Message, ToolResult, make_message
from turnledger.policies.pairing_repair import RepairDecision, repair_pairing
from turnledger.policies.recall import inject_memory_context
from turnledger.policies.recordable import nests_within
from turnledger.policies.trimming import TrimDecision, trim_to_budget
from turnledger.projections.history.state import HistoryEntry

ExportFormat: TypeAlias = Literal[
    "openai-chat",
    "openai-responses",
    "anthropic",
    "gemini",
    "langchain",
    "pydantic-ai",
    "adk",
]
"""The formats a session can be exported in (each has a reader of that name)."""

EXPORT_FORMATS: tuple[ExportFormat, ...] = (
    "openai-chat",
    "openai-responses",
    "anthropic",
    "gemini",
    "langchain",
    "pydantic-ai",
    "adk",
)

Json: TypeAlias = dict[str, Any]


class ExportOptions(msgspec.Struct, frozen=True, kw_only=True):
    """How to shape the history.

    Attributes:
        budget_tokens: Trim to this many estimated tokens (0: no trim).
        max_tool_result_chars: Bound each tool result (0: no bound).
        memory_block: A ``[Memory context]`` block to prepend to the last user
            message (``None``: none).
        system: A system prompt to put first.
    """

    budget_tokens: int = 0
    max_tool_result_chars: int = 50_000
    memory_block: str | None = None
    system: str | None = None


class PreparedHistory(msgspec.Struct, frozen=True, kw_only=True):
    """A history shaped for a provider, and what shaping did.

    Attributes:
        messages: The messages to send (system first when given).
        trim: The trim decision (``None`` when no budget was given).
        repair: The pairing repair decision.
        truncated_results: How many tool results were bounded.
        injected: Whether the memory context was injected.
    """

    messages: tuple[Message, ...]
    trim: TrimDecision | None
    repair: RepairDecision
    truncated_results: int
    injected: bool


def prepare_history(
    messages: Sequence[Message], options: ExportOptions
) -> PreparedHistory:
    """Bound, inject, trim and repair, in that order (see the module docstring).

    The memory block goes into the last user message before the trim, so the
    budget counts it (the trim always keeps that message's turn).
    """
    bounded, truncated = _bound_results(messages, options.max_tool_result_chars)
    if options.system:
        bounded = [make_message("system", options.system), *bounded]
    injected = False
    if options.memory_block:
        injection = inject_memory_context(bounded, options.memory_block)
        bounded = list(injection.messages)
        injected = injection.outcome == "injected"
    trim = (
        trim_to_budget(bounded, options.budget_tokens)
        if options.budget_tokens
        else None
    )
    shaped = list(trim.messages) if trim else bounded
    repair = repair_pairing(shaped)
    return PreparedHistory(
        messages=tuple(repair.messages),
        trim=trim,
        repair=repair,
        truncated_results=truncated,
        injected=injected,
    )


def _bound_results(
    messages: Sequence[Message], max_chars: int
) -> tuple[list[Message], int]:
    bound = make_result_bounder(max_chars, recorded=True)
    out: list[Message] = []
    truncated = 0
    for message in messages:
        if not message.tool_results:
            out.append(message)
            continue
        results = []
        for result in message.tool_results:
            b = bound(result.content)
            truncated += b.truncated
            results.append(msgspec.structs.replace(result, content=b.text))
        out.append(
            make_message(
                message.role,
                message.text,
                tool_calls=message.tool_calls,
                tool_results=tuple(results),
                kind=message.kind,
            )
        )
    return out, truncated


def recorded_usage(
    records: Iterable[Recorded], entries: Sequence[HistoryEntry]
) -> UsageOf:
    """The usage of each history entry's model call, from the session's events.

    An assistant message's model call is the ``model.called`` recorded before
    it in its turn (after the turn's previous assistant message), as the turn
    engine, an import and the adapters record them. A failed call gives no
    usage.

    Args:
        records: The session's events (its lineage), oldest first.
        entries: Its history entries (:class:`SessionHistoryState` ``entries``).

    Returns:
        A function giving the usage of one of those entries' messages (``None``
        for any other message, and for a message no call was recorded for).
    """
    found: defaultdict[tuple[str, str, tuple[str, ...]], list[ModelUsage | None]]
    found = defaultdict(list)
    pending: dict[str, ModelCalled] = {}
    for record in records:
        event = record.event
        if isinstance(event, ModelCalled) and event.success:
            pending[event.turn_id] = event
        elif isinstance(event, AssistantMessage):
            call = pending.pop(event.turn_id, None)
            key = (event.turn_id, event.text, tuple(c.id for c in event.tool_calls))
            found[key].append(None if call is None else _usage(call))
    by_message: dict[int, ModelUsage] = {}
    for entry in entries:
        m = entry.message
        key = (entry.turn_id, m.text, tuple(c.id for c in m.tool_calls))
        if m.role != "assistant" or not found.get(key):
            continue
        used = found[key].pop(0)
        if used is not None:
            by_message[id(m)] = used
    # Keyed by identity: the entries hold their messages, and shaping passes
    # an assistant message through unchanged.
    return lambda message: by_message.get(id(message))


def _usage(call: ModelCalled) -> ModelUsage:
    return ModelUsage(
        model=call.model,
        provider=call.provider,
        input_tokens=call.input_tokens,
        output_tokens=call.output_tokens,
        cached_input_tokens=call.cached_input_tokens,
        cache_write_tokens=call.cache_write_tokens,
        reasoning_tokens=call.reasoning_tokens,
    )


def render(
    messages: Sequence[Message], fmt: ExportFormat, usage: UsageOf | None = None
) -> Any:
    """Render messages as the request payload (or message list) of a format.

    ``usage`` gives an assistant message's recorded usage; the formats that
    keep one (LangChain, Pydantic AI, ADK) write it, the others have no place
    for it.
    """
    if fmt == "openai-chat":
        return {"messages": to_openai_chat(messages)}
    if fmt == "anthropic":
        system, rendered = to_anthropic(messages)
        return (
            {"system": system, "messages": rendered}
            if system
            else {"messages": rendered}
        )
    if fmt == "openai-responses":
        return _responses_payload(messages)
    if fmt == "gemini":
        return to_gemini(messages)
    carriers: dict[str, Callable[[Sequence[Message], UsageOf], list[Json]]] = {
        "langchain": to_langchain,
        "pydantic-ai": to_pydantic_ai,
        "adk": to_adk,
    }
    given = usage if usage is not None and fmt in CARRIES_USAGE else _no_usage
    return carriers[fmt](messages, given)


def _no_usage(_message: Message) -> ModelUsage | None:
    return None


def _responses_payload(messages: Sequence[Message]) -> Json:
    """``instructions`` from the leading system messages, then the ``input`` items."""
    head = 0
    while head < len(messages) and messages[head].role == "system":
        head += 1
    instructions = "\n\n".join(m.text for m in messages[:head] if m.text)
    items = to_openai_responses(messages[head:])
    return (
        {"instructions": instructions, "input": items}
        if instructions
        else {"input": items}
    )


def _result_rows(results: Sequence[ToolResult]) -> list[Json]:
    return [
        {"role": "tool", "tool_call_id": r.call_id, "content": r.content}
        for r in results
    ]


def to_openai_chat(messages: Sequence[Message]) -> list[Json]:
    """OpenAI Chat Completions messages: ``tool`` rows after the calling message."""
    out: list[Json] = []
    for m in messages:
        if m.tool_results:
            out.extend(_result_rows(m.tool_results))
            if m.role == "user" and m.text and m.kind == "normal":
                out.append({"role": "user", "content": m.text})
            continue
        if m.role == "assistant":
            row: Json = {"role": "assistant", "content": m.text or None}
            if m.tool_calls:
                row["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments},
                    }
                    for c in m.tool_calls
                ]
            out.append(row)
        elif m.role != "tool":
            out.append({"role": m.role, "content": m.text})
    return out


def _tool_input(arguments: str) -> Json:
    if not nests_within(arguments):  # a parser would exhaust the recursion limit
        return {"_raw_arguments": arguments}
    try:
        value = json.loads(arguments)
    except (ValueError, RecursionError):  # nested too deep: kept as recorded
        return {"_raw_arguments": arguments}
    return value if isinstance(value, dict) else {"value": value}


def _anthropic_blocks(m: Message) -> tuple[str, list[Json]]:
    if m.tool_results:
        blocks: list[Json] = [
            {
                "type": "tool_result",
                "tool_use_id": r.call_id,
                "content": r.content,
                "is_error": r.is_error,
            }
            for r in m.tool_results
        ]
        if m.role == "user" and m.text and m.kind == "normal":
            blocks.append({"type": "text", "text": m.text})
        return "user", blocks
    if m.role == "assistant":
        blocks = [{"type": "text", "text": m.text}] if m.text else []
        blocks += [
            {
                "type": "tool_use",
                "id": c.id,
                "name": c.name,
                "input": _tool_input(c.arguments),
            }
            for c in m.tool_calls
        ]
        return "assistant", blocks
    return "user", [{"type": "text", "text": m.text}]


def to_anthropic(messages: Sequence[Message]) -> tuple[str, list[Json]]:
    """Anthropic Messages: system apart, results as blocks of the next user turn.

    Consecutive messages of one role are merged (the API wants alternation),
    which puts every ``tool_result`` in the user message right after its call.
    """
    system = "\n\n".join(m.text for m in messages if m.role == "system")
    out: list[Json] = []
    for m in messages:
        if m.role == "system":
            continue
        role, blocks = _anthropic_blocks(m)
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            _extend_blocks(out[-1]["content"], blocks)
        else:
            out.append({"role": role, "content": blocks})
    return system, out


def _extend_blocks(content: list[Json], blocks: list[Json]) -> None:
    """Append blocks; text meeting text becomes one block (lines joined).

    The reader joins a message's text blocks with a newline, so one block is
    what a re-export gives: import -> export stays a fixed point.
    """
    last = content[-1] if content else None
    first = blocks[0]
    if last is not None and last.get("type") == "text" and first.get("type") == "text":
        texts = [text for text in (last["text"], first["text"]) if text]
        content[-1] = {"type": "text", "text": "\n".join(texts)}
        blocks = blocks[1:]
    content.extend(blocks)


def to_openai_responses(messages: Sequence[Message]) -> list[Json]:
    """OpenAI Responses input items: calls and outputs joined by ``call_id``."""
    out: list[Json] = []
    for m in messages:
        out.extend(
            {"type": "function_call_output", "call_id": r.call_id, "output": r.content}
            for r in m.tool_results
        )
        if m.role == "assistant":
            if m.text:
                out.append(
                    {
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": m.text}],
                    }
                )
            out.extend(
                {
                    "type": "function_call",
                    "call_id": c.id,
                    "name": c.name,
                    "arguments": c.arguments,
                }
                for c in m.tool_calls
            )
        elif m.role in ("user", "system") and (
            not m.tool_results or (m.text and m.kind == "normal")
        ):
            out.append(
                {
                    "type": "message",
                    "role": "developer" if m.role == "system" else m.role,
                    "content": [{"type": "input_text", "text": m.text}],
                }
            )
    return out
