"""OpenHands event streams (the V0 ``Event`` JSON its event store writes).

A stream is a list of events, each an *action* (``action``: ``message``,
``run``, ``edit``, ``finish``, ...) or an *observation* (``observation``:
``run``, ``edit``, ``error``, ``agent_state_changed``, ...), with ``id``,
``source`` (``user`` / ``agent`` / ``environment``) and, for an observation,
``cause`` (the id of the action it answers). An action the model chose through
a tool call carries ``tool_call_metadata`` (``tool_call_id``,
``function_name``, the ``model_response`` it came from); the observation
answering it carries the same ``tool_call_id``. That is what is counted:

- a tool call: an action with ``tool_call_metadata``; the actions of one
  ``model_response`` (its ``id``) form one assistant message, whose text is
  that response's message ``content``, and each call's arguments are the
  response's ``tool_calls[].function.arguments`` for that id (else the
  action's ``args``);
- a tool result: an observation with ``tool_call_metadata`` (an ``error``
  observation is a failed result);
- a result pairs with the call of the same ``tool_call_id`` that came before
  it, anywhere later in the stream (OpenHands pairs by that id: its
  conversation memory holds the call until the observation arrives).

``message`` actions are user or assistant text (their ``image_urls`` are
counted as skipped ``image_url``); a ``system`` action is the system prompt.
Actions and observations without ``tool_call_metadata`` (agent state changes,
``null`` observations, commands a user ran) are skipped and counted by type.

Accepted files: a JSON array of events, JSON Lines (one event per line), or
an object whose ``history`` is the array (an evaluation output record).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from turnledger.pipeline.formats._common import (
    Items,
    JSONObject,
    Sink,
    as_list,
    as_object,
    conversation,
    decode_json,
    get_list,
    get_object,
    get_str,
    json_text,
    text_of,
)
from turnledger.pipeline.formats._documents import describe_document
from turnledger.pipeline.formats._lines import read_json_lines
from turnledger.pipeline.formats.model import TranscriptError
from turnledger.policies.messages import ToolCall, ToolResult, make_message

if TYPE_CHECKING:
    from turnledger.pipeline.formats._common import Indexed
    from turnledger.pipeline.formats.model import ParsedTranscript
    from turnledger.policies.messages import Role

EXPECTED = (
    "an OpenHands event stream (a JSON array or JSON Lines of events with "
    "`action` or `observation`, or an object with a `history` array)"
)
_ROLES: dict[str, Role] = {"user": "user", "agent": "assistant"}


def is_openhands_event(item: JSONObject) -> bool:
    """Whether an object looks like an OpenHands event.

    It names an ``action`` or an ``observation`` (a string) and has the
    fields that go with one (``source``, ``args``, ``extras``,
    ``tool_call_metadata``).
    """
    kind = get_str(item, "action") or get_str(item, "observation")
    if kind is None:
        return False
    return any(
        key in item for key in ("source", "args", "extras", "tool_call_metadata")
    )


def parse_openhands(data: bytes, *, name: str) -> ParsedTranscript:
    """Read an OpenHands event stream.

    Args:
        data: The file's bytes.
        name: The file name, the conversation id.

    Returns:
        One conversation.

    Raises:
        TranscriptError: The file has none of the accepted shapes.
    """
    sink = Sink()
    items = _items(data, sink)
    builder = _Builder(sink)
    for index, event in items.objects(sink):
        builder.add(index, event)
    found = conversation(
        conversation_id=name,
        indexed=builder.indexed,
        origins=items.origins,
        source=name,
    )
    return sink.transcript("openhands", [found])


def _items(data: bytes, sink: Sink) -> Items:
    try:
        document = decode_json(data)
    except TranscriptError:
        lines = read_json_lines(data, sink, expected=EXPECTED)
        return Items([obj for _, obj in lines], [f"line {n}" for n, _ in lines])
    values = as_list(document)
    if values is not None:
        return Items.of(values, "")
    obj = as_object(document)
    if obj is not None:
        history = as_list(obj.get("history"))
        if history is not None:
            return Items.of(history, "history")
        if is_openhands_event(obj):
            return Items([obj], ["line 1"])  # JSON Lines with one event
    msg = f"Expected {EXPECTED}, found {describe_document(document)}"
    raise TranscriptError(msg)


class _Builder:
    """Turns events into messages, grouping the calls of one model response.

    The actions of one ``model_response`` become one assistant message (as the
    model sent them), even when OpenHands ran and observed the first before
    recording the next.
    """

    def __init__(self, sink: Sink) -> None:
        self._sink = sink
        self.indexed: list[Indexed] = []
        self._responses: dict[str, int] = {}

    def add(self, index: int, event: JSONObject) -> None:
        action = get_str(event, "action")
        observation = get_str(event, "observation")
        metadata = get_object(event, "tool_call_metadata")
        if action is not None and metadata is not None:
            self._call(index, event, metadata)
            return
        if observation is not None and metadata is not None:
            self._result(index, event, observation, metadata)
        elif action in {"message", "system"}:
            self._text(index, event, action)
        elif action is not None:
            self._sink.skip(f"action:{action}")
        elif observation is not None:
            self._sink.skip(f"observation:{observation}")
        else:
            self._sink.unknown("not an OpenHands event")

    def _text(self, index: int, event: JSONObject, action: str) -> None:
        args = get_object(event, "args") or {}
        content = args.get("content")
        text = text_of(content) if content is not None else ""
        text = text or get_str(event, "message") or ""
        for _ in as_list(args.get("image_urls")) or []:
            self._sink.skip("image_url")  # counted, as the other readers do
        if action == "system":
            self.indexed.append((index, make_message("system", text)))
            return
        role = _ROLES.get(get_str(event, "source") or "")
        if role is None:
            self._sink.skip(f"action:message from {get_str(event, 'source')}")
            return
        self.indexed.append((index, make_message(role, text)))

    def _call(self, index: int, event: JSONObject, metadata: JSONObject) -> None:
        call_id = get_str(metadata, "tool_call_id") or ""
        response = get_object(metadata, "model_response") or {}
        message = _response_message(response)
        call = ToolCall(
            id=call_id,
            name=get_str(metadata, "function_name") or "",
            arguments=_arguments(message, call_id, event),
        )
        response_id = get_str(response, "id")
        position = self._responses.get(response_id or "")
        if response_id is not None and position is not None:
            first, earlier = self.indexed[position]
            grown = make_message(
                "assistant", earlier.text, tool_calls=(*earlier.tool_calls, call)
            )
            self.indexed[position] = (first, grown)
            return
        if response_id is not None:
            self._responses[response_id] = len(self.indexed)
        text = text_of(message.get("content")) if message.get("content") else ""
        self.indexed.append(
            (index, make_message("assistant", text, tool_calls=(call,)))
        )

    def _result(
        self, index: int, event: JSONObject, observation: str, metadata: JSONObject
    ) -> None:
        content = event.get("content")
        text = json_text(content) if content is not None else ""
        result = ToolResult(
            call_id=get_str(metadata, "tool_call_id") or "",
            content=text or get_str(event, "message") or "",
            is_error=observation == "error",
            name=get_str(metadata, "function_name"),
        )
        self.indexed.append((index, make_message("tool", tool_results=(result,))))


def _response_message(response: JSONObject) -> JSONObject:
    for value in get_list(response, "choices"):
        choice = as_object(value)
        message = get_object(choice, "message") if choice is not None else None
        if message is not None:
            return message
    return {}


def _arguments(message: JSONObject, call_id: str, event: JSONObject) -> str:
    for value in get_list(message, "tool_calls"):
        call = as_object(value)
        if call is None or get_str(call, "id") != call_id:
            continue
        function = get_object(call, "function") or {}
        arguments = function.get("arguments")
        if arguments is not None:
            return json_text(arguments)
    return json_text(event.get("args", {}))
