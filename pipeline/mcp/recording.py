"""Every MCP tool call recorded in the ledger, as the engine records a tool call.

An MCP client's call is a tool call its assistant made: it is recorded with the
engine's event types, so ``turnledger history``, ``audit``, ``replay`` and the
web UI show it with no reader of their own. Per client name and server run,
one session of the configured agent on channel ``mcp`` (key
``mcp-<client>-<run>``) holds, for each call, an ``assistant.message`` carrying
the call (turn id and call id ``mcp-<n>``) and its ``tool_result.recorded``: the
output, or the error as a failed result. A write (``memory_store``,
``memory_forget``) is recorded before it runs and its result after, so its
memory event lies between them; a read writes nothing of its own, so it is
recorded with its result in one append once it ran (as the engine records a
recall with the prompt: there is no side effect to order).

Arguments are scrubbed (:func:`policies.structured_scrubbing.scrub_json`) and
already bounded by the input caps of :mod:`.tools`; with memory shredding on,
a stored memory's content is recorded as its size only, so forgetting the entry
leaves no copy in the session. Results are scrubbed
(:func:`policies.scrubbing.scrub_text`) and bounded to ``[runtime]
max_tool_result_chars`` as the engine bounds a tool result; the client is given
that same recorded text. A refused call (unknown tool, bad or oversized
arguments, a write without ``--allow-writes``) is not recorded: it is answered
with a protocol error before anything is written.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final
from uuid import UUID

import msgspec

from turnledger.ledger.events import (
    AssistantMessage,
    Event,
    SessionOpened,
    ToolCallRecord,
    ToolResultRecorded,
)
from turnledger.ledger.ids import session_stream_id
from turnledger.policies.bounding import make_result_bounder
from turnledger.policies.scrubbing import scrub_text
from turnledger.policies.structured_scrubbing import scrub_json

if TYPE_CHECKING:
    from turnledger.ledger.store import EventStore
    from turnledger.policies.structured_scrubbing import JsonValue

CHANNEL: Final = "mcp"
"""The channel of the sessions MCP calls are recorded in."""

MAX_CLIENT_CHARS: Final = 64
"""How much of a client's name goes into its session key."""


class CallRef(msgspec.Struct, frozen=True, kw_only=True):
    """Where a recorded call is: its session stream, turn id and call id."""

    stream_id: UUID
    session_key: str
    call_id: str
    tool: str


class RecordedResult(msgspec.Struct, frozen=True, kw_only=True):
    """The result as recorded (scrubbed and bounded): what the client is given."""

    text: str
    success: bool
    truncated: bool


class _OpenSession:
    """A recording session's key, stream and head version (this run writes it)."""

    def __init__(self, key: str, stream_id: UUID) -> None:
        self.key = key
        self.stream_id = stream_id
        self.version = 0
        self.calls = 0


def client_label(name: str) -> str:
    """Return a client's name as it goes into a session key.

    Letters, digits, ``-``, ``_`` and ``.`` are kept (others become ``_``),
    cut to :data:`MAX_CLIENT_CHARS`; an empty name is ``unknown``.
    """
    kept = "".join(
        c if c.isascii() and (c.isalnum() or c in "-_.") else "_" for c in name
    )
    return kept[:MAX_CLIENT_CHARS] or "unknown"


