"""Anthropic Messages over httpx.

The request body is ``{"model", "max_tokens", "system"?, "messages", "tools"?,
"temperature"?}`` with the system text and messages rendered by
:func:`pipeline.export.to_anthropic` (tool results become ``tool_result`` blocks
of the next user message). ``text`` blocks of the answer are joined,
``tool_use`` blocks become tool calls with their ``input`` as JSON text, other
blocks (``thinking``, server tools) are skipped.

Usage is normalised to the neutral meaning, where input tokens include cached
ones: ``input_tokens + cache_read_input_tokens + cache_creation_input_tokens``
is the input, ``cache_read_input_tokens`` the cached part and
``cache_creation_input_tokens`` the cache-write part. The Messages API does not
report reasoning (thinking) tokens apart from ``output_tokens``, so the
reasoning count stays 0 and thinking is priced at the output rate. A negative
count makes the body malformed (a ``server`` error naming the field).

The API key is sent as ``x-api-key`` and never appears in an error message or a
repr.
"""

from __future__ import annotations

from typing import Annotated, Any, Final

import httpx
import msgspec

from turnledger.pipeline.export import to_anthropic
from turnledger.pipeline.providers._http import (
    ErrorDetail,
    decode_body,
    http_error,
    make_redactor,
    mentions_overflow,
    new_client,
    send,
    validated_url,
)
from turnledger.pipeline.providers.base import (
    ChatRequest,
    ChatResponse,
    ToolSpec,
    Usage,
)
from turnledger.policies.messages import ToolCall

__all__ = ["DEFAULT_BASE_URL", "AnthropicProvider", "messages_url"]

NAME: Final = "anthropic"
"""The provider kind."""

DEFAULT_BASE_URL: Final = "https://api.anthropic.com"
"""Anthropic's API."""

_STOP_REASONS: Final = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
}


def messages_url(base_url: str) -> str:
    """Return the Messages endpoint for a base URL.

    ``https://api.anthropic.com`` becomes ``https://api.anthropic.com/v1/messages``;
    a URL ending with ``/v1`` gets ``/messages``; one ending with ``/messages`` is
    used as is.

    Args:
        base_url: An ``http`` or ``https`` URL.

    Returns:
        The endpoint URL.

    Raises:
        ProviderConfigError: The URL is not an http(s) URL.
    """
    url = validated_url(base_url)
    path = url.path.rstrip("/")
    if not path.endswith("/messages"):
        path += "/messages" if path.endswith("/v1") else "/v1/messages"
    return str(url.copy_with(path=path))


# The wire types: only what is read. Unknown fields are ignored.


class _Block(msgspec.Struct, frozen=True):
    type: str
    text: str = ""
    id: str = ""
    name: str = ""
    input: Any = None


_Count = Annotated[int, msgspec.Meta(ge=0)]
"""A token count: a negative one makes the body malformed (a typed error)."""


class _WireUsage(msgspec.Struct, frozen=True):
    input_tokens: _Count | None = None
    output_tokens: _Count | None = None
    cache_read_input_tokens: _Count | None = None
    cache_creation_input_tokens: _Count | None = None


class _Message(msgspec.Struct, frozen=True):
    content: list[_Block]
    stop_reason: str | None = None
    usage: _WireUsage | None = None
    model: str | None = None


_decoder: Final = msgspec.json.Decoder(_Message)
_encoder: Final = msgspec.json.Encoder()


def _tool_json(tool: ToolSpec) -> dict[str, Any]:
    return {
        "name": tool.name,
        "description": tool.description,
        "input_schema": tool.parameters,
    }


def _body(model: str, max_tokens: int, request: ChatRequest) -> dict[str, Any]:
    system, messages = to_anthropic(request.messages)
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": (
            max_tokens
            if request.max_output_tokens is None
            else request.max_output_tokens
        ),
    }
    if system:
        body["system"] = system
    body["messages"] = messages
    if request.tools:
        body["tools"] = [_tool_json(tool) for tool in request.tools]
    if request.temperature is not None:
        body["temperature"] = request.temperature
    return body


def _tool_call(block: _Block) -> ToolCall:
    arguments = _encoder.encode({} if block.input is None else block.input)
    return ToolCall(id=block.id, name=block.name, arguments=arguments.decode())


