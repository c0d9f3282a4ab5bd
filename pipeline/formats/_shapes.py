"""The API shapes a recorded model request can have, chosen by its URI."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from turnledger.pipeline.formats import anthropic, gemini, openai_chat, openai_responses

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
    # Chat Completions sends its system prompt inside `messages`.
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


def shape_for(uri: str) -> Shape | None:
    """Return the API shape of a model endpoint, or ``None`` for other URIs.

    ``.../chat/completions`` is Chat Completions (also Gemini's OpenAI
    compatible endpoint), ``.../responses`` is Responses, ``.../messages`` is
    Anthropic Messages, ``...:generateContent`` / ``...:streamGenerateContent``
    is Gemini (Google AI and Vertex AI).

    Args:
        uri: The request URI.

    Returns:
        The shape, or ``None``.
    """
    path = _path(uri)
    if path.endswith((":generateContent", ":streamGenerateContent")):
        return GEMINI
    if path.endswith("/chat/completions"):
        return CHAT
    if path.endswith("/responses"):
        return RESPONSES
    if path.endswith("/messages"):
        return ANTHROPIC
    return None


def polled_response_id(uri: str) -> str | None:
    """Return ``{id}`` of a ``GET .../responses/{id}`` polling URI, else ``None``."""
    head, _, tail = _path(uri).rpartition("/")
    return tail if head.endswith("/responses") and tail else None


def _path(uri: str) -> str:
    try:
        return urlsplit(uri).path.rstrip("/")
    except ValueError:  # a malformed URI (e.g. an unclosed IPv6 bracket)
        return ""
