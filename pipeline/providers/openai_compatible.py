"""OpenAI-compatible Chat Completions over httpx (OpenAI, Ollama, vLLM, llama.cpp).

The request body is ``{"model", "messages", "tools"?, "max_tokens"?,
"temperature"?}`` with the messages rendered by
:func:`pipeline.export.to_openai_chat`. The answer is read from
``choices[0].message``; usage from ``usage.prompt_tokens`` (cache reads and
writes included), ``completion_tokens`` (reasoning included),
``prompt_tokens_details.cached_tokens`` (cache reads),
``prompt_tokens_details.cache_write_tokens`` (cache writes, as OpenRouter
reports them; OpenAI reports none) and
``completion_tokens_details.reasoning_tokens``. A negative count makes the
body malformed (a ``server`` error naming the field), so it is never priced.

The API key is sent as ``Authorization: Bearer`` and never appears in an error
message or a repr: every error text goes through the provider's redactor (the
literal key, then :func:`policies.scrubbing.scrub_text`).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Annotated, Any, Final

import httpx
import msgspec

from turnledger.pipeline.export import to_openai_chat
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
    ProviderError,
    ToolSpec,
    Usage,
)
from turnledger.policies.messages import ToolCall
from turnledger.policies.scrubbing import looks_like_secret_key

__all__ = ["OpenAICompatibleProvider", "chat_completions_url"]

NAME: Final = "openai-compatible"
"""The provider kind."""

_SUFFIX: Final = "/chat/completions"


def chat_completions_url(base_url: str) -> str:
    """Return the Chat Completions endpoint for a base URL.

    A URL that already ends with ``/chat/completions`` is used as is; one with a
    path (``http://host/v1``, ``https://openrouter.ai/api/v1``) gets
    ``/chat/completions`` appended; a bare host gets ``/v1/chat/completions``.
    A query string (``?api-version=...``) is kept.

    Args:
        base_url: An ``http`` or ``https`` URL.

    Returns:
        The endpoint URL.

    Raises:
        ProviderConfigError: The URL is not an http(s) URL.
    """
    url = validated_url(base_url)
    path = url.path.rstrip("/")
    if path.endswith(_SUFFIX):
        return str(url.copy_with(path=path))
    if not path:
        path = "/v1"
    return str(url.copy_with(path=path + _SUFFIX))


# The wire types: only what is read. Unknown fields are ignored.


class _ContentPart(msgspec.Struct, frozen=True):
    type: str = ""
    text: str = ""


class _Function(msgspec.Struct, frozen=True):
    name: str = ""
    # Servers that are not OpenAI sometimes send the arguments as an object.
    arguments: str | dict[str, Any] | None = None


class _WireToolCall(msgspec.Struct, frozen=True):
    function: _Function
    id: str | None = None


class _WireMessage(msgspec.Struct, frozen=True):
    content: str | list[_ContentPart] | None = None
    tool_calls: list[_WireToolCall] | None = None


class _Choice(msgspec.Struct, frozen=True):
    message: _WireMessage
    finish_reason: str | None = None


_Count = Annotated[int, msgspec.Meta(ge=0)]
"""A token count: a negative one makes the body malformed (a typed error)."""


class _PromptDetails(msgspec.Struct, frozen=True):
    cached_tokens: _Count | None = None
    cache_write_tokens: _Count | None = None


class _CompletionDetails(msgspec.Struct, frozen=True):
    reasoning_tokens: _Count | None = None


class _WireUsage(msgspec.Struct, frozen=True):
    prompt_tokens: _Count | None = None
    completion_tokens: _Count | None = None
    prompt_tokens_details: _PromptDetails | None = None
    completion_tokens_details: _CompletionDetails | None = None


class _Completion(msgspec.Struct, frozen=True):
    choices: list[_Choice]
    usage: _WireUsage | None = None
    model: str | None = None


_decoder: Final = msgspec.json.Decoder(_Completion)
_encoder: Final = msgspec.json.Encoder()


def _tool_json(tool: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }


def _body(model: str, request: ChatRequest) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "messages": to_openai_chat(request.messages),
    }
    if request.tools:
        body["tools"] = [_tool_json(tool) for tool in request.tools]
    if request.max_output_tokens is not None:
        body["max_tokens"] = request.max_output_tokens
    if request.temperature is not None:
        body["temperature"] = request.temperature
    return body


def _text(content: str | list[_ContentPart] | None) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.text for part in content if part.type == "text")


def _arguments(value: str | dict[str, Any] | None) -> str:
    if value is None:
        return "{}"
    if isinstance(value, str):
        return value
    return _encoder.encode(value).decode()


def _tool_call(call: _WireToolCall) -> ToolCall:
    # A call without an id (some llama.cpp builds) still needs one to be paired.
    call_id = call.id or f"call_{uuid.uuid4().hex[:24]}"
    return ToolCall(
        id=call_id,
        name=call.function.name,
        arguments=_arguments(call.function.arguments),
    )


def _usage(usage: _WireUsage | None) -> Usage | None:
    if usage is None:
        return None
    prompt = usage.prompt_tokens_details or _PromptDetails()
    completion = usage.completion_tokens_details or _CompletionDetails()
    return Usage(
        input_tokens=usage.prompt_tokens or 0,
        output_tokens=usage.completion_tokens or 0,
        cached_input_tokens=prompt.cached_tokens or 0,
        cache_write_tokens=prompt.cache_write_tokens or 0,
        reasoning_tokens=completion.reasoning_tokens or 0,
    )


def _finish_reason(reason: str | None, has_calls: bool) -> str:
    # Ollama answers tool calls with "stop"; legacy servers say "function_call".
    if has_calls and reason in (None, "stop", "function_call"):
        return "tool_calls"
    return reason or "stop"


def _response(
    completion: _Completion, model: str, url: str, status: int
) -> ChatResponse:
    if not completion.choices:
        message = (
            f"Expected at least one choice in the {NAME} answer from {url}, found 0"
        )
        raise ProviderError(kind="server", message=message, status=status)
    choice = completion.choices[0]
    calls = tuple(_tool_call(call) for call in choice.message.tool_calls or ())
    return ChatResponse(
        text=_text(choice.message.content),
        tool_calls=calls,
        usage=_usage(completion.usage),
        model=completion.model or model,
        finish_reason=_finish_reason(choice.finish_reason, bool(calls)),
    )


def _overflow(status: int, detail: ErrorDetail) -> bool:
    return status == 413 or mentions_overflow(detail.codes, detail.message)


def _secret_header_values(headers: Mapping[str, str]) -> list[str]:
    values: list[str] = []
    for name, value in headers.items():
        if looks_like_secret_key(name):
            # "Bearer <token>": the token alone may be echoed too.
            values += [value, *value.split()[-1:]]
    return values


class OpenAICompatibleProvider:
    """A Chat Completions endpoint: OpenAI, Ollama, vLLM, llama.cpp server, ...

    Args:
        base_url: The server (see :func:`chat_completions_url` for the rule).
        model: The model to ask for.
        api_key: Sent as ``Authorization: Bearer``; ``None`` for local servers.
        timeout: Seconds for the whole request (connect, write, read).
        extra_headers: Sent with every request (e.g. ``OpenAI-Organization``);
            values of secret-looking headers are redacted like the key.
        client: A connection pool to use (the caller closes it); by default the
            provider opens one and :meth:`aclose` closes it.

    Raises:
        ProviderConfigError: The base URL is not an http(s) URL.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 60.0,
        extra_headers: Mapping[str, str] | None = None,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self._url = chat_completions_url(base_url)
        self._model = model
        self._timeout = timeout
        headers = {"content-type": "application/json"}
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        headers.update(extra_headers or {})
        self._headers = headers
        self._redact = make_redactor([api_key, *_secret_header_values(headers)])
        self._owns_client = client is None
        self._client = client or new_client(timeout)

    @property
    def name(self) -> str:
        """``openai-compatible``."""
        return NAME

    @property
    def model(self) -> str:
        """The model it asks for."""
        return self._model

    @property
    def url(self) -> str:
        """The Chat Completions endpoint it posts to."""
        return self._url

    def __repr__(self) -> str:
        return (
            f"OpenAICompatibleProvider(url={self._redact(self._url)!r},"
            f" model={self._model!r})"
        )

    async def complete(self, request: ChatRequest) -> ChatResponse:
        """Post the request; return the first choice.

        Args:
            request: The neutral request.

        Returns:
            The answer: text, tool calls (parallel ones in order), usage, model
            and finish reason (``stop``, ``tool_calls``, ``length``, ...).

        Raises:
            ProviderError: Classified: ``context_overflow`` (code
                ``context_length_exceeded``, a message about the context length,
                or HTTP 413), ``auth`` (401/403), ``rate_limit`` (429),
                ``server`` (5xx, or a body that does not decode), ``timeout``,
                ``network``, else ``bad_request``. The message never holds the key.
        """
        http_request = self._client.build_request(
            "POST",
            self._url,
            content=_encoder.encode(_body(self._model, request)),
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
        completion = decode_body(NAME, response, _decoder, self._redact)
        url = self._redact(self._url)
        return _response(completion, self._model, url, response.status_code)

    async def aclose(self) -> None:
        """Close the connection pool, when the provider opened it."""
        if self._owns_client:
            await self._client.aclose()
