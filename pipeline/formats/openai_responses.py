"""OpenAI Responses items (also the payloads of Codex rollouts).

Client tool calls are the items ``function_call``, ``custom_tool_call``,
``computer_call``, ``local_shell_call``, ``shell_call`` and ``apply_patch_call``;
each is answered by the item of the same type plus ``_output``. The link is
``call_id`` (an item's own ``id``, e.g. ``fc_...``, is not). Consecutive call
items become one assistant message with parallel calls; each output becomes a
``role="tool"`` message. Reasoning items and provider-executed tools
(``web_search_call``, ``mcp_call``, ...) are skipped and counted. An item
without ``type`` but with ``role`` is a message.

A call whose ``call_id`` is empty or absent has no id: the Agents SDK stores
``""`` for every call when a Chat Completions provider returned tool calls
without ids. Under the pairing rule such calls all share the id ``""``, so
each output without an id answers the earliest unanswered call without one
before it. The reader gives each such call its own synthetic id
(``responses:no-call-id:N``) and hands it to the output that answers it, so
the counts are the rule's and the calls stay distinct (one shared id would
make every later call a reused id, which the pairing repair drops); an
output without an id that answers nothing gets an id no call has.

Accepted documents: a JSON array of items, or an object with an ``input``
(a string or an array of items) and optional ``instructions``.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from turnledger.pipeline.formats._common import (
    PREAMBLE,
    UNTYPED,
    Indexed,
    Items,
    JSONObject,
    Sink,
    as_list,
    as_object,
    conversation,
    get_list,
    get_object,
    get_str,
    json_text,
    text_of,
)
from turnledger.pipeline.formats._documents import describe_document, load_json
from turnledger.pipeline.formats.model import TranscriptError
from turnledger.policies.messages import (
    Message,
    Role,
    ToolCall,
    ToolResult,
    make_message,
)

if TYPE_CHECKING:
    from turnledger.pipeline.formats.model import ParsedTranscript

EXPECTED = "a JSON array of Responses items or an object with an `input`"

CALL_NAMES: dict[str, str] = {
    "function_call": "",
    "custom_tool_call": "",
    "computer_call": "computer",
    "local_shell_call": "local_shell",
    "shell_call": "shell",
    "apply_patch_call": "apply_patch",
}
"""Client tool-call item types, with the tool name used when an item has none."""

OUTPUT_TYPES = frozenset(f"{kind}_output" for kind in CALL_NAMES)
"""The item types that answer a client tool call."""

MISSING_ID_PREFIX = "responses:no-call-id"
"""How the synthetic id of a call (or output) without a ``call_id`` begins."""

_ARGUMENT_KEYS = ("arguments", "input", "action", "operation")
_KNOWN_ITEMS = frozenset(
    {
        "reasoning",
        "item_reference",
        "compaction",
        "mcp_list_tools",
        "mcp_approval_request",
        "mcp_approval_response",
    }
)
"""Responses item types that carry no message (provider calls end ``_call``)."""
_ROLES: dict[str, Role] = {
    "user": "user",
    "assistant": "assistant",
    "system": "system",
    "developer": "system",
}


def parse_openai_responses(data: bytes, *, name: str) -> ParsedTranscript:
    """Read a Responses transcript document.

    Args:
        data: The file's bytes.
        name: The file name, used as the conversation id.

    Returns:
        One conversation.

    Raises:
        TranscriptError: The document is not JSON or has neither accepted shape.
    """
    document = load_json(data, expected=EXPECTED)
    sink = Sink()
    envelope = as_object(document)
    values = as_list(document)
    if values is None and envelope is not None and "input" in envelope:
        values = request_history(envelope)
    if values is None:
        msg = f"Expected {EXPECTED}, found {describe_document(document)}"
        raise TranscriptError(msg)
    items = Items.of(values, "input" if envelope is not None else "")
    indexed = system_preamble(envelope or {}, sink) + responses_messages(items, sink)
    found = conversation(
        conversation_id=name, indexed=indexed, origins=items.origins, source=name
    )
    return sink.transcript("openai-responses", [found])


def system_preamble(body: JSONObject, sink: Sink) -> list[Indexed]:
    """Return a request's ``instructions`` as a leading system message."""
    instructions = body.get("instructions")
    if not instructions:
        return []
    return [(PREAMBLE, make_message("system", text_of(instructions, sink)))]


@dataclass
class _Calls:
    index: int = 0
    calls: list[ToolCall] = field(default_factory=list)

    def add(self, index: int, call: ToolCall) -> None:
        if not self.calls:
            self.index = index
        self.calls.append(call)

    def flush(self, into: list[Indexed]) -> None:
        if self.calls:
            message = make_message("assistant", tool_calls=tuple(self.calls))
            into.append((self.index, message))
            self.calls = []


