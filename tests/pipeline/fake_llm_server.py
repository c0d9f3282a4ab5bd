"""A real local HTTP server that speaks OpenAI Chat Completions and Anthropic Messages.

It binds 127.0.0.1 on a free port, serves from a thread, plays a queue of
scripted replies per wire format and records every request it receives. The
providers talk to it over real sockets, so tests cover the whole httpx path:
headers, bodies, status codes, timeouts and connection errors.

Routes (by path suffix, so any base URL rule can be checked through
:attr:`RecordedRequest.path`):

- ``.../chat/completions``: the ``openai`` queue;
- ``.../responses``: the ``responses`` queue (OpenAI's Responses API);
- ``.../messages``: the ``anthropic`` queue;
- anything else: 404.

A request that finds its queue empty gets a 500 whose error ``type`` is
``fake_server_empty_queue`` (it is still recorded).

Example:
    ::

        from tests.pipeline.fake_llm_server import (
            FakeLLMServer, ToolUse, openai_text, openai_tool_calls,
        )

        with FakeLLMServer() as server:
            server.queue_openai(
                openai_tool_calls(ToolUse("call_1", "memory_recall", {"q": "x"})),
                openai_text("Done.", usage=(120, 8, 100)),
            )
            provider = OpenAICompatibleProvider(
                server.openai_base_url, "gpt-test", api_key="sk-test-key"
            )
            ...  # await provider.complete(...) twice
            sent = server.requests[0]
            assert sent.headers["authorization"] == "Bearer sk-test-key"
            assert sent.body["tools"][0]["function"]["name"] == "memory_recall"

    As a pytest fixture::

        @pytest.fixture(name="llm_server")
        def _llm_server():
            with FakeLLMServer() as server:
                yield server

A reply may also be a callable ``(RecordedRequest) -> Reply`` that answers from
what was sent (an engine test can check the history it got, then answer).
"""

from __future__ import annotations

import itertools
import json
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal, NamedTuple, Self, TypeAlias

Route: TypeAlias = Literal["openai", "responses", "anthropic", "gemini"]
OPENAI_PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"
SLOW_SECONDS = 5.0
"""How long a :func:`slow` reply waits by default (cut short when the server stops)."""

UsageTuple: TypeAlias = (
    tuple[int, int] | tuple[int, int, int] | tuple[int, int, int, int]
)
"""``(input, output[, cached[, fourth]])`` in the wire format's own fields.

The fourth count is ``completion_tokens_details.reasoning_tokens`` on the OpenAI
wire and ``cache_creation_input_tokens`` on the Anthropic one. For cache writes
on the OpenAI wire (OpenRouter's ``prompt_tokens_details.cache_write_tokens``)
use :func:`openai_usage_details`.
"""


@dataclass(frozen=True)
class Reply:
    """One scripted HTTP answer.

    Attributes:
        status: The HTTP status.
        body: A JSON value (encoded), or bytes sent as they are.
        headers: Extra response headers.
        delay: Seconds to wait before answering.
    """

    status: int = 200
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass(frozen=True)
class RecordedRequest:
    """A request the server received.

    Attributes:
        method: ``POST``, ``GET``, ...
        path: The path with its query string.
        route: ``openai``, ``anthropic``, or ``None`` for an unknown path.
        headers: Header names lower-cased.
        body: The parsed JSON body (``None`` when absent or not JSON).
        raw: The body bytes.
    """

    method: str
    path: str
    route: Route | None
    headers: dict[str, str]
    body: Any
    raw: bytes


ReplySource: TypeAlias = Reply | Callable[[RecordedRequest], Reply]


class ToolUse(NamedTuple):
    """A tool call in a scripted answer (``arguments``: a dict, or JSON text)."""

    id: str
    name: str
    arguments: Any = None


# Reply builders: OpenAI Chat Completions.

_ids = itertools.count(1)