def _usage(usage: _WireUsage | None) -> Usage | None:
    if usage is None:
        return None
    cached = usage.cache_read_input_tokens or 0
    written = usage.cache_creation_input_tokens or 0
    return Usage(
        input_tokens=(usage.input_tokens or 0) + cached + written,
        output_tokens=usage.output_tokens or 0,
        cached_input_tokens=cached,
        cache_write_tokens=written,
    )


def _response(message: _Message, model: str) -> ChatResponse:
    text = "".join(block.text for block in message.content if block.type == "text")
    calls = tuple(
        _tool_call(block) for block in message.content if block.type == "tool_use"
    )
    reason = message.stop_reason or ("tool_calls" if calls else "stop")
    return ChatResponse(
        text=text,
        tool_calls=calls,
        usage=_usage(message.usage),
        model=message.model or model,
        finish_reason=_STOP_REASONS.get(reason, reason),
    )


def _overflow(status: int, detail: ErrorDetail) -> bool:
    # 400 invalid_request_error "prompt is too long: N tokens > M maximum", or
    # 413 request_too_large: either way a smaller history is the fix.
    return status == 413 or mentions_overflow(detail.codes, detail.message)


class AnthropicProvider:
    """The Anthropic Messages API.

    Args:
        base_url: The server (see :func:`messages_url`).
        model: The model to ask for (keyword-only: the base URL has a default).
        api_key: Sent as ``x-api-key``.
        max_tokens: The answer cap when the request sets none (the API requires
            one).
        anthropic_version: Sent as ``anthropic-version``.
        timeout: Seconds for the whole request (connect, write, read).
        client: A connection pool to use (the caller closes it); by default the
            provider opens one and :meth:`aclose` closes it.

    Raises:
        ProviderConfigError: The base URL is not an http(s) URL.
    """

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        *,
        model: str,
        api_key: str | None = None,
        max_tokens: int = 4096,
        anthropic_version: str = "2023-06-01",
        timeout: float = 60.0,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self._url = messages_url(base_url)
        self._model = model
        self._max_tokens = max_tokens
        self._timeout = timeout
        headers = {
            "content-type": "application/json",
            "anthropic-version": anthropic_version,
        }
        if api_key:
            headers["x-api-key"] = api_key
        self._headers = headers
        self._redact = make_redactor([api_key])
        self._owns_client = client is None
        self._client = client or new_client(timeout)

    @property
    def name(self) -> str:
        """``anthropic``."""
        return NAME

    @property
    def model(self) -> str:
        """The model it asks for."""
        return self._model

    @property
    def url(self) -> str:
        """The Messages endpoint it posts to."""
        return self._url

    def __repr__(self) -> str:
        return (
            f"AnthropicProvider(url={self._redact(self._url)!r}, model={self._model!r})"
        )

    async def complete(self, request: ChatRequest) -> ChatResponse:
        """Post the request; return the answer.

        Args:
            request: The neutral request.

        Returns:
            The answer: joined text blocks, ``tool_use`` blocks as calls (in
            order), usage, model, and the stop reason normalised (``end_turn``
            is ``stop``, ``tool_use`` is ``tool_calls``, ``max_tokens`` is
            ``length``; others pass through).

        Raises:
            ProviderError: Classified: ``context_overflow`` ("prompt is too
                long", or HTTP 413), ``auth`` (401/403), ``rate_limit`` (429),
                ``server`` (5xx including 529 overloaded, or a body that does
                not decode), ``timeout``, ``network``, else ``bad_request``. The
                message never holds the key.
        """
        http_request = self._client.build_request(
            "POST",
            self._url,
            content=_encoder.encode(_body(self._model, self._max_tokens, request)),
            headers=self._headers,
            timeout=self._timeout,
        )
        response = await send(
            self._client,
            http_request,
            provider=NAME,
            timeout_seconds=self._timeout,
            redact=self._redact,
        )
        if not response.is_success:
            raise http_error(NAME, response, self._redact, overflow=_overflow)
        return _response(
            decode_body(NAME, response, _decoder, self._redact), self._model
        )

    async def aclose(self) -> None:
        """Close the connection pool, when the provider opened it."""
        if self._owns_client:
            await self._client.aclose()