@dataclass
class _MissingIds:
    """Synthetic ids for calls and outputs without a ``call_id``, paired in order."""

    open_calls: deque[str] = field(default_factory=deque)
    counter: int = 0

    def call(self, call_id: str) -> str:
        if call_id:
            return call_id
        self.open_calls.append(self._next(""))
        return self.open_calls[-1]

    def result(self, call_id: str) -> str:
        if call_id:
            return call_id
        return (
            self.open_calls.popleft() if self.open_calls else self._next(":unmatched")
        )

    def _next(self, label: str) -> str:
        self.counter += 1
        return f"{MISSING_ID_PREFIX}{label}:{self.counter}"


def responses_messages(items: Items, sink: Sink) -> list[Indexed]:
    """Convert Responses items to the neutral model.

    Args:
        items: The items.
        sink: Collects skipped items and malformed ones.

    Returns:
        The messages, each with the index of its (first) source item.
    """
    converted: list[Indexed] = []
    pending = _Calls()
    missing = _MissingIds()
    for index, item in items.objects(sink):
        kind = item_type(item)
        if kind in CALL_NAMES:
            pending.add(index, _call(item, kind, missing))
            continue
        message = _message(item, kind, sink, missing)
        if message is not None:
            pending.flush(converted)
            converted.append((index, message))
    pending.flush(converted)
    return converted


def item_type(item: JSONObject) -> str:
    """Return an item's type (``"message"`` for a typeless item with a role)."""
    kind = get_str(item, "type")
    if kind is None:
        return "message" if "role" in item else UNTYPED
    return kind


def _call(item: JSONObject, kind: str, missing: _MissingIds) -> ToolCall:
    arguments = next((item[key] for key in _ARGUMENT_KEYS if key in item), "{}")
    return ToolCall(
        id=missing.call(get_str(item, "call_id") or ""),
        name=get_str(item, "name") or CALL_NAMES[kind],
        arguments=json_text(arguments),
    )


def _message(
    item: JSONObject, kind: str, sink: Sink, missing: _MissingIds
) -> Message | None:
    if kind in OUTPUT_TYPES:
        result = ToolResult(
            call_id=missing.result(get_str(item, "call_id") or ""),
            content=text_of(item.get("output"), sink),
        )
        return make_message("tool", tool_results=(result,))
    role = _ROLES.get(get_str(item, "role") or "")
    if kind != "message" or role is None:
        label = kind if kind != "message" else f"role:{get_str(item, 'role')}"
        if kind in _KNOWN_ITEMS or kind.endswith("_call"):
            sink.skip(label)
        else:
            sink.unknown(label)
        return None
    return make_message(role, text_of(item.get("content"), sink))


def request_history(body: JSONObject) -> list[object]:
    """Return the items a Responses request sends (``input``).

    A string input is one user message.
    """
    raw = body.get("input")
    if isinstance(raw, str):
        return [{"role": "user", "content": raw}]
    return as_list(raw) or []


def response_output(body: object) -> list[object]:
    """Return the ``output`` items of a Responses response body."""
    obj = as_object(body)
    return get_list(obj, "output") if obj is not None else []


_FINAL_EVENTS = frozenset(
    {"response.completed", "response.incomplete", "response.failed"}
)


def stream_output(events: list[JSONObject]) -> list[object]:
    """Return the output items of a streamed Responses response.

    The final ``response.completed`` (or ``incomplete`` / ``failed``) event
    carries the whole output; without one, the ``response.output_item.done``
    items are used in ``output_index`` order.

    Args:
        events: The decoded ``data:`` payloads, in order.

    Returns:
        The output items.
    """
    for event in reversed(events):
        if get_str(event, "type") in _FINAL_EVENTS:
            response = get_object(event, "response")
            if response is not None and "output" in response:
                return get_list(response, "output")
    done: dict[int, object] = {}
    for event in events:
        index = event.get("output_index")
        if get_str(event, "type") == "response.output_item.done" and isinstance(
            index, int
        ):
            done[index] = event.get("item")
    return [done[index] for index in sorted(done)]


def response_id(body: object) -> str | None:
    """Return the ``id`` of a Responses response body, if any."""
    obj = as_object(body)
    return get_str(obj, "id") if obj is not None else None


def stream_response(events: list[JSONObject]) -> JSONObject | None:
    """Return the last ``response`` object a Responses stream announced."""
    for event in reversed(events):
        response = get_object(event, "response")
        if response is not None:
            return response
    return None