def _openai_usage(usage: UsageTuple) -> dict[str, Any]:
    prompt, completion, *details = usage
    wire: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if details:
        wire["prompt_tokens_details"] = {"cached_tokens": details[0]}
    if len(details) > 1:
        wire["completion_tokens_details"] = {"reasoning_tokens": details[1]}
    return wire


def openai_usage_details(
    text: str,
    *,
    prompt_tokens: int,
    completion_tokens: int,
    prompt_tokens_details: Mapping[str, int] | None = None,
    completion_tokens_details: Mapping[str, int] | None = None,
) -> Reply:
    """A Chat Completions text answer whose usage details are given field by field."""
    reply = openai_text(text, usage=(prompt_tokens, completion_tokens))
    usage = reply.body["usage"]
    if prompt_tokens_details is not None:
        usage["prompt_tokens_details"] = dict(prompt_tokens_details)
    if completion_tokens_details is not None:
        usage["completion_tokens_details"] = dict(completion_tokens_details)
    return reply


def _openai_completion(
    message: dict[str, Any],
    finish_reason: str,
    usage: UsageTuple | None,
    model: str | None,
) -> Reply:
    body: dict[str, Any] = {
        "id": f"chatcmpl-fake{next(_ids)}",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
    }
    if model is not None:
        body["model"] = model
    if usage is not None:
        body["usage"] = _openai_usage(usage)
    return Reply(body=body)


def openai_text(
    text: str,
    *,
    usage: UsageTuple | None = None,
    model: str | None = None,
    finish_reason: str = "stop",
) -> Reply:
    """A Chat Completions answer with text (``model``: the request's by default)."""
    message = {"role": "assistant", "content": text}
    return _openai_completion(message, finish_reason, usage, model)


def _arguments_text(arguments: Any) -> str:
    if isinstance(arguments, str):
        return arguments
    return json.dumps({} if arguments is None else arguments)


def openai_tool_calls(
    *calls: ToolUse,
    text: str | None = None,
    usage: UsageTuple | None = None,
    model: str | None = None,
    finish_reason: str = "tool_calls",
) -> Reply:
    """A Chat Completions answer with (parallel) tool calls."""
    message = {
        "role": "assistant",
        "content": text,
        "tool_calls": [
            {
                "id": call.id,
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": _arguments_text(call.arguments),
                },
            }
            for call in calls
        ],
    }
    return _openai_completion(message, finish_reason, usage, model)


def openai_function_call(
    name: str, arguments: Any = None, *, usage: UsageTuple | None = None
) -> Reply:
    """A Chat Completions answer of OpenAI's legacy function calling.

    The message's ``function_call`` (``{name, arguments}``, no id), as the API
    answers a request naming ``functions``.
    """
    function = {"name": name, "arguments": _arguments_text(arguments)}
    message = {"role": "assistant", "content": None, "function_call": function}
    return _openai_completion(message, "function_call", usage, None)


def openai_error(
    status: int,
    message: str,
    *,
    type: str = "invalid_request_error",  # noqa: A002 -- the wire field's name
    code: str | None = None,
) -> Reply:
    """An OpenAI error body: ``{"error": {"message", "type", "param", "code"}}``."""
    error = {"message": message, "type": type, "param": None, "code": code}
    return Reply(status=status, body={"error": error})


