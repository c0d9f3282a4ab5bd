"""Recorded HTTP exchanges (VCR cassettes) with model APIs.

A cassette is ``interactions: [{request: {method, uri, headers, body |
parsed_body}, response: {status, headers, body | parsed_body}}]``. Each
``POST`` to a model endpoint (see :func:`pipeline.formats._shapes.shape_for`)
sends a history and receives new output. Every request re-sends the growing
history, so a request counts as a conversation only when no later request of
the same API shape extends (or repeats) its history: the history of that last
request plus its response's output is the conversation.

Responses requests may keep state on the server: with ``previous_response_id``
the effective history is the referenced request's effective history, that
response's output, and this request's ``input``; with ``conversation`` it is
everything earlier requests of that conversation sent and received, plus this
``input``. Background responses (``status: "queued"``) get their output from
later ``GET .../responses/{id}`` polls. A non-2xx response has no output.

A response that reports its usage (see :mod:`pipeline.formats._wire_usage`)
gives it to the assistant message it produced (:attr:`Conversation.usage`):
the conversation's own response, an earlier response held as server-side
state, or an earlier response whose answer the client re-sent in the history
exactly (the same neutral message; only a call id the response did not carry
and the spacing of JSON arguments may differ). An assistant message re-sent
changed gets no usage, and a response's usage is given once per file (to the
first conversation holding it); every usage given to no message is counted as
skipped (``unmatched model usage``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeAlias

import msgspec

from turnledger.pipeline.formats._common import (
    UNTYPED,
    Items,
    JSONObject,
    Sink,
    as_list,
    as_object,
    conversation,
    describe,
    get_object,
    get_str,
)
from turnledger.pipeline.formats._documents import describe_document
from turnledger.pipeline.formats._http import BodyError, Stream, decode_body
from turnledger.pipeline.formats._shapes import (
    RESPONSES,
    Shape,
    bedrock_model_id,
    polled_response_id,
    shape_for,
)
from turnledger.pipeline.formats._traffic import (
    call_shape,
    message_shape,
    unknown_model_call,
)
from turnledger.pipeline.formats._wire_usage import response_usage
from turnledger.pipeline.formats._yaml import load_yaml
from turnledger.pipeline.formats.model import TranscriptError
from turnledger.pipeline.formats.usage import UNMATCHED_USAGE

if TYPE_CHECKING:
    from turnledger.pipeline.formats._common import Indexed
    from turnledger.pipeline.formats.model import (
        Conversation,
        FormatName,
        ModelUsage,
        ParsedTranscript,
    )
    from turnledger.policies.messages import Message, ToolCall

EXPECTED = "a VCR cassette (a mapping with an `interactions` list)"

Labelled: TypeAlias = tuple[str, object]
"""A history item with a label saying where in the cassette it was found."""


def parse_cassette(data: bytes, *, name: str) -> ParsedTranscript:
    """Read a VCR cassette (YAML, or the same structure as JSON).

    Args:
        data: The file's bytes.
        name: The file name, for conversation sources.

    Returns:
        One conversation per request that no later request extends.

    Raises:
        TranscriptError: The file is not YAML, or has no ``interactions`` list.
    """
    interactions = _interactions(load_yaml(data, expected=EXPECTED))
    return read_interactions(interactions, name=name, fmt="cassette", sink=Sink())


def read_interactions(
    interactions: list[object],
    *,
    name: str,
    fmt: FormatName,
    sink: Sink,
    prefix: str = "interactions",
) -> ParsedTranscript:
    """Read recorded exchanges in the cassette's interaction shape.

    Other recording formats (HAR) convert their entries to this shape and
    share the rules above.

    Args:
        interactions: ``{request: {method, uri, headers, body}, response:
            {status: {code}, headers, body}}`` values, in file order.
        name: The file name, for conversation sources.
        fmt: The format name the result reports.
        sink: Collects what was skipped and the problems met.
        prefix: How locations name the list (``interactions``, ``log.entries``).

    Returns:
        One conversation per request that no later request extends.
    """
    recording = _Recording(sink, prefix)
    for index, interaction in enumerate(interactions):
        recording.read(index, interaction)
    return sink.transcript(fmt, recording.conversations(name))


def _interactions(document: object) -> list[object]:
    obj = as_object(document)
    interactions = as_list(obj.get("interactions")) if obj is not None else None
    if interactions is None:
        msg = f"Expected {EXPECTED}, found {describe_document(document)}"
        raise TranscriptError(msg)
    return interactions


@dataclass
class _Request:
    index: int
    shape: Shape
    body: JSONObject
    uri: str
    history: list[Labelled]
    output: list[Labelled]
    response_id: str | None
    answers: list[Message] | None = field(default=None, repr=False)

    @property
    def items(self) -> list[object]:
        return [item for _, item in self.history]


class _Recording:
    """The model requests of a cassette, with Responses server-side state."""

    def __init__(self, sink: Sink, prefix: str = "interactions") -> None:
        self._sink = sink
        self._prefix = prefix
        self._kind = "entry" if prefix == "log.entries" else "interaction"
        self._requests: list[_Request] = []
        self._by_response: dict[str, _Request] = {}
        self._outputs: dict[str, list[Labelled]] = {}
        self._conversation_heads: dict[str, _Request] = {}
        self._usage_at: dict[int, ModelUsage] = {}
        self._claimed: set[int] = set()

    def read(self, index: int, raw: object) -> None:
        self._sink.begin(self._kind, f"{self._prefix}[{index}]", raw)
        interaction = as_object(raw)
        if interaction is None:
            found = describe(raw)
            self._problem(
                f"{self._prefix}[{index}]", f"expected an object, found {found}"
            )
            return
        request = get_object(interaction, "request") or {}
        response = get_object(interaction, "response") or {}
        method = (get_str(request, "method") or "").upper()
        uri = get_str(request, "uri") or ""
        shape = shape_for(uri) if method == "POST" else None
        if shape is None:
            self._sink.skip(f"interaction:{method or UNTYPED}")
            polled = polled_response_id(uri) if method == "GET" else None
            if polled is not None:
                self._poll(index, polled, response)
            else:
                self._other(index, method, uri, interaction)
            return
        body = self._request_body(index, request)
        if body is not None:
            self._add(index, shape, body, uri, response)

    def _other(
        self, index: int, method: str, uri: str, interaction: JSONObject
    ) -> None:
        """Account for a request no shape reads; refuse one that is model traffic."""
        request = get_object(interaction, "request") or {}
        shape = None if method and uri else message_shape(interaction)
        if shape is not None:  # no request line: not an interaction we know
            self._sink.refuse(
                f"{self._prefix}[{index}] (no method and URI) holds {shape}"
            )
        body, undecodable = None, False
        try:
            body = decode_body(request) if method == "POST" else None
        except BodyError:
            undecodable = True
        traffic = unknown_model_call(method, uri, body, undecodable=undecodable)
        if traffic is not None:
            self._sink.refuse(f"{self._prefix}[{index}] {traffic}")
        self._sink.account(f"{method or UNTYPED} request", "not a model request")

    def _add(
        self, index: int, shape: Shape, body: JSONObject, uri: str, response: JSONObject
    ) -> None:
        output, response_id, events, decoded = self._response(index, shape, response)
        request = _Request(
            index, shape, body, uri, self._history(index, shape, body), output, None
        )
        usage = (
            None
            if decoded is None and events is None
            else response_usage(
                shape.name,
                decoded,
                events,
                body,
                self._sink,
                uri_model=bedrock_model_id(uri),
            )
        )
        if usage is not None:
            self._usage_at[index] = usage
        if shape is RESPONSES and response_id is not None:
            request.response_id = response_id
            self._by_response[response_id] = request
            self._outputs[response_id] = output
        conversation_id = _conversation_id(body) if shape is RESPONSES else None
        if conversation_id is not None:
            self._conversation_heads[conversation_id] = request
        self._requests.append(request)

    def _history(self, index: int, shape: Shape, body: JSONObject) -> list[Labelled]:
        prefix = f"{self._prefix}[{index}].request.{shape.history_key}"
        sent = shape.request_history(body)
        held = call_shape(body)
        if held is not None and call_shape(sent) is None:
            self._sink.refuse(
                f"{self._prefix}[{index}].request holds {held} outside the"
                f" {shape.name} history"
            )
        own = _labelled(prefix, sent)
        if shape is not RESPONSES:
            return own
        return self._server_state(body) + own

    def _server_state(self, body: JSONObject) -> list[Labelled]:
        previous = get_str(body, "previous_response_id")
        conversation_id = _conversation_id(body)
        head = self._by_response.get(previous or "")
        if head is None and conversation_id is not None:
            head = self._conversation_heads.get(conversation_id)
        return [] if head is None else head.history + self._output_of(head)

    def _output_of(self, request: _Request) -> list[Labelled]:
        if request.response_id is None:
            return request.output
        return self._outputs.get(request.response_id, request.output)

    def _request_body(self, index: int, request: JSONObject) -> JSONObject | None:
        label = f"{self._prefix}[{index}].request.body"
        try:
            body = decode_body(request)
        except BodyError as error:
            self._problem(label, str(error))
            return None
        obj = as_object(body)
        if obj is None:
            self._problem(label, f"expected a JSON object, found {describe(body)}")
        return obj

    def _response(
        self, index: int, shape: Shape, response: JSONObject
    ) -> tuple[list[Labelled], str | None, list[JSONObject] | None, object]:
        if not _succeeded(response):
            return [], None, None, None
        body = self._response_body(index, response)
        events = body.events if isinstance(body, Stream) else None
        if isinstance(body, Stream):
            items = shape.stream_output(body.events)
            response_id = _stream_response_id(body)
        else:
            items = shape.response_output(body)
            response_id = get_str(as_object(body) or {}, "id")
        held = call_shape(body.events if isinstance(body, Stream) else body or response)
        if held is not None and call_shape(items) is None:
            self._sink.refuse(
                f"{self._prefix}[{index}].response holds {held} that the"
                f" {shape.name} shape does not read"
            )
        labelled = _labelled(f"{self._prefix}[{index}].response", items)
        return labelled, response_id, events, None if events is not None else body

    def _response_body(self, index: int, response: JSONObject) -> object:
        label = f"{self._prefix}[{index}].response.body"
        try:
            body = decode_body(response)
        except BodyError as error:
            self._problem(label, str(error))
            return None
        if isinstance(body, Stream):
            for problem in body.problems:
                self._problem(label, problem)
        return body

    def _poll(self, index: int, response_id: str, response: JSONObject) -> None:
        body = self._response_body(index, response) if _succeeded(response) else None
        obj = as_object(body)
        output = as_list(obj.get("output")) if obj is not None else None
        if output:
            labelled = _labelled(f"{self._prefix}[{index}].response", output)
            self._outputs[response_id] = labelled
            request = self._by_response.get(response_id)
            usage = response_usage(
                RESPONSES.name, obj, None, request.body if request else {}, self._sink
            )
            if usage is not None:
                self._usage_at[index] = usage

    def _problem(self, label: str, message: str) -> None:
        self._sink.problem(0, f"{label}: {message[:1].lower()}{message[1:]}")

    def conversations(self, name: str) -> list[Conversation]:
        """Build a conversation for every request that no later one extends.

        A response's usage that no assistant message of them was given (its
        message is not in a conversation, or was re-sent changed) is counted
        as skipped (``unmatched model usage``), not recorded.
        """
        found = [
            self._conversation(request, name)
            for position, request in enumerate(self._requests)
            if not _superseded(request, self._requests[position + 1 :])
        ]
        for index in self._usage_at:
            if index not in self._claimed:
                self._sink.skip(UNMATCHED_USAGE)
        return found

    def _conversation(self, request: _Request, name: str) -> Conversation:
        labelled = request.history + self._output_of(request)
        items = Items([item for _, item in labelled], [label for label, _ in labelled])
        shape = request.shape
        indexed = shape.preamble(request.body, self._sink)
        indexed += shape.convert(items, self._sink)
        found = conversation(
            conversation_id=f"{self._prefix}[{request.index}]",
            indexed=indexed,
            origins=items.origins,
            source=f"{name} {self._prefix}[{request.index}] POST {request.uri}",
            api=shape.name,
        )
        usage = self._usage(request, indexed, items.origins)
        if any(used is not None for used in usage):
            found = msgspec.structs.replace(found, usage=tuple(usage))
        return found

    def _usage(
        self, request: _Request, indexed: list[Indexed], origins: list[str]
    ) -> list[ModelUsage | None]:
        """The usage of the model call that produced each assistant message.

        A message from a recorded response (this request's, or an earlier
        one's kept as server-side state) gets that response's usage. A message
        the client re-sent in the history gets the usage of the first earlier
        response of the same API, after the last one matched, whose first
        assistant message is exactly equal to it; one equal to none gets no
        usage. Each response's usage is given once in the file: to the first
        assistant message it produced, in the first conversation holding it.
        """
        earlier = [
            other
            for other in self._requests
            if other.index < request.index
            and other.shape is request.shape
            and other.index in self._usage_at
        ]
        usage: list[ModelUsage | None] = []
        after = -1
        for index, message in indexed:
            found: int | None = None
            if message.role == "assistant" and index >= 0:
                found = _response_index(origins[index], self._prefix)
                if found is None:
                    found = self._match(message, earlier, after)
                    after = found if found is not None else after
            if found is None or found in self._claimed or found not in self._usage_at:
                usage.append(None)
                continue
            self._claimed.add(found)
            usage.append(self._usage_at[found])
        return usage

    def _match(
        self, message: Message, earlier: list[_Request], after: int
    ) -> int | None:
        for other in earlier:
            if other.index <= after or other.index in self._claimed:
                continue
            if other.answers is None:
                output = self._output_of(other)
                items = Items([i for _, i in output], [label for label, _ in output])
                other.answers = [
                    m
                    for _, m in other.shape.convert(items, Sink())
                    if m.role == "assistant"
                ]
            if other.answers and _same(other.answers[0], message):
                return other.index
        return None


def _same(answer: Message, message: Message) -> bool:
    """Whether a re-sent message is exactly a response's answer.

    A call id the response did not carry (made up by the reader, as Gemini's
    and Ollama's calls may have none) is not compared: the client gave its own.
    """
    if answer == message:
        return True
    if len(answer.tool_calls) != len(message.tool_calls):
        return False
    calls = tuple(
        _as_sent(given, sent)
        for given, sent in zip(answer.tool_calls, message.tool_calls, strict=True)
    )
    # chars counts the ids too: measured on the re-sent message's
    return (
        msgspec.structs.replace(answer, tool_calls=calls, chars=message.chars)
        == message
    )


def _as_sent(given: ToolCall, sent: ToolCall) -> ToolCall:
    """``given`` with what the client may write differently taken from ``sent``.

    Those are a call id the response did not carry (none, or one the reader
    made up for a call without one), and the arguments when
    both are the same JSON value (re-serialised with other spacing).
    """
    if not given.id or _made_up(given.id, given.name):
        given = msgspec.structs.replace(given, id=sent.id)
    if given.arguments != sent.arguments and _same_json(
        given.arguments, sent.arguments
    ):
        given = msgspec.structs.replace(given, arguments=sent.arguments)
    return given


def _same_json(first: str, second: str) -> bool:
    try:
        return bool(msgspec.json.decode(first) == msgspec.json.decode(second))
    except msgspec.DecodeError:
        return False


def _made_up(call_id: str, name: str) -> bool:
    prefix, _, counter = call_id.rpartition(":")
    return counter.isdigit() and prefix.endswith(f":call:{name}")


def _superseded(request: _Request, later: list[_Request]) -> bool:
    items = request.items
    size = len(items)
    return any(
        other.shape is request.shape
        and len(other.history) >= size
        and other.items[:size] == items
        for other in later
    )


def _response_index(origin: str, prefix: str) -> int | None:
    """The interaction index of a ``prefix[k].response...`` label, else ``None``."""
    head, dot, _ = origin.partition("].response")
    if not dot or not head.startswith(f"{prefix}["):
        return None
    number = head[len(prefix) + 1 :]
    return (
        int(number)
        if number.isascii() and number.isdigit() and len(number) < 10
        else None
    )


def _labelled(prefix: str, items: list[object]) -> list[Labelled]:
    return [(f"{prefix}[{position}]", item) for position, item in enumerate(items)]


def _conversation_id(body: JSONObject) -> str | None:
    value = body.get("conversation")
    obj = as_object(value)
    return get_str(obj, "id") if obj is not None else get_str(body, "conversation")


def _succeeded(response: JSONObject) -> bool:
    code = (get_object(response, "status") or {}).get("code", 200)
    return not isinstance(code, int) or 200 <= code < 300


def _stream_response_id(stream: Stream) -> str | None:
    for event in stream.events:
        response = get_object(event, "response")
        response_id = get_str(response, "id") if response is not None else None
        if response_id is not None:
            return response_id
    return None
