"""Format auto-detection (``--format auto``) from a file's content.

The content decides; the file name only breaks the tie for YAML. Evidence in
the messages wins over top-level keys: a JSON document is classified by what
its message items look like (the format most items match; see
:func:`item_candidates`) before its envelope keys (``system``, ``input``, ...)
are consulted, and a JSON Lines file by a vote over its lines in which a
conversation line (a Claude Code ``user`` / ``assistant`` line with its
``message``, a Codex ``response_item``) outweighs a header carrying only a
``sessionId``. :func:`detect_candidates` returns every format the evidence
pointed to, best first; the reader then checks that it recognised most of
the file (see :func:`pipeline.formats.read.parse_transcript`).
"""

from __future__ import annotations

import re
from collections import Counter
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
from turnledger.pipeline.formats.adk import is_adk_event
from turnledger.pipeline.formats.claude_code import CLAUDE_KEYS, CLAUDE_RECORDS
from turnledger.pipeline.formats.codex import CODEX_RECORDS
from turnledger.pipeline.formats.har import is_har
from turnledger.pipeline.formats.inspect_ai import ZIP_MAGIC, is_eval_log
from turnledger.pipeline.formats.langchain import ROLES as LANGCHAIN_TYPES
from turnledger.pipeline.formats.model import FormatName, TranscriptError
from turnledger.pipeline.formats.openai_agents import is_run_state
from turnledger.pipeline.formats.openai_agents_items import (
    ADK_TABLE,
    AGENTS_TABLE,
    SQLITE_MAGIC,
    session_tables,
)
from turnledger.pipeline.formats.openai_responses import CALL_NAMES, OUTPUT_TYPES
from turnledger.pipeline.formats.openhands import is_openhands_event

if TYPE_CHECKING:
    from collections.abc import Callable

_BOM = b"\xef\xbb\xbf"
_ANY_TRANSCRIPT = "a transcript (JSON, JSON Lines or a VCR cassette)"
_CASSETTE = re.compile(rb"^interactions\s*:", re.MULTILINE)
_YAML_SUFFIXES = frozenset({".yaml", ".yml"})
_RESPONSES_TYPES = frozenset(
    {"message", "reasoning", "item_reference", *CALL_NAMES, *OUTPUT_TYPES}
)
_ANTHROPIC_BLOCKS = frozenset(
    {"tool_use", "tool_result", "thinking", "redacted_thinking", "server_tool_use"}
)
_CHAT_ROLES = frozenset({"tool", "developer", "function"})


_LINES_EXAMINED = 500
"""How many non-blank lines of a JSON Lines file take part in the vote."""


def detect_format(path: str | PurePath | None, data: bytes) -> FormatName:
    """Guess the format of a transcript file.

    Args:
        path: The file's path (its suffix helps recognise YAML), if known.
        data: The file's bytes.

    Returns:
        The format name (the first of :func:`detect_candidates`).

    Raises:
        TranscriptError: The content matches no known format.
    """
    return detect_candidates(path, data)[0]


def detect_candidates(
    path: str | PurePath | None, data: bytes
) -> tuple[FormatName, ...]:
    """Name every format the content points to, best evidence first.

    Args:
        path: The file's path (its suffix helps recognise YAML), if known.
        data: The file's bytes.

    Returns:
        At least one format name.

    Raises:
        TranscriptError: The content matches no known format.
    """
    body = data.removeprefix(_BOM).lstrip()
    if not body:
        msg = f"Expected {_ANY_TRANSCRIPT}, found an empty file"
        raise TranscriptError(msg)
    if body.startswith(ZIP_MAGIC):
        return ("inspect-ai",)  # the only zipped format: a `.eval` log
    if body.startswith(SQLITE_MAGIC):
        return _detect_database(body)
    if body[:1] in {b"{", b"["}:
        found = _detect_json(body)
        if found:
            return found
    if _CASSETTE.search(body) or _suffix(path) in _YAML_SUFFIXES:
        return ("cassette",)
    snippet = body[:40].decode("utf-8", errors="replace")
    msg = f"Expected {_ANY_TRANSCRIPT}, found content starting {snippet!r}"
    raise TranscriptError(msg)


def _detect_database(body: bytes) -> tuple[FormatName, ...]:
    tables = session_tables(body)
    found: list[FormatName] = []
    if AGENTS_TABLE in tables:
        found.append("openai-agents")
    if ADK_TABLE in tables:
        found.append("adk")
    if not found:
        msg = (
            "Expected a session database (an OpenAI Agents SDK `agent_messages` or "
            "a google-adk `events` table), found an SQLite file without them"
        )
        raise TranscriptError(msg)
    return tuple(found)


def _suffix(path: str | PurePath | None) -> str:
    return PurePath(path).suffix.lower() if path is not None else ""


def _detect_json(body: bytes) -> tuple[FormatName, ...]:
    try:
        document = decode_json(body)
    except TranscriptError:
        return _detect_lines(body)
    found = document_candidates(document)
    if not found:
        msg = f"Expected a known transcript shape, found {_shape_of(document)}"
        raise TranscriptError(msg)
    return found


def _shape_of(document: object) -> str:
    obj = as_object(document)
    if obj is not None:
        keys = ", ".join(f"`{key}`" for key in list(obj)[:8])
        messages = as_list(obj.get("messages"))
        if messages:
            return f"an object with keys {keys} whose `messages` are unrecognised"
        return f"an object with keys {keys}" if keys else "an empty object"
    items = as_list(document)
    if items is not None:
        return "an array of unrecognised items" if items else "an empty array"
    return "a JSON scalar"