def openai_stream(reply: Reply) -> Callable[[RecordedRequest], Reply]:
    """A Chat Completions answer (:func:`openai_text`, :func:`openai_tool_calls`) streamed.

    As server-sent events, the way the API streams (``stream: true``): a first
    chunk naming the role, the text in two pieces, each tool call in two chunks
    (its id and name, then its arguments), a chunk with the finish reason, then,
    when the answer has usage, a chunk without choices holding it (what
    ``stream_options.include_usage`` asks for), and ``data: [DONE]``. Each chunk
    names the answer's model, else the one the request asked for.
    """
    body = reply.body
    (choice,) = body["choices"]
    message = choice["message"]

    def streamed(recorded: RecordedRequest) -> Reply:
        asked = recorded.body.get("model") if isinstance(recorded.body, dict) else None
        head = {
            "id": body["id"],
            "object": "chat.completion.chunk",
            "created": body["created"],
            "model": body.get("model") or asked or "fake-model",
        }

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            choices = [{"index": 0, "delta": delta, "finish_reason": finish}]
            return {**head, "choices": choices}

        chunks = [chunk({"role": "assistant", "content": ""})]
        text = message.get("content") or ""
        if text:
            half = len(text) // 2
            chunks += [chunk({"content": text[:half]}), chunk({"content": text[half:]})]
        for index, call in enumerate(message.get("tool_calls") or ()):
            function = call["function"]
            opened = {
                "index": index,
                "id": call["id"],
                "type": "function",
                "function": {"name": function["name"], "arguments": ""},
            }
            rest = {"index": index, "function": {"arguments": function["arguments"]}}
            chunks += [chunk({"tool_calls": [opened]}), chunk({"tool_calls": [rest]})]
        chunks.append(chunk({}, choice["finish_reason"]))
        if "usage" in body:
            chunks.append({**head, "choices": [], "usage": body["usage"]})
        events = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks)
        return Reply(
            body=(events + "data: [DONE]\n\n").encode(),
            headers={"content-type": "text/event-stream"},
        )

    return streamed


def openai_context_overflow() -> Reply:
    """OpenAI's 400 ``context_length_exceeded``, as it sends it."""
    return openai_error(
        400,
        "This model's maximum context length is 128000 tokens. However, your"
        " messages resulted in 130017 tokens. Please reduce the length of the"
        " messages.",
        code="context_length_exceeded",
    )


# Reply builders: OpenAI Responses.


def _response(output: list[dict[str, Any]], usage: UsageTuple | None) -> Reply:
    number = next(_ids)
    body: dict[str, Any] = {
        "id": f"resp_fake{number}",
        "object": "response",
        "created_at": 1_700_000_000,
        "status": "completed",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }
    if usage is not None:
        prompt, completion, *details = usage
        body["usage"] = {
            "input_tokens": prompt,
            "output_tokens": completion,
            "total_tokens": prompt + completion,
            "input_tokens_details": {"cached_tokens": details[0] if details else 0},
            "output_tokens_details": {
                "reasoning_tokens": details[1] if len(details) > 1 else 0
            },
        }
    return Reply(body=body)


def responses_text(text: str, *, usage: UsageTuple | None = None) -> Reply:
    """A Responses API answer: one assistant message of one ``output_text``."""
    message = {
        "type": "message",
        "id": f"msg_fake{next(_ids)}",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }
    return _response([message], usage)


def responses_tool_calls(*calls: ToolUse, usage: UsageTuple | None = None) -> Reply:
    """A Responses API answer of ``function_call`` items (``call_id``: each call's id).

    Each item has an id of its own besides (``fc_...``), as the API gives it.
    """
    items = [
        {
            "type": "function_call",
            "id": f"fc_fake{next(_ids)}",
            "call_id": call.id,
            "name": call.name,
            "arguments": _arguments_text(call.arguments),
            "status": "completed",
        }
        for call in calls
    ]
    return _response(items, usage)


# Reply builders: Anthropic Messages.


def _anthropic_usage(usage: UsageTuple) -> dict[str, Any]:
    input_tokens, output_tokens, *cache = usage
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cache_creation_input_tokens": cache[1] if len(cache) > 1 else 0,
        "cache_read_input_tokens": cache[0] if cache else 0,
    }


def _anthropic_message(
    content: list[dict[str, Any]],
    stop_reason: str,
    usage: UsageTuple | None,
    model: str | None,
) -> Reply:
    body: dict[str, Any] = {
        "id": f"msg_fake{next(_ids)}",
        "type": "message",
        "role": "assistant",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
    }
    if model is not None:
        body["model"] = model
    if usage is not None:
        body["usage"] = _anthropic_usage(usage)
    return Reply(body=body)


