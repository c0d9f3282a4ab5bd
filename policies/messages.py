"""The neutral message model every history policy works on.

One model represents the three provider pairing rules:

- OpenAI Chat Completions: an ``assistant`` message with ``tool_calls``, then one
  ``tool`` message per result, each naming its ``tool_call_id``.
- Anthropic Messages: ``tool_use`` blocks in the assistant message, then the
  ``tool_result`` blocks in the immediately next ``user`` message. That user message
  is a *carrier*: it holds results, it does not start a turn.
- OpenAI Responses: ``function_call`` items and ``function_call_output`` items
  joined by ``call_id``.

All three become: an assistant :class:`Message` carrying :class:`ToolCall` values,
followed by messages carrying :class:`ToolResult` values (``role="tool"`` for the
one-result-per-row shapes, ``role="user"`` with ``kind="tool_results"`` for the
carrier shapes). Parallel calls are several calls on one assistant message.

Each message carries ``chars``: its size measured once, when it was appended. The
trimming policy scans these integers and never re-measures text.
"""

from __future__ import annotations

from typing import Literal, TypeAlias

import msgspec

Role: TypeAlias = Literal["system", "user", "assistant", "tool"]
"""Who speaks a message."""

MessageKind: TypeAlias = Literal["normal", "breadcrumb", "tool_results", "synthetic"]
"""What a message is for, beyond its role.

``breadcrumb`` marks the trim notice, ``tool_results`` a user message that only
carries tool results (Anthropic / ``[Tool results]`` XML mode), ``synthetic`` a
message the repair policy made up (an interrupted-call result).
"""

BREADCRUMB_TEXT = "[earlier turns omitted to fit the context window]"
"""The text of the trim breadcrumb, exactly as ZeroClaw writes it."""

TOOL_RESULTS_PREFIX = "[Tool results]"
"""The prefix of a user message that carries XML-mode tool results."""


class ToolCall(msgspec.Struct, frozen=True, kw_only=True):
    """A call the model asked for.

    Attributes:
        id: The provider's call id (``tool_call_id`` / ``tool_use.id`` / ``call_id``).
        name: The tool's name.
        arguments: The arguments as JSON text, exactly as the model produced them.
    """

    id: str
    name: str
    arguments: str = "{}"


class ToolResult(msgspec.Struct, frozen=True, kw_only=True):
    """The answer to one :class:`ToolCall`.

    Attributes:
        call_id: The id of the call this result answers.
        content: The model-visible text of the result.
        is_error: Whether the tool failed.
        name: The tool's name, when the format records it.
    """

    call_id: str
    content: str
    is_error: bool = False
    name: str | None = None


class Message(msgspec.Struct, frozen=True, kw_only=True):
    """One provider-visible message.

    Attributes:
        role: Who speaks.
        text: The message text (may be empty for a pure tool-call message).
        tool_calls: Calls made by an assistant message, in order.
        tool_results: Results carried by a ``tool`` row or a carrier ``user`` message.
        kind: What the message is for (see :data:`MessageKind`).
        chars: The size in characters, measured once at append time.
    """

    role: Role
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_results: tuple[ToolResult, ...] = ()
    kind: MessageKind = "normal"
    chars: int = 0


def measure_chars(
    text: str,
    tool_calls: tuple[ToolCall, ...] = (),
    tool_results: tuple[ToolResult, ...] = (),
) -> int:
    """Return the character size of a message's provider-visible content.

    Args:
        text: The message text.
        tool_calls: Its tool calls (name and arguments count).
        tool_results: Its tool results (id and content count).

    Returns:
        The number of characters, the unit the token estimate is built on.
    """
    size = len(text)
    for call in tool_calls:
        size += len(call.id) + len(call.name) + len(call.arguments)
    for result in tool_results:
        size += len(result.call_id) + len(result.content)
    return size


def make_message(
    role: Role,
    text: str = "",
    *,
    tool_calls: tuple[ToolCall, ...] = (),
    tool_results: tuple[ToolResult, ...] = (),
    kind: MessageKind | None = None,
) -> Message:
    """Build a :class:`Message` with its size measured.

    A ``user`` message that carries results, or whose text starts with
    ``[Tool results]``, is a carrier; one whose text is the breadcrumb is a
    breadcrumb. An explicit ``kind`` wins over that inference.

    Args:
        role: Who speaks.
        text: The message text.
        tool_calls: Calls made by an assistant message.
        tool_results: Results carried by this message.
        kind: What the message is for; inferred when omitted.

    Returns:
        The message, with ``chars`` set.
    """
    if kind is None:
        kind = _infer_kind(role, text, tool_results)
    return Message(
        role=role,
        text=text,
        tool_calls=tool_calls,
        tool_results=tool_results,
        kind=kind,
        chars=measure_chars(text, tool_calls, tool_results),
    )


def _infer_kind(
    role: Role, text: str, tool_results: tuple[ToolResult, ...]
) -> MessageKind:
    if role != "user":
        return "normal"
    if tool_results or text.startswith(TOOL_RESULTS_PREFIX):
        return "tool_results"
    if text == BREADCRUMB_TEXT:
        return "breadcrumb"
    return "normal"


def starts_turn(message: Message) -> bool:
    """Return whether a message opens a turn: a real user message.

    The breadcrumb and tool-result carriers are user messages that do not.
    """
    return message.role == "user" and message.kind == "normal"