class McpRecorder:
    """Records MCP calls in per-client sessions of one agent.

    Thread-safe: calls run in worker threads, and one lock orders each
    session's appends (this server run is the only writer of its sessions).

    Args:
        store: The ledger.
        agent: The agent the sessions belong to.
        max_result_chars: The bound on each recorded result (0: none).
        shredding: Memory contents are sealed: record a stored content's size,
            not the content.
    """

    def __init__(
        self,
        store: EventStore,
        *,
        agent: str,
        max_result_chars: int,
        shredding: bool,
    ) -> None:
        self._store = store
        self._agent = agent
        self._bound = make_result_bounder(max_result_chars)
        self._shredding = shredding
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        self._run = f"{stamp}-{secrets.token_hex(3)}"
        self._sessions: dict[str, _OpenSession] = {}
        self._lock = threading.Lock()

    def session_key(self, client: str) -> str:
        """The key of the session a client's calls are recorded in."""
        return f"mcp-{client_label(client)}-{self._run}"

    def record_call(
        self, client: str, tool: str, arguments: Mapping[str, Any]
    ) -> CallRef:
        """Record a call before it runs (opening the client's session first)."""
        with self._lock:
            session = self._session(client)
            events, call_id = self._call_events(session, tool, arguments)
            self._append(session, events)
        return CallRef(
            stream_id=session.stream_id,
            session_key=session.key,
            call_id=call_id,
            tool=tool,
        )

    def record_result(
        self, call: CallRef, *, success: bool, text: str
    ) -> RecordedResult:
        """Record a call's outcome (scrubbed, bounded); return what was recorded."""
        event, recorded = self._result_event(call.call_id, call.tool, success, text)
        with self._lock:
            session = next(
                s for s in self._sessions.values() if s.key == call.session_key
            )
            self._append(session, [event])
        return recorded

    def record_read(
        self,
        client: str,
        tool: str,
        arguments: Mapping[str, Any],
        *,
        success: bool,
        text: str,
    ) -> RecordedResult:
        """Record a call that wrote nothing, with its outcome, in one append."""
        with self._lock:
            session = self._session(client)
            events, call_id = self._call_events(session, tool, arguments)
            event, recorded = self._result_event(call_id, tool, success, text)
            self._append(session, [*events, event])
        return recorded

    def _call_events(
        self, session: _OpenSession, tool: str, arguments: Mapping[str, Any]
    ) -> tuple[list[Event], str]:
        """The call's event (after the session's opening, first time), its id."""
        recorded = msgspec.json.encode(
            scrub_json(self._recorded_arguments(tool, arguments))
        )
        session.calls += 1
        call_id = f"mcp-{session.calls}"
        call = AssistantMessage(
            turn_id=call_id,
            tool_calls=(
                ToolCallRecord(id=call_id, name=tool, arguments=recorded.decode()),
            ),
        )
        if session.version:
            return [call], call_id
        opened = SessionOpened(
            agent=self._agent, session_key=session.key, channel=CHANNEL
        )
        return [opened, call], call_id

    def _result_event(
        self, call_id: str, tool: str, success: bool, text: str
    ) -> tuple[ToolResultRecorded, RecordedResult]:
        bounded = self._bound(scrub_text(text))
        event = ToolResultRecorded(
            turn_id=call_id,
            call_id=call_id,
            tool=tool,
            success=success,
            output=bounded.text if success else "",
            error=None if success else bounded.text,
            original_chars=bounded.original_chars,
            kept_chars=bounded.kept_chars,
            truncated=bounded.truncated,
        )
        recorded = RecordedResult(
            text=bounded.text, success=success, truncated=bounded.truncated
        )
        return event, recorded

    def _session(self, client: str) -> _OpenSession:
        label = client_label(client)
        session = self._sessions.get(label)
        if session is None:
            key = self.session_key(client)
            session = _OpenSession(key, session_stream_id(self._agent, key))
            self._sessions[label] = session
        return session

    def _append(self, session: _OpenSession, events: list[Event]) -> None:
        result = self._store.append(
            session.stream_id, events, expected_version=session.version
        )
        session.version = result.last_version

    def _recorded_arguments(self, tool: str, arguments: Mapping[str, Any]) -> JsonValue:
        kept: dict[str, JsonValue] = dict(arguments)
        content = kept.get("content")
        if self._shredding and tool == "memory_store" and isinstance(content, str):
            kept["content"] = f"[sealed in memory: {len(content)} characters]"
        return kept
