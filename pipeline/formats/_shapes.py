"""The API shapes a recorded model request can have, chosen by its URI."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from turnledger.pipeline.formats import (
    anthropic,
    bedrock,
    cohere,
    gemini,
    mistral,
    ollama,
    openai_chat,
    openai_responses,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from turnledger.pipeline.formats._common import Indexed, Items, JSONObject, Sink
    from turnledger.pipeline.formats.model import FormatName


@dataclass(frozen=True)
class Shape:
    """How to read one API's request and response bodies.

    Attributes:
        name: The format name of the API.
        history_key: The request field holding the history, for labels.
        request_history: The history items a request body sends.
        response_output: The new items in a (non-streamed) response body.
        stream_output: The new items assembled from SSE event payloads.
        preamble: Messages from top-level request fields (system prompts).
        convert: Converts history items to neutral messages.
    """

    name: FormatName
    history_key: str
    request_history: Callable[[JSONObject], list[object]]
    response_output: Callable[[object], list[object]]
    stream_output: Callable[[list[JSONObject]], list[object]]
    preamble: Callable[[JSONObject, Sink], list[Indexed]]
    convert: Callable[[Items, Sink], list[Indexed]]


def _chat_preamble(_body: JSONObject, _sink: Sink) -> list[Indexed]:
    # Chat Completions (and Cohere, Mistral, Ollama) send the system prompt
    # inside `messages`.
    return []


CHAT = Shape(
    name="openai-chat",
    history_key="messages",
    request_history=openai_chat.request_history,
    response_output=openai_chat.response_output,
    stream_output=openai_chat.stream_output,
    preamble=_chat_preamble,
    convert=openai_chat.chat_messages,
)
RESPONSES = Shape(
    name="openai-responses",
    history_key="input",
    request_history=openai_responses.request_history,
    response_output=openai_responses.response_output,
    stream_output=openai_responses.stream_output,
    preamble=openai_responses.system_preamble,
    convert=openai_responses.responses_messages,
)
ANTHROPIC = Shape(
    name="anthropic",
    history_key="messages",
    request_history=anthropic.request_history,
    response_output=anthropic.response_output,
    stream_output=anthropic.stream_output,
    preamble=anthropic.system_preamble,
    convert=anthropic.anthropic_messages,
)
GEMINI = Shape(
    name="gemini",
    history_key="contents",
    request_history=gemini.request_history,
    response_output=gemini.response_output,
    stream_output=gemini.stream_output,
    preamble=gemini.system_preamble,
    convert=gemini.gemini_messages,
)
COHERE = Shape(
    name="cohere",
    history_key="messages",
    request_history=cohere.request_history,
    response_output=cohere.response_output,
    stream_output=cohere.stream_output,
    preamble=_chat_preamble,
    convert=cohere.cohere_messages,
)
MISTRAL = Shape(
    name="mistral",
    history_key="messages",
    request_history=mistral.request_history,
    response_output=mistral.response_output,
    stream_output=mistral.stream_output,
    preamble=_chat_preamble,
    convert=mistral.mistral_messages,
)
BEDROCK = Shape(
    name="bedrock-converse",
    history_key="messages",
    request_history=bedrock.request_history,
    response_output=bedrock.response_output,
    stream_output=bedrock.stream_output,
    preamble=bedrock.system_preamble,
    convert=bedrock.bedrock_messages,
)
OLLAMA = Shape(
    name="ollama",
    history_key="messages",
    request_history=ollama.request_history,
    response_output=ollama.response_output,
    stream_output=ollama.stream_output,
    preamble=_chat_preamble,
    convert=ollama.ollama_messages,
)


def shape_for(uri: str) -> Shape | None:
    """Return the API shape of a model endpoint, or ``None`` for other URIs.

    ``.../chat/completions`` is Chat Completions (also the OpenAI compatible
    endpoints of Gemini, Groq, Hugging Face, OpenRouter, Ollama and others,
    under any host and path prefix), except on a ``mistral.ai`` host, where
    it is Mistral's; ``.../responses`` is Responses, ``.../messages`` is
    Anthropic Messages, ``...:generateContent`` / ``...:streamGenerateContent``
    is Gemini (Google AI and Vertex AI), ``.../v2/chat`` is Cohere's Chat API
    v2, ``.../model/{id}/converse`` and ``.../converse-stream`` are AWS
    Bedrock Converse, ``.../model/{id}/invoke`` and
    ``.../invoke-with-response-stream`` of an ``{id}`` naming an Anthropic
    model are Anthropic Messages (Bedrock's InvokeModel passes the Messages
    body through; other model families' bodies are not read), ``.../api/chat``
    is Ollama's own chat API.

    Args:
        uri: The request URI.

    Returns:
        The shape, or ``None``.
    """
    path = _path(uri)
    if path.endswith((":generateContent", ":streamGenerateContent")):
        return GEMINI
    if path.endswith("/chat/completions"):
        return MISTRAL if _host(uri).endswith("mistral.ai") else CHAT
    if path.endswith("/v2/chat"):
        return COHERE
    if path.endswith("/api/chat"):
        return OLLAMA
    operation, model_id = _bedrock_operation(path)
    if operation in {"converse", "converse-stream"}:
        return BEDROCK
    if operation in {"invoke", "invoke-with-response-stream"} and (
        "anthropic" in model_id.lower()
    ):
        return ANTHROPIC
    if path.endswith("/responses"):
        return RESPONSES
    if path.endswith("/messages"):
        return ANTHROPIC
    return None


def polled_response_id(uri: str) -> str | None:
    """Return ``{id}`` of a ``GET .../responses/{id}`` polling URI, else ``None``."""
    head, _, tail = _path(uri).rpartition("/")
    return tail if head.endswith("/responses") and tail else None


def bedrock_model_id(uri: str) -> str:
    """The ``{id}`` of a Bedrock ``.../model/{id}/{operation}`` URI, else ``""``."""
    return unquote(_bedrock_operation(_path(uri))[1])


def _bedrock_operation(path: str) -> tuple[str, str]:
    """``(operation, model id)`` of ``.../model/{id}/{operation}``, or empty."""
    head, _, operation = path.rpartition("/")
    parent, _, model_id = head.rpartition("/")
    if not model_id or not parent.endswith("/model"):
        return "", ""
    return operation, model_id


def _host(uri: str) -> str:
    try:
        return (urlsplit(uri).hostname or "").lower()
    except ValueError:
        return ""


def _path(uri: str) -> str:
    try:
        return urlsplit(uri).path.rstrip("/")
    except ValueError:  # a malformed URI (e.g. an unclosed IPv6 bracket)
        return ""
