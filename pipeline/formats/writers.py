"""Rendering neutral messages in the formats of Gemini, LangChain, Pydantic AI and ADK.

Each writer is the inverse of its reader in this package: what it writes reads
back to the same messages (tool results keep their call ids, failed results
their error flag, system prompts their text), so import -> export -> import ->
export is a fixed point. Pairing follows each format's rule: Gemini and ADK put
every ``functionResponse`` in the content right after the ``functionCall``
(consecutive contents of one role are merged, as the API wants alternation);
LangChain ``ToolMessage`` values and Pydantic AI ``tool-return`` parts follow the
message that made the call.

Where the system prompt goes: Gemini ``systemInstruction`` (every system message,
joined by a blank line); LangChain ``system`` messages in place; Pydantic AI
``system-prompt`` parts in place. ADK session events have no place for one (an
ADK agent's instruction is its configuration, not an event), so the ADK writer
leaves system messages out; :data:`DROPS_SYSTEM` names it.

Model usage: given ``usage`` (the usage recorded for an assistant message's
model call), the LangChain, Pydantic AI and ADK writers put it where their
format keeps it (``usage_metadata``, a response's ``usage`` and
``model_name``, an event's ``usageMetadata`` and ``modelVersion``; see
:mod:`pipeline.formats.usage`); a Gemini request has no place for it.
:data:`CARRIES_USAGE` names the writers that do.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from turnledger.pipeline.formats.model import ModelUsage
from turnledger.pipeline.formats.usage import (
    adk_usage_fields,
    langchain_usage_fields,
    pydantic_ai_usage_fields,
)
from turnledger.policies.messages import Message
from turnledger.policies.recordable import nests_within

if TYPE_CHECKING:
    from collections.abc import Sequence

    from turnledger.policies.messages import ToolResult

Json: TypeAlias = dict[str, Any]

UsageOf: TypeAlias = Callable[[Message], ModelUsage | None]
"""The usage recorded for an assistant message's model call (``None``: none)."""

CARRIES_USAGE: Final = frozenset({"langchain", "pydantic-ai", "adk"})
"""Writers whose format has a place for a model call's usage."""


def _no_usage(_message: Message) -> ModelUsage | None:
    return None


DROPS_SYSTEM: Final = frozenset({"adk"})
"""Writers whose format has no place for a system prompt."""

ADK_AGENT: Final = "turnledger"
"""The ``author`` of the model's events in an ADK export."""


def _arguments(arguments: str) -> object:
    """Parse call arguments to a JSON object; other text is kept under a key."""
    if not nests_within(arguments):  # a parser would exhaust the recursion limit
        return {"_raw_arguments": arguments}
    try:
        value = json.loads(arguments)
    except (ValueError, RecursionError):  # nested too deep: kept as recorded
        return {"_raw_arguments": arguments}
    return value if isinstance(value, dict) else {"value": value}


def _response_object(result: ToolResult) -> Json:
    """A ``functionResponse.response``: ``{"output"|"error": text}`` or its object.

    Text that is itself a JSON object is sent as that object (how a function's
    structured result is recorded); the Gemini reader reads either form back to
    the same text.
    """
    key = "error" if result.is_error else "output"
    if not nests_within(result.content):  # too deep to send as an object
        return {key: result.content}
    try:
        value = json.loads(result.content)
    except (ValueError, RecursionError):  # nested too deep: kept as text
        return {key: result.content}
    if isinstance(value, dict) and not result.is_error and set(value) != {"error"}:
        return value
    return {key: result.content}


def _gemini_parts(message: Message, names: dict[str, str]) -> tuple[str, list[Json]]:
    if message.role == "assistant":
        parts: list[Json] = [{"text": message.text}] if message.text else []
        for call in message.tool_calls:
            names[call.id] = call.name
            function = {
                "id": call.id,
                "name": call.name,
                "args": _arguments(call.arguments),
            }
            parts.append({"functionCall": function})
        return "model", parts
    parts = [
        {
            "functionResponse": {
                "id": result.call_id,
                "name": result.name or names.get(result.call_id, ""),
                "response": _response_object(result),
            }
        }
        for result in message.tool_results
    ]
    if message.text and (not message.tool_results or message.kind == "normal"):
        parts.append({"text": message.text})
    return "user", parts


def gemini_contents(messages: Sequence[Message]) -> list[Json]:
    """Gemini ``contents``: role ``user`` / ``model``, consecutive roles merged."""
    return [content for content, _ in _contents(messages, _no_usage)]


def _contents(
    messages: Sequence[Message], usage: UsageOf
) -> list[tuple[Json, ModelUsage | None]]:
    """The contents, each with the usage of the model call that gave it.

    Two model contents that both have a usage stay apart (one call each).
    """
    names: dict[str, str] = {}
    out: list[tuple[Json, ModelUsage | None]] = []
    for message in messages:
        if message.role == "system":
            continue
        role, parts = _gemini_parts(message, names)
        if not parts:
            continue
        used = usage(message) if message.role == "assistant" else None
        if out and out[-1][0]["role"] == role and (used is None or out[-1][1] is None):
            _extend_parts(out[-1][0]["parts"], parts)
            out[-1] = (out[-1][0], out[-1][1] or used)
        else:
            out.append(({"role": role, "parts": parts}, used))
    return out