def _detect_lines(body: bytes) -> tuple[FormatName, ...]:
    votes: Counter[FormatName] = Counter()
    examined = 0
    for raw in body.split(b"\n"):
        line = raw.strip()
        if not line:
            continue
        examined += 1
        if examined > _LINES_EXAMINED:
            break
        try:
            record = as_object(decode_json(line))
        except TranscriptError:
            continue
        vote = _line_vote(record) if record is not None else None
        if vote is not None:
            votes[vote[0]] += vote[1]
    return tuple(name for name, _ in votes.most_common())


def _line_vote(record: JSONObject) -> tuple[FormatName, int] | None:
    """The format one line points to and how strongly (3: a conversation line)."""
    if is_openhands_event(record):
        return "openhands", 3
    kind = get_str(record, "type")
    if kind in CODEX_RECORDS and "payload" in record:
        return "codex", 3 if kind == "response_item" else 1
    if kind in {"user", "assistant"} and as_object(record.get("message")) is not None:
        return "claude-code", 3
    if any(key in record for key in CLAUDE_KEYS) or kind in CLAUDE_RECORDS:
        return "claude-code", 1
    if kind is None and set(record) <= {"id", "timestamp", "instructions", "git"}:
        return "codex", 1  # the legacy rollout header
    if kind in _RESPONSES_TYPES:
        return "codex", 1  # a legacy rollout's bare item
    return None


def _classify_line(record: JSONObject) -> FormatName | None:
    vote = _line_vote(record)
    return vote[0] if vote is not None and vote[0] == "claude-code" else None


_ENVELOPE_KEYS: tuple[tuple[str, FormatName], ...] = (
    ("contents", "gemini"),
    ("input", "openai-responses"),
    ("events", "adk"),
    ("system", "anthropic"),
    ("messages", "openai-chat"),
)
"""Top-level keys and the format each suggests, weakest evidence (after items)."""

_ITEM_KEYS = ("messages", "contents", "input", "events")
# (an OpenHands ``events`` array is read by its items too)


def document_candidates(document: object) -> tuple[FormatName, ...]:
    """Name every format a decoded JSON document points to, best first.

    A cassette (``interactions``) and Claude Code ``loglines`` are decided by
    their key. Otherwise the message items decide (:func:`item_candidates`),
    then the envelope's keys add the formats they suggest.

    Args:
        document: The decoded document.

    Returns:
        The candidates; empty when nothing identifies a format.
    """
    obj = as_object(document)
    if obj is None:
        items = as_list(document)
        if items is None:
            return ()
        return item_candidates([item for value in items if (item := as_object(value))])
    decided = _decided_by_key(obj)
    if decided is not None:
        return (decided,)
    found: list[FormatName] = []
    for key in _ITEM_KEYS:
        values = as_list(obj.get(key))
        if values:
            found += item_candidates(
                [item for value in values if (item := as_object(value))]
            )
    if as_list(obj.get("messages")) == [] or not found:
        found += [
            name for key, name in _ENVELOPE_KEYS if key in obj and _envelope(obj, key)
        ]
    if not found:
        line = _classify_line(obj)
        found += [line] if line is not None else []
    return tuple(dict.fromkeys(found))


def _decided_by_key(obj: JSONObject) -> FormatName | None:
    """The format a document's own keys decide (no other reading is plausible)."""
    if "interactions" in obj:
        return "cassette"
    if "loglines" in obj:
        return "claude-code"
    if is_har(obj):
        return "har"
    if _is_event_history(obj):
        return "openhands"
    if is_run_state(obj):
        return "openai-agents"
    if is_eval_log(obj):
        return "inspect-ai"
    return None


def _is_event_history(obj: JSONObject) -> bool:
    """Whether most of an object's ``history`` are OpenHands events (an eval record)."""
    history = as_list(obj.get("history")) or []
    events = [item for value in history if (item := as_object(value)) is not None]
    return sum(1 for item in events if is_openhands_event(item)) * 2 > len(history) > 0


def _envelope(obj: JSONObject, key: str) -> bool:
    """Whether a top-level key is evidence on its own (its items are not)."""
    if key == "messages":
        values = get_list(obj, "messages")
        return not values or all(
            "role" in item for value in values if (item := as_object(value)) is not None
        )
    return True


def item_candidates(items: list[JSONObject]) -> tuple[FormatName, ...]:
    """Name every format an array's items point to, most matching items first.

    Ties go to the more specific format (the order of the checks). Items that
    all have a ``role`` and match nothing more specific are OpenAI chat.

    Args:
        items: The array's object elements.

    Returns:
        The candidates; empty when nothing identifies a format.
    """
    scores = [
        (sum(1 for item in items if check(item)), -rank, name)
        for rank, (name, check) in enumerate(_CHECKS)
    ]
    found: list[FormatName] = [
        name for score, _, name in sorted(scores, reverse=True) if score
    ]
    if items and all("role" in item for item in items) and "openai-chat" not in found:
        found.append("openai-chat")
    return tuple(found)


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
    ("openhands", is_openhands_event),
    ("adk", is_adk_event),
    ("claude-code", _is_claude_line),
    ("langchain", _is_langchain),
    ("openai-responses", _is_responses_item),
    ("gemini", _is_gemini_content),
    ("anthropic", _is_anthropic_message),
    ("openai-chat", _is_chat_message),
)
