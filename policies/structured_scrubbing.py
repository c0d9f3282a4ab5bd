"""Scrubbing of structured values: parsed JSON, JSON text, tool calls, messages.

Built on the text rule of :mod:`policies.scrubbing`. :func:`scrub_json` walks
parsed JSON: the whole value of a secret-looking key
(:func:`~policies.scrubbing.looks_like_secret_key`) becomes ``"[REDACTED]"``
(and so does a high-entropy string under a secret-like key), every other string
is scrubbed as text, and a container nested deeper than :data:`MAX_JSON_DEPTH`
becomes :data:`TOO_DEEP`. :func:`scrub_json_text` does the same for JSON text and
falls back to :func:`~policies.scrubbing.scrub_text` when the text is not JSON;
:func:`scrub_tool_call` and :func:`scrub_message` apply these to the neutral
message model, so a message is safe to show in logs, observers and exports.
"""

from __future__ import annotations

from typing import Final, TypeAlias

import msgspec

from turnledger.policies.messages import Message, ToolCall, measure_chars
from turnledger.policies.scrubbing import REDACTED, looks_like_secret_key, scrub_text
from turnledger.policies.secret_shapes import high_entropy, key_words, secretish_key

MAX_JSON_DEPTH: Final = 64
"""Containers nested deeper than this are replaced by :data:`TOO_DEEP`."""

TOO_DEEP: Final = "[nested too deep]"
"""What :func:`scrub_json` puts in place of a container nested too deep."""

JsonValue: TypeAlias = (
    bool
    | int
    | float
    | str
    | list["JsonValue"]
    | tuple["JsonValue", ...]
    | dict[str, "JsonValue"]
    | None
)
"""A parsed JSON value (tuples are accepted and kept as tuples)."""


def scrub_json(value: JsonValue) -> JsonValue:
    """Scrub a parsed JSON value recursively.

    Args:
        value: A parsed JSON value (tool-call arguments, an event payload...).

    Returns:
        A new value: the value of each secret-looking key (any type) becomes
        ``"[REDACTED]"``, and so does a high-entropy string under a secret-like
        key (``"AccountKey": "<88 base64 characters>"``, see
        :mod:`policies.secret_shapes`); a string that holds a JSON object or
        array (JSON text inside JSON, as in tool arguments) is scrubbed as
        JSON and re-encoded compactly; every other string goes through
        :func:`scrub_text`.
        Numbers, booleans and ``None`` are returned as they are; a container
        nested deeper than :data:`MAX_JSON_DEPTH` becomes ``"[nested too
        deep]"`` (never a ``RecursionError``). Idempotent.
    """
    return _scrub_json(value, MAX_JSON_DEPTH)


def _scrub_json(value: JsonValue, depth: int) -> JsonValue:
    if isinstance(value, str):
        return _scrub_string(value, depth)
    if isinstance(value, dict | list | tuple) and depth <= 0:
        return TOO_DEEP
    if isinstance(value, dict):
        return {
            key: REDACTED if _redacts_whole(key, item) else _scrub_json(item, depth - 1)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_scrub_json(item, depth - 1) for item in value]
    if isinstance(value, tuple):
        return tuple(_scrub_json(item, depth - 1) for item in value)
    return value


def _scrub_string(text: str, depth: int) -> str:
    """A string holding a JSON object or array is scrubbed as JSON, else as text."""
    if depth > 0 and text.lstrip()[:1] in ("{", "["):
        parsed, inner = _decode(text)
        if parsed and isinstance(inner, dict | list):
            return msgspec.json.encode(_scrub_json(inner, depth - 1)).decode()
    return scrub_text(text)


def _redacts_whole(key: str, item: JsonValue) -> bool:
    if looks_like_secret_key(key):
        return True
    return (
        isinstance(item, str) and secretish_key(key_words(key)) and high_entropy(item)
    )


def scrub_json_text(text: str) -> str:
    """Scrub JSON text, such as a tool call's arguments.

    Args:
        text: JSON text, or text that is meant to be JSON.

    Returns:
        When ``text`` parses: :func:`scrub_json` of it, re-encoded as compact
        JSON. Otherwise :func:`scrub_text` of ``text``. Idempotent.
    """
    parsed, value = _decode(text)
    if not parsed:
        text = scrub_text(text)
        # Scrubbing can drop what made the text invalid (a bad escape inside a
        # redacted value); such text is JSON now and must take the JSON path, or
        # a second pass would scrub it differently.
        parsed, value = _decode(text)
        if not parsed:
            return text
    return msgspec.json.encode(scrub_json(value)).decode()


def _decode(text: str) -> tuple[bool, JsonValue]:
    try:
        value: JsonValue = msgspec.json.decode(text)
    except (msgspec.DecodeError, UnicodeEncodeError, RecursionError):
        return False, None  # nested past the decoder's depth: scrubbed as text
    return True, value


def scrub_tool_call(call: ToolCall) -> ToolCall:
    """Return a tool call with its JSON arguments scrubbed.

    Args:
        call: A tool call as the model produced it.

    Returns:
        The same call with ``arguments`` passed through :func:`scrub_json_text`.
    """
    return msgspec.structs.replace(call, arguments=scrub_json_text(call.arguments))


def scrub_message(message: Message) -> Message:
    """Return a message safe to show outside the model (logs, observers, exports).

    Args:
        message: A provider-visible message.

    Returns:
        The message with its text, tool-call arguments and tool-result contents
        scrubbed, and ``chars`` measured again.
    """
    text = scrub_text(message.text)
    calls = tuple(scrub_tool_call(call) for call in message.tool_calls)
    results = tuple(
        msgspec.structs.replace(result, content=scrub_text(result.content))
        for result in message.tool_results
    )
    return msgspec.structs.replace(
        message,
        text=text,
        tool_calls=calls,
        tool_results=results,
        chars=measure_chars(text, calls, results),
    )