def _extend_parts(parts: list[Json], more: list[Json]) -> None:
    """Append parts; a text part meeting a text part becomes one (lines joined).

    The reader joins a content's texts with a newline, so one part is what a
    re-export gives: import -> export stays a fixed point.
    """
    if parts and more and set(parts[-1]) == {"text"} and set(more[0]) == {"text"}:
        texts = [text for text in (parts[-1]["text"], more[0]["text"]) if text]
        parts[-1] = {"text": "\n".join(texts)}
        more = more[1:]
    parts.extend(more)


def to_gemini(messages: Sequence[Message]) -> Json:
    """A ``generateContent`` request body: ``contents`` and ``systemInstruction``."""
    payload: Json = {"contents": gemini_contents(messages)}
    system = "\n\n".join(m.text for m in messages if m.role == "system" and m.text)
    if system:
        payload["systemInstruction"] = {"parts": [{"text": system}]}
    return payload


def to_langchain(messages: Sequence[Message], usage: UsageOf = _no_usage) -> list[Json]:
    """LangChain ``messages_to_dict`` dicts (``messages_from_dict`` reads them)."""
    out: list[Json] = []
    for message in messages:
        out.extend(
            {
                "type": "tool",
                "data": {
                    "type": "tool",
                    "content": result.content,
                    "tool_call_id": result.call_id,
                    "name": result.name,
                    "status": "error" if result.is_error else "success",
                },
            }
            for result in message.tool_results
        )
        if message.role == "assistant":
            calls = [
                {
                    "type": "tool_call",
                    "id": call.id,
                    "name": call.name,
                    "args": _arguments(call.arguments),
                }
                for call in message.tool_calls
            ]
            data: Json = {"type": "ai", "content": message.text, "tool_calls": calls}
            used = usage(message)
            if used is not None:
                data.update(langchain_usage_fields(used))
            out.append({"type": "ai", "data": data})
        elif message.role in {"user", "system"} and _speaks(message):
            kind = "human" if message.role == "user" else "system"
            out.append({"type": kind, "data": {"type": kind, "content": message.text}})
    return out


def _speaks(message: Message) -> bool:
    """Whether a user or system message has words of its own to render."""
    return not message.tool_results or bool(message.text and message.kind == "normal")


def _request_parts(message: Message) -> list[Json]:
    parts: list[Json] = []
    for result in message.tool_results:
        part: Json = {
            "part_kind": "tool-return",
            "tool_name": result.name or "",
            "content": result.content,
            "tool_call_id": result.call_id,
        }
        if result.is_error:
            part["outcome"] = "failed"
        parts.append(part)
    if message.role in {"user", "system"} and _speaks(message):
        kind = "user-prompt" if message.role == "user" else "system-prompt"
        parts.append({"part_kind": kind, "content": message.text})
    return parts


def to_pydantic_ai(
    messages: Sequence[Message], usage: UsageOf = _no_usage
) -> list[Json]:
    """Pydantic AI model messages (``ModelMessagesTypeAdapter`` JSON).

    Consecutive non-assistant messages form one ``request``; each assistant
    message is a ``response``. A failed result is a ``tool-return`` with
    ``outcome: "failed"`` (Pydantic AI's own record of a failed tool; the older
    ``retry-prompt`` parts are still read).
    """
    names: dict[str, str] = {}
    out: list[Json] = []
    for message in messages:
        if message.role == "assistant":
            parts: list[Json] = []
            if message.text:
                parts.append({"part_kind": "text", "content": message.text})
            for call in message.tool_calls:
                names[call.id] = call.name
                parts.append(
                    {
                        "part_kind": "tool-call",
                        "tool_name": call.name,
                        "args": call.arguments,
                        "tool_call_id": call.id,
                    }
                )
            response: Json = {"kind": "response", "parts": parts}
            used = usage(message)
            if used is not None:
                response.update(pydantic_ai_usage_fields(used))
            out.append(response)
            continue
        request = _request_parts(message)
        for part in request:
            if "tool_call_id" in part and not part["tool_name"]:
                part["tool_name"] = names.get(part["tool_call_id"], "")
        if not request:
            continue
        if out and out[-1]["kind"] == "request":
            out[-1]["parts"].extend(request)
        else:
            out.append({"kind": "request", "parts": request})
    return out


def to_adk(messages: Sequence[Message], usage: UsageOf = _no_usage) -> list[Json]:
    """ADK session events (``Event.model_dump(by_alias=True)`` JSON).

    One event per Gemini content (see :func:`gemini_contents`): the user's
    contents are authored by ``user``, the model's and the function responses
    by :data:`ADK_AGENT`. Each event gets a deterministic id and invocation id.
    """
    events: list[Json] = []
    invocation = 0
    for index, (content, used) in enumerate(_contents(messages, usage)):
        responses = all("functionResponse" in part for part in content["parts"])
        if content["role"] == "user" and not responses:
            invocation += 1
        author = "user" if content["role"] == "user" and not responses else ADK_AGENT
        event: Json = {
            "id": f"e{index + 1}",
            "invocationId": f"inv{invocation}",
            "author": author,
            "content": content,
        }
        if used is not None:
            event.update(adk_usage_fields(used))
        events.append(event)
    return events
