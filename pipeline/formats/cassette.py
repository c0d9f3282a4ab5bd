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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

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
    polled_response_id,
    shape_for,
)
from turnledger.pipeline.formats._traffic import (
    call_shape,
    message_shape,
    unknown_model_call,
)
from turnledger.pipeline.formats._yaml import load_yaml
from turnledger.pipeline.formats.model import TranscriptError

if TYPE_CHECKING:
    from turnledger.pipeline.formats.model import (
        Conversation,
        FormatName,
        ParsedTranscript,
    )

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
        output, response_id = self._response(index, shape, response)
        request = _Request(
            index, shape, body, uri, self._history(index, shape, body), output, None
        )
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
    ) -> tuple[list[Labelled], str | None]:
        if not _succeeded(response):
            return [], None
        body = self._response_body(index, response)
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
        return _labelled(f"{self._prefix}[{index}].response", items), response_id

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

    def _problem(self, label: str, message: str) -> None:
        self._sink.problem(0, f"{label}: {message[:1].lower()}{message[1:]}")

    def conversations(self, name: str) -> list[Conversation]:
        """Build a conversation for every request that no later one extends."""
        return [
            self._conversation(request, name)
            for position, request in enumerate(self._requests)
            if not _superseded(request, self._requests[position + 1 :])
        ]

    def _conversation(self, request: _Request, name: str) -> Conversation:
        labelled = request.history + self._output_of(request)
        items = Items([item for _, item in labelled], [label for label, _ in labelled])
        shape = request.shape
        indexed = shape.preamble(request.body, self._sink)
        indexed += shape.convert(items, self._sink)
        return conversation(
            conversation_id=f"{self._prefix}[{request.index}]",
            indexed=indexed,
            origins=items.origins,
            source=f"{name} {self._prefix}[{request.index}] POST {request.uri}",
            api=shape.name,
        )


def _superseded(request: _Request, later: list[_Request]) -> bool:
    items = request.items
    size = len(items)
    return any(
        other.shape is request.shape
        and len(other.history) >= size
        and other.items[:size] == items
        for other in later
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
