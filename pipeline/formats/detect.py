"""Format auto-detection (``--format auto``) from a file's content.

The content decides; the file name only breaks the tie for YAML. JSON Lines
files are recognised by their first classifiable lines (Claude Code lines
carry ``sessionId`` / ``uuid`` / ``message``; Codex records are ``{timestamp,
type, payload}``); JSON documents by their shape (see
:func:`classify_document`).
"""

from __future__ import annotations

import re
from pathlib import PurePath
from typing import TYPE_CHECKING

from turnledger.pipeline.formats._common import (
    JSONObject,
    as_list,
    as_object,
    decode_json,
    get_list,
    get_str,
)
from turnledger.pipeline.formats.langchain import ROLES as LANGCHAIN_TYPES
from turnledger.pipeline.formats.model import FormatName, TranscriptError
from turnledger.pipeline.formats.openai_responses import CALL_NAMES, OUTPUT_TYPES

if TYPE_CHECKING:
    from collections.abc import Callable

_BOM = b"\xef\xbb\xbf"
_ANY_TRANSCRIPT = "a transcript (JSON, JSON Lines or a VCR cassette)"
_CASSETTE = re.compile(rb"^interactions\s*:", re.MULTILINE)
_YAML_SUFFIXES = frozenset({".yaml", ".yml"})
_CODEX_RECORDS = frozenset(
    {"session_meta", "response_item", "event_msg", "turn_context", "compacted"}
)
_CLAUDE_KEYS = ("sessionId", "uuid", "parentUuid", "leafUuid")
_CLAUDE_RECORDS = frozenset(
    {
        "file-history-snapshot",
        "queue-operation",
        "summary",
        "permission-mode",
        "last-prompt",
        "frame-link",
    }
)
_RESPONSES_TYPES = frozenset(
    {"message", "reasoning", "item_reference", *CALL_NAMES, *OUTPUT_TYPES}
)
_ANTHROPIC_BLOCKS = frozenset(
    {"tool_use", "tool_result", "thinking", "redacted_thinking", "server_tool_use"}
)
_CHAT_ROLES = frozenset({"tool", "developer", "function"})


def detect_format(path: str | PurePath | None, data: bytes) -> FormatName:
    """Guess the format of a transcript file.

    Args:
        path: The file's path (its suffix helps recognise YAML), if known.
        data: The file's bytes.

    Returns:
        The format name.

    Raises:
        TranscriptError: The content matches no known format.
    """
    body = data.removeprefix(_BOM).lstrip()
    if not body:
        msg = f"Expected {_ANY_TRANSCRIPT}, found an empty file"
        raise TranscriptError(msg)
    if body[:1] in {b"{", b"["}:
        found = _detect_json(body)
        if found is not None:
            return found
    if _CASSETTE.search(body) or _suffix(path) in _YAML_SUFFIXES:
        return "cassette"
    snippet = body[:40].decode("utf-8", errors="replace")
    msg = f"Expected {_ANY_TRANSCRIPT}, found content starting {snippet!r}"
    raise TranscriptError(msg)


def _suffix(path: str | PurePath | None) -> str:
    return PurePath(path).suffix.lower() if path is not None else ""


def _detect_json(body: bytes) -> FormatName | None:
    try:
        document = decode_json(body)
    except TranscriptError:
        return _detect_lines(body)
    found = classify_document(document)
    if found is None:
        msg = f"Expected a known transcript shape, found {_shape_of(document)}"
        raise TranscriptError(msg)
    return found


def _shape_of(document: object) -> str:
    obj = as_object(document)
    if obj is not None:
        keys = ", ".join(f"`{key}`" for key in list(obj)[:8])
        return f"an object with keys {keys}" if keys else "an empty object"
    items = as_list(document)
    if items is not None:
        return "an array of unrecognised items" if items else "an empty array"
    return "a JSON scalar"


def _detect_lines(body: bytes) -> FormatName | None:
    for raw in body.split(b"\n"):
        try:
            record = as_object(decode_json(raw.strip()))
        except TranscriptError:
            continue
        found = _classify_line(record) if record is not None else None
        if found is not None:
            return found
    return None


def _classify_line(record: JSONObject) -> FormatName | None:
    kind = get_str(record, "type")
    if kind in _CODEX_RECORDS and "payload" in record:
        return "codex"
    if any(key in record for key in _CLAUDE_KEYS):
        return "claude-code"
    if kind in _CLAUDE_RECORDS or (
        kind in {"user", "assistant"} and "message" in record
    ):
        return "claude-code"
    if kind is None and set(record) <= {"id", "timestamp", "instructions", "git"}:
        return "codex"  # the legacy rollout header
    return None


def classify_document(document: object) -> FormatName | None:
    """Name the format of a decoded JSON document, or ``None`` if unknown.

    Args:
        document: The decoded document.

    Returns:
        The format name, or ``None``.
    """
    obj = as_object(document)
    if obj is not None:
        return _classify_object(obj)
    items = as_list(document)
    if items is None:
        return None
    return classify_items([item for value in items if (item := as_object(value))])


_OBJECT_KEYS: tuple[tuple[str, FormatName], ...] = (
    ("interactions", "cassette"),
    ("loglines", "claude-code"),
    ("contents", "gemini"),
    ("input", "openai-responses"),
    ("system", "anthropic"),
)


def _classify_object(obj: JSONObject) -> FormatName | None:
    if "messages" in obj and "system" not in obj:
        values = get_list(obj, "messages")
        messages = [item for value in values if (item := as_object(value))]
        return classify_items(messages) or "openai-chat"
    for key, name in _OBJECT_KEYS:
        if key in obj:
            return name
    return _classify_line(obj)


def classify_items(items: list[JSONObject]) -> FormatName | None:
    """Name the format of an array of messages or items, or ``None``.

    Args:
        items: The array's object elements.

    Returns:
        The format name, or ``None`` when nothing identifies one.
    """
    for name, check in _CHECKS:
        if any(check(item) for item in items):
            return name
    if items and all("role" in item for item in items):
        return "openai-chat"
    return None


def _is_pydantic_ai(item: JSONObject) -> bool:
    return get_str(item, "kind") in {"request", "response"} and "parts" in item


def _is_langchain(item: JSONObject) -> bool:
    kind = get_str(item, "type")
    if kind not in LANGCHAIN_TYPES or _is_claude_line(item):
        return False
    return "data" in item or "content" in item


def _is_claude_line(item: JSONObject) -> bool:
    return _classify_line(item) == "claude-code"


def _is_responses_item(item: JSONObject) -> bool:
    return get_str(item, "type") in _RESPONSES_TYPES


def _is_gemini_content(item: JSONObject) -> bool:
    return "parts" in item and get_str(item, "role") in {None, "user", "model"}


def _is_anthropic_message(item: JSONObject) -> bool:
    blocks = [
        block for value in get_list(item, "content") if (block := as_object(value))
    ]
    return any(get_str(block, "type") in _ANTHROPIC_BLOCKS for block in blocks)


def _is_chat_message(item: JSONObject) -> bool:
    return get_str(item, "role") in _CHAT_ROLES or "tool_calls" in item


_CHECKS: tuple[tuple[FormatName, Callable[[JSONObject], bool]], ...] = (
    ("pydantic-ai", _is_pydantic_ai),
    ("claude-code", _is_claude_line),
    ("langchain", _is_langchain),
    ("openai-responses", _is_responses_item),
    ("gemini", _is_gemini_content),
    ("anthropic", _is_anthropic_message),
    ("openai-chat", _is_chat_message),
)