def anthropic_text(
    text: str,
    *,
    usage: UsageTuple | None = None,
    model: str | None = None,
    stop_reason: str = "end_turn",
) -> Reply:
    """A Messages answer with one text block (``model``: the request's by default)."""
    return _anthropic_message(
        [{"type": "text", "text": text}], stop_reason, usage, model
    )


def anthropic_tool_use(
    *calls: ToolUse,
    text: str | None = None,
    usage: UsageTuple | None = None,
    model: str | None = None,
    stop_reason: str = "tool_use",
) -> Reply:
    """A Messages answer with an optional text block, then ``tool_use`` blocks."""
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    for call in calls:
        arguments = call.arguments
        if isinstance(arguments, str):
            arguments = json.loads(arguments)
        content.append(
            {
                "type": "tool_use",
                "id": call.id,
                "name": call.name,
                "input": {} if arguments is None else arguments,
            }
        )
    return _anthropic_message(content, stop_reason, usage, model)


def anthropic_stream(reply: Reply) -> Callable[[RecordedRequest], Reply]:
    """A Messages answer (:func:`anthropic_text`, :func:`anthropic_tool_use`) streamed.

    As server-sent events, the way the API streams (``stream: true``):
    ``message_start`` (the message without its content, the input tokens in
    its usage), each block opened, its text or its input's JSON in two
    deltas, closed; ``message_delta`` with the stop reason and the output
    tokens; ``message_stop``. The message names the answer's model, else the
    one the request asked for.
    """
    body = reply.body

    def streamed(recorded: RecordedRequest) -> Reply:
        asked = recorded.body.get("model") if isinstance(recorded.body, dict) else None
        usage = body.get("usage") or {"input_tokens": 0, "output_tokens": 0}
        started = {
            **{k: v for k, v in body.items() if k not in {"content", "usage"}},
            "model": body.get("model") or asked or "fake-model",
            "content": [],
            "stop_reason": None,
            "usage": {**usage, "output_tokens": 1},
        }
        events: list[tuple[str, dict[str, Any]]] = [
            ("message_start", {"type": "message_start", "message": started})
        ]
        for index, block in enumerate(body["content"]):
            if block["type"] == "text":
                opened = {"type": "text", "text": ""}
                whole, kind, field = block["text"], "text_delta", "text"
            else:
                opened = {**block, "input": {}}
                whole = json.dumps(block["input"])
                kind, field = "input_json_delta", "partial_json"
            events.append(
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": opened,
                    },
                )
            )
            half = len(whole) // 2
            for piece in (whole[:half], whole[half:]):
                delta = {"type": kind, field: piece}
                events.append(
                    (
                        "content_block_delta",
                        {"type": "content_block_delta", "index": index, "delta": delta},
                    )
                )
            events.append(
                ("content_block_stop", {"type": "content_block_stop", "index": index})
            )
        events += [
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {
                        "stop_reason": body["stop_reason"],
                        "stop_sequence": None,
                    },
                    "usage": {"output_tokens": usage["output_tokens"]},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
        text = "".join(f"event: {n}\ndata: {json.dumps(d)}\n\n" for n, d in events)
        return Reply(body=text.encode(), headers={"content-type": "text/event-stream"})

    return streamed


def anthropic_error(status: int, error_type: str, message: str) -> Reply:
    """An Anthropic error body: ``{"type": "error", "error": {"type", "message"}}``."""
    body = {
        "type": "error",
        "error": {"type": error_type, "message": message},
        "request_id": f"req_fake{next(_ids)}",
    }
    return Reply(status=status, body=body)


def anthropic_prompt_too_long() -> Reply:
    """Anthropic's 400 for a prompt over the context window, as it sends it."""
    return anthropic_error(
        400,
        "invalid_request_error",
        "prompt is too long: 210000 tokens > 200000 maximum",
    )


# Reply builders: Gemini generateContent.


def _gemini_answer(
    parts: list[dict[str, Any]], finish: str, usage: tuple[int, ...] | None
) -> Reply:
    body: dict[str, Any] = {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": finish}
        ],
        "modelVersion": "gemini-test",
        "responseId": f"resp_gemini{next(_ids)}",
    }
    if usage is not None:
        prompt, candidates, *more = usage
        metadata = {
            "promptTokenCount": prompt,
            "candidatesTokenCount": candidates,
            "totalTokenCount": prompt + candidates + sum(more[1:2]),
        }
        if more:
            metadata["cachedContentTokenCount"] = more[0]
        if len(more) > 1:
            metadata["thoughtsTokenCount"] = more[1]
        body["usageMetadata"] = metadata
    return Reply(body=body)


