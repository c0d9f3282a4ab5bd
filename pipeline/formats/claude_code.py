"""Claude Code session transcripts (JSON Lines, or a ``{"loglines": [...]}`` JSON).

Conversation lines have ``type: "user"`` or ``"assistant"`` and carry an
Anthropic ``message``; ``tool_use`` blocks of assistant lines are calls and
``tool_result`` blocks of user lines are results (the line's top-level
``toolUseResult`` is Claude Code's own metadata, not a second result). Other
line types (``summary``, ``system``, ``file-history-snapshot``, ...) are skipped
and counted.

Lines are read in file order. A line whose ``uuid`` was already seen is a
repeat (resumes copy lines) and is skipped: the first occurrence wins. Lines
are grouped into one conversation per ``sessionId`` (lines without one join
the session before them). Consecutive assistant lines that share
``message.id`` are one API message split into one line per content block, and
become one message; consecutive result-only user lines become one carrier.
Sidechain (subagent) lines stay in the file's conversation, in file order;
a conversation whose lines are all sidechain lines is marked ``sidechain``.

An assistant line's ``message.usage`` and ``message.model`` are its model
call's usage (:attr:`Conversation.usage`); of a message split over several
lines, the last line's (Claude Code writes the usage as it stood when each
block was written, so the last is the latest).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from turnledger.pipeline.formats._common import (
    UNRECOGNISED,
    Indexed,
    JSONObject,
    Sink,
    as_list,
    as_object,
    conversation,
    decode_json,
    describe,
    get_object,
    get_str,
    type_of,
)
from turnledger.pipeline.formats._lines import read_json_lines
from turnledger.pipeline.formats.anthropic import anthropic_message
from turnledger.pipeline.formats.model import TranscriptError
from turnledger.pipeline.formats.usage import anthropic_usage, attach_usage
from turnledger.policies.messages import Message, make_message

if TYPE_CHECKING:
    from turnledger.pipeline.formats.model import (
        Conversation,
        ModelUsage,
        ParsedTranscript,
    )

EXPECTED = "Claude Code session lines (JSON Lines, or a JSON object with `loglines`)"

REPEATED_UUID = "<repeated uuid>"
"""The ``skipped`` key counting lines dropped because their ``uuid`` repeats."""

CLAUDE_KEYS = ("sessionId", "uuid", "parentUuid", "leafUuid")
"""Keys only Claude Code lines carry."""

CLAUDE_RECORDS = frozenset(
    {
        "file-history-snapshot",
        "queue-operation",
        "summary",
        "system",
        "progress",
        "permission-mode",
        "last-prompt",
        "frame-link",
        "custom-title",
        "attachment",
    }
)
"""Claude Code line types that carry no conversation."""


def is_claude_record(obj: JSONObject) -> bool:
    """Whether a line is a Claude Code record (by its keys or its type)."""
    return any(key in obj for key in CLAUDE_KEYS) or type_of(obj) in CLAUDE_RECORDS


@dataclass
class _Entry:
    line: int
    label: str
    obj: JSONObject

    def report(self, sink: Sink, message: str) -> None:
        if self.line:
            sink.problem(self.line, message[:1].upper() + message[1:])
        else:
            sink.problem(0, f"{self.label}: {message}")


@dataclass
class _Session:
    id: str | None
    indexed: list[Indexed] = field(default_factory=list)
    origins: list[str] = field(default_factory=list)
    message_ids: list[str | None] = field(default_factory=list)
    usage_at: dict[int, ModelUsage] = field(default_factory=dict)
    sidechain: bool = True

    def append(
        self,
        entry: _Entry,
        message: Message,
        message_id: str | None,
        usage: ModelUsage | None = None,
    ) -> None:
        if self.indexed and _mergeable(self.indexed[-1][1], message_id, message, self):
            index, previous = self.indexed[-1]
            self.indexed[-1] = (index, _merge(previous, message))
            if usage is not None:
                self.usage_at[index] = usage
            return
        if usage is not None:
            self.usage_at[len(self.origins)] = usage
        self.indexed.append((len(self.origins), message))
        self.origins.append(entry.label)
        self.message_ids.append(message_id)


def _mergeable(
    previous: Message, message_id: str | None, message: Message, session: _Session
) -> bool:
    if previous.role != message.role:
        return False
    if message.role == "assistant":
        return message_id is not None and session.message_ids[-1] == message_id
    return _is_pure_carrier(previous) and _is_pure_carrier(message)


def _is_pure_carrier(message: Message) -> bool:
    return bool(message.tool_results) and not message.text


def _merge(first: Message, second: Message) -> Message:
    text = "\n".join(text for text in (first.text, second.text) if text)
    return make_message(
        first.role,
        text,
        tool_calls=first.tool_calls + second.tool_calls,
        tool_results=first.tool_results + second.tool_results,
    )


def parse_claude_code(data: bytes, *, name: str) -> ParsedTranscript:
    """Read a Claude Code session file.

    Args:
        data: The file's bytes (JSON Lines, or JSON with a ``loglines`` array).
        name: The file name, used as the conversation id when no line has a
            ``sessionId``.

    Returns:
        One conversation per ``sessionId``; none when the file has no user or
        assistant line.

    Raises:
        TranscriptError: No line of the file is a JSON object.
    """
    sink = Sink()
    sessions = _Sessions(name)
    for entry in _entries(data, sink):
        sessions.read(entry, sink)
    return sink.transcript("claude-code", sessions.conversations(name))


def _entries(data: bytes, sink: Sink) -> list[_Entry]:
    loglines = _loglines(data)
    if loglines is not None:
        return [
            _Entry(0, f"loglines[{index}]", obj)
            for index, value in enumerate(loglines)
            if (obj := _object_or_problem(value, index, sink)) is not None
        ]
    lines = read_json_lines(data, sink, expected=EXPECTED)
    return [_Entry(number, f"line {number}", obj) for number, obj in lines]


def _loglines(data: bytes) -> list[object] | None:
    if not data.lstrip().startswith(b"{"):
        return None
    try:
        document = as_object(decode_json(data))
    except TranscriptError:
        return None
    return as_list(document.get("loglines")) if document is not None else None


def _object_or_problem(value: object, index: int, sink: Sink) -> JSONObject | None:
    obj = as_object(value)
    if obj is None:
        sink.problem(
            0, f"loglines[{index}]: expected an object, found {describe(value)}"
        )
    return obj


class _Sessions:
    """The sessions of one file, in order of first appearance."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._sessions: dict[str | None, _Session] = {}
        self._current: str | None = None
        self._seen: set[str] = set()

    def read(self, entry: _Entry, sink: Sink) -> None:
        kind = type_of(entry.obj)
        sink.begin("line", entry.label, entry.obj)
        if kind not in {"user", "assistant"}:
            if is_claude_record(entry.obj):
                sink.skip(kind)
                if kind not in CLAUDE_RECORDS:  # a Claude line of a new type
                    sink.account(kind, UNRECOGNISED)  # refused if message-shaped
            else:
                sink.unknown(kind)
            return
        uuid = get_str(entry.obj, "uuid")
        if uuid is not None and uuid in self._seen:
            sink.skip(REPEATED_UUID)
            return
        if uuid is not None:
            self._seen.add(uuid)
        session = self._session(entry.obj)
        session.sidechain = session.sidechain and entry.obj.get("isSidechain") is True
        message = _line_message(entry, kind, sink)
        if message is not None:
            body = get_object(entry.obj, "message") or {}
            usage = anthropic_usage(body, sink) if kind == "assistant" else None
            session.append(entry, message, get_str(body, "id"), usage)

    def _session(self, obj: JSONObject) -> _Session:
        session_id = get_str(obj, "sessionId") or self._current
        self._current = session_id
        if session_id not in self._sessions:
            self._sessions[session_id] = _Session(session_id)
        return self._sessions[session_id]

    def conversations(self, name: str) -> list[Conversation]:
        sessions = list(self._sessions.values())
        if len(sessions) > 1 and sessions[0].id is None:
            _prepend(sessions[0], sessions[1])
            sessions = sessions[1:]
        return [
            attach_usage(
                conversation(
                    conversation_id=session.id or name,
                    indexed=session.indexed,
                    origins=session.origins,
                    source=f"{name} session {session.id}" if session.id else name,
                    sidechain=session.sidechain,
                ),
                session.indexed,
                session.usage_at,
            )
            for session in sessions
        ]


def _prepend(early: _Session, session: _Session) -> None:
    shift = len(early.origins)
    session.indexed = early.indexed + [
        (index + shift, message) for index, message in session.indexed
    ]
    session.origins = early.origins + session.origins
    session.usage_at = {
        **early.usage_at,
        **{index + shift: used for index, used in session.usage_at.items()},
    }
    session.sidechain = early.sidechain and session.sidechain


def _line_message(entry: _Entry, kind: str, sink: Sink) -> Message | None:
    message = entry.obj.get("message")
    obj = as_object(message)
    if obj is None:
        found = describe(message)
        entry.report(sink, f"expected `message` to be an object, found {found}")
        return None
    if "content" not in obj:
        keys = ", ".join(f"`{key}`" for key in obj) or "none"
        entry.report(sink, f"expected `message.content`, found keys {keys}")
        return None
    return anthropic_message(kind, obj.get("content"), sink)