def gemini_text(text: str, *, usage: tuple[int, ...] | None = None) -> Reply:
    """A ``generateContent`` answer of one text part.

    ``usage``: ``(prompt, candidates[, cached[, thoughts]])`` token counts, as
    ``usageMetadata`` has them (thoughts are counted apart from candidates,
    and in the total).
    """
    return _gemini_answer([{"text": text}], "STOP", usage)


def gemini_function_calls(
    *calls: ToolUse, usage: tuple[int, ...] | None = None
) -> Reply:
    """A ``generateContent`` answer of ``functionCall`` parts.

    Each with its ``id`` as given; without one when the id is empty (as the
    Gemini API mostly answers).
    """
    parts = [
        {
            "functionCall": {
                **({"id": call.id} if call.id else {}),
                "name": call.name,
                "args": call.arguments,
            }
        }
        for call in calls
    ]
    return _gemini_answer(parts, "STOP", usage)


# Reply builders: any route.


def slow(reply: Reply, seconds: float = SLOW_SECONDS) -> Reply:
    """The same reply, sent after ``seconds`` (for client timeouts)."""
    return replace(reply, delay=seconds)


def malformed(status: int = 200) -> Reply:
    """A body that claims to be JSON and is cut short."""
    return Reply(
        status=status,
        body=b'{"id": "cut", "choices": [',
        headers={"content-type": "application/json"},
    )


# The server.


def _route_of(path: str) -> Route | None:
    path = path.split("?", 1)[0].rstrip("/")
    if path.endswith("/chat/completions"):
        return "openai"
    if path.endswith("/responses"):
        return "responses"
    if path.endswith("/messages"):
        return "anthropic"
    if path.endswith(":generateContent"):
        return "gemini"
    return None


def _parse_json(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def do_POST(self) -> None:
        self.server.fake._serve(self)

    do_GET = do_POST  # noqa: N815 -- the stdlib dispatches on this name

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 -- stdlib signature
        """Stay quiet: the requests are recorded instead."""


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    fake: FakeLLMServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Ignore clients that hung up (a timed-out provider closes early)."""


class FakeLLMServer:
    """A local server playing scripted replies per wire format.

    Use it as a context manager (or call :meth:`start` and :meth:`stop`).
    Queue replies with :meth:`queue_openai` / :meth:`queue_anthropic`; read what
    was sent in :attr:`requests`.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queues: dict[Route, deque[ReplySource]] = {
            "openai": deque(),
            "responses": deque(),
            "anthropic": deque(),
            "gemini": deque(),
        }
        self._requests: list[RecordedRequest] = []
        self._stopping = threading.Event()
        self._http: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # Lifecycle.

    def start(self) -> Self:
        """Bind 127.0.0.1 on a free port and serve from a daemon thread."""
        self._http = _HTTPServer(("127.0.0.1", 0), _Handler)
        self._http.fake = self
        self._thread = threading.Thread(
            target=self._http.serve_forever,
            kwargs={"poll_interval": 0.01},
            name="fake-llm-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving (slow replies are cut short) and release the port."""
        self._stopping.set()
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # Addresses.

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``: the Anthropic base URL."""
        assert self._http is not None, "the server is not started"
        host, port = self._http.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def openai_base_url(self) -> str:
        """``<url>/v1``: the OpenAI-compatible base URL."""
        return f"{self.url}/v1"

    # Script and record.

    def queue_openai(self, *replies: ReplySource) -> None:
        """Queue replies for ``.../chat/completions``, played in order."""
        self._queue("openai", replies)

    def queue_responses(self, *replies: ReplySource) -> None:
        """Queue replies for ``.../responses``, played in order."""
        self._queue("responses", replies)

    def queue_anthropic(self, *replies: ReplySource) -> None:
        """Queue replies for ``.../messages``, played in order."""
        self._queue("anthropic", replies)

    def queue_gemini(self, *replies: ReplySource) -> None:
        """Queue replies for ``.../models/MODEL:generateContent``, played in order."""
        self._queue("gemini", replies)

    def _queue(self, route: Route, replies: tuple[ReplySource, ...]) -> None:
        with self._lock:
            self._queues[route].extend(replies)

    def pending(self, route: Route) -> int:
        """How many replies are still queued for a route."""
        with self._lock:
            return len(self._queues[route])

    def assert_drained(self) -> None:
        """Fail when some queued reply was never requested."""
        left = {route: self.pending(route) for route in self._queues}
        assert not any(left.values()), f"replies left unplayed: {left}"

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received, in arrival order (a copy)."""
        with self._lock:
            return list(self._requests)

    def requests_for(self, route: Route) -> list[RecordedRequest]:
        """The requests received on one route."""
        return [r for r in self.requests if r.route == route]

    # Serving (handler threads).

    def _serve(self, handler: _Handler) -> None:
        length = int(handler.headers.get("content-length") or 0)
        raw = handler.rfile.read(length) if length else b""
        recorded = RecordedRequest(
            method=handler.command,
            path=handler.path,
            route=_route_of(handler.path),
            headers={name.lower(): value for name, value in handler.headers.items()},
            body=_parse_json(raw),
            raw=raw,
        )
        reply = self._reply_for(recorded)
        if reply.delay and self._stopping.wait(reply.delay):
            return
        self._write(handler, reply, recorded)

    def _reply_for(self, recorded: RecordedRequest) -> Reply:
        with self._lock:
            self._requests.append(recorded)
            if recorded.route is None:
                return Reply(status=404, body={"error": {"message": "no such route"}})
            queue = self._queues[recorded.route]
            source = queue.popleft() if queue else None
        if source is None:
            message = f"fake server: no reply queued for {recorded.route}"
            error = {"message": message, "type": "fake_server_empty_queue"}
            return Reply(status=500, body={"error": error})
        return source(recorded) if callable(source) else source

    @staticmethod
    def _encoded(reply: Reply, recorded: RecordedRequest) -> bytes:
        if isinstance(reply.body, bytes):
            return reply.body
        body = reply.body
        # Like the real APIs, an answer names the model it was asked for.
        # (Gemini names it in the URL, its answer in modelVersion.)
        if (
            reply.status < 300
            and isinstance(body, dict)
            and "model" not in body
            and recorded.route != "gemini"
        ):
            requested = (
                recorded.body.get("model") if isinstance(recorded.body, dict) else None
            )
            body = {**body, "model": requested or "fake-model"}
        # A Responses API answer repeats the request's instructions.
        if recorded.route == "responses" and isinstance(body, dict):
            sent = recorded.body if isinstance(recorded.body, dict) else {}
            body = {"instructions": sent.get("instructions"), **body}
        return json.dumps(body).encode()

    def _write(
        self, handler: _Handler, reply: Reply, recorded: RecordedRequest
    ) -> None:
        payload = self._encoded(reply, recorded)
        try:
            handler.send_response(reply.status)
            headers = {"content-type": "application/json", **reply.headers}
            for name, value in headers.items():
                handler.send_header(name, value)
            handler.send_header("content-length", str(len(payload)))
            handler.end_headers()
            handler.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            return
