"""The ``memory_*`` tools: store, recall, forget and purge the agent's memory.

Output texts follow the reference (§4.7) exactly: ``Stored memory: {key}``,
``No memories found.``, ``Found {n} memories:`` then one line per entry
``- [{category}] {key}: {content} [NN%]`` (the percentage only for scored
entries), ``Forgot memory: {key}``, ``No memory found with key: {key}`` and
``Purged {n} memories from session '{session}'``.

Where this differs from the reference, on purpose:

- Markdown forget redacts the key's lines (its content is gone from the files);
  purge on an append-only backend answers with a failed outcome that says so
  and that nothing was removed; the reference reported ``No memory found with
  key`` (its [gap]).
- Reads and writes are session-aware: ``core``/``daily`` facts are stored
  session-less (visible from every session), every other category in the
  calling session; recall sees the calling session plus the durable facts.
- ``memory_purge`` purges the calling session only, and only the agent's own
  rows (the allowlist grants recall, never delete); namespace purges are refused.
- Every memory-service call runs in a worker thread (the store and an HTTP
  embedder block), so a slow embedder never stalls other sessions' turns.
- ``memory_recall`` takes ``since``/``until`` (ISO 8601, creation time, applied
  inside the backend's query); ``search_mode`` is not offered (the reference
  ignored it). ``memory_store`` takes ``namespace`` and ``importance`` (0..1).
- ``memory_export`` (``memory_export_tool``) lists the agent's visible entries
  as JSON lines.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Final

from turnledger.ledger.errors import LedgerError
from turnledger.pipeline.memory import MemoryAccessError
from turnledger.pipeline.providers.base import ToolSpec
from turnledger.pipeline.tools._arguments import (
    ArgumentError,
    check_object,
    failure,
    ok,
    optional_int,
    optional_str,
    refuse_present,
    required_str,
)
from turnledger.pipeline.tools.base import ToolContext, ToolOutcome
from turnledger.pipeline.tools.memory_export_tool import optional_moment
from turnledger.policies.paths import sanitize_session_key
from turnledger.projections.memory.protocol import (
    DURABLE_GLOBAL_CATEGORIES,
    MemoryEntry,
    Unsupported,
)

DEFAULT_RECALL_LIMIT: Final = 5
"""How many entries ``memory_recall`` returns when ``limit`` is omitted."""

MAX_RECALL_LIMIT: Final = 100
"""The largest ``limit`` accepted (a bounded, prompt-safe number)."""

_PURGE_PASSES: Final = 100
"""Purge works in pages of listed rows; this bounds the number of pages."""

_SERVICE_ERRORS: Final = (MemoryAccessError, LedgerError, OSError)
"""What a memory-service call may raise that becomes a failed outcome."""

MEMORY_STORE_SPEC: Final = ToolSpec(
    name="memory_store",
    description=(
        "Store a fact, preference, or note in long-term memory. Use category "
        "'core' for permanent facts, 'daily' for session notes, 'conversation' for "
        "chat context, or a custom category name."
    ),
    parameters={
        "type": "object",
        "properties": {
            "key": {
                "type": "string",
                "description": (
                    "Unique key for this memory (e.g. 'user_lang', 'project_stack')"
                ),
            },
            "content": {
                "type": "string",
                "description": "The information to remember",
            },
            "category": {
                "type": "string",
                "description": (
                    "Memory category: 'core' (permanent), 'daily' (session), "
                    "'conversation' (chat), or a custom category name. Defaults "
                    "to 'core'. Categories other than core and daily are kept in "
                    "the current session only."
                ),
            },
            "namespace": {
                "type": "string",
                "description": "An isolation tag (default 'default').",
            },
            "importance": {
                "type": "number",
                "minimum": 0,
                "maximum": 1,
                "description": "How important the memory is, 0 to 1.",
            },
        },
        "required": ["key", "content"],
    },
)

MEMORY_RECALL_SPEC: Final = ToolSpec(
    name="memory_recall",
    description=(
        "Search long-term memory for relevant facts, preferences, or context. "
        "Returns scored results ranked by relevance. Omit the query or pass bare "
        "'*' to return recent memories."
    ),
    parameters={
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": (
                    "Keywords or phrase to search for in memory. Omit or pass "
                    "bare '*' to return recent memories."
                ),
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_RECALL_LIMIT,
                "description": (
                    f"Max results to return (default {DEFAULT_RECALL_LIMIT})."
                ),
            },
            "since": {
                "type": "string",
                "description": "Only memories created at or after (ISO 8601).",
            },
            "until": {
                "type": "string",
                "description": "Only memories created at or before (ISO 8601).",
            },
        },
    },
)

MEMORY_FORGET_SPEC: Final = ToolSpec(
    name="memory_forget",
    description=(
        "Remove a memory by key. Use to delete outdated facts or sensitive data. "
        "Returns whether the memory was found and removed; an append-only memory "
        "says that nothing can be removed."
    ),
    parameters={
        "type": "object",
        "properties": {
            "key": {"type": "string", "description": "The key of the memory to forget"}
        },
        "required": ["key"],
    },
)

MEMORY_PURGE_SPEC: Final = ToolSpec(
    name="memory_purge",
    description=(
        "Remove all of your memories stored in the current session (session-less "
        "core and daily facts are kept). Returns the number of deleted entries. "
        "WARNING: This operation cannot be undone."
    ),
    parameters={
        "type": "object",
        "properties": {
            "session_id": {
                "type": "string",
                "description": (
                    "The session to purge; only the current session is allowed "
                    "(the default)."
                ),
            }
        },
    },
)


def format_entry(entry: MemoryEntry) -> str:
    """Return the reference's recall line: ``- [cat] key: content [NN%]``."""
    score = "" if entry.score is None else f" [{entry.score * 100:.0f}%]"
    return f"- [{entry.category}] {entry.key}: {entry.content}{score}"


def format_recall(entries: list[MemoryEntry]) -> str:
    """Return the reference's ``memory_recall`` output for ``entries``."""
    if not entries:
        return "No memories found."
    lines = "".join(f"{format_entry(entry)}\n" for entry in entries)
    return f"Found {len(entries)} memories:\n{lines}"


def _append_only(operation: str, refusal: Unsupported) -> ToolOutcome:
    return failure(f"Cannot {operation}: {refusal.reason}; nothing was removed")


class MemoryStoreTool:
    """``memory_store {key*, content*, category?}``."""

    @property
    def spec(self) -> ToolSpec:
        """Name, description and JSON-schema parameters."""
        return MEMORY_STORE_SPEC

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutcome:
        """Store the entry as the calling agent; ``Stored memory: {key}``."""
        try:
            args = check_object(arguments)
            key = required_str(args, "key")
            content = required_str(args, "content", allow_empty=True)
            category = optional_str(args, "category") or "core"
            namespace = optional_str(args, "namespace") or "default"
            importance = _importance(args)
        except ArgumentError as e:
            return failure(str(e))
        session = None if category in DURABLE_GLOBAL_CATEGORIES else context.session_key
        try:
            stored = await asyncio.to_thread(
                context.memory.store_entry,
                context.agent,
                key,
                content,
                category=category,
                session=session,
                source="tool",
                namespace=namespace,
                importance=importance,
            )
        except _SERVICE_ERRORS as e:
            return failure(f"Failed to store memory: {e}")
        if isinstance(stored, Unsupported):
            return failure(f"Failed to store memory: {stored.reason}")
        return ok(f"Stored memory: {key}")


class MemoryRecallTool:
    """``memory_recall {query?, limit?}``: own and peers' rows, this session."""

    @property
    def spec(self) -> ToolSpec:
        """Name, description and JSON-schema parameters."""
        return MEMORY_RECALL_SPEC

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutcome:
        """Recall the best matches; ``Found N memories:`` or ``No memories found.``."""
        try:
            args = check_object(arguments)
            query = _query(args)
            limit = optional_int(
                args,
                "limit",
                default=DEFAULT_RECALL_LIMIT,
                minimum=1,
                maximum=MAX_RECALL_LIMIT,
            )
            since = optional_moment(args, "since")
            until = optional_moment(args, "until")
        except ArgumentError as e:
            return failure(str(e))
        try:
            entries = await asyncio.to_thread(
                context.memory.recall,
                context.agent,
                query,
                session=context.session_key,
                limit=limit,
                since=since,
                until=until,
            )
        except _SERVICE_ERRORS as e:
            return failure(f"Memory recall failed: {e}")
        return ok(format_recall(entries))


def _importance(args: Mapping[str, Any]) -> float | None:
    value = args.get("importance")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        msg = f"Expected 'importance' to be a number, found {type(value).__name__}"
        raise ArgumentError(msg)
    if not 0 <= value <= 1:
        msg = f"Expected 'importance' to be between 0 and 1, found {value}"
        raise ArgumentError(msg)
    return float(value)


def _query(args: Mapping[str, Any]) -> str:
    if args.get("query") is None:
        return ""
    return required_str(args, "query", allow_empty=True)


class MemoryForgetTool:
    """``memory_forget {key*}``: the agent's own entry only."""

    @property
    def spec(self) -> ToolSpec:
        """Name, description and JSON-schema parameters."""
        return MEMORY_FORGET_SPEC

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutcome:
        """Forget the entry; an append-only backend is a failure that says so."""
        try:
            key = required_str(check_object(arguments), "key")
        except ArgumentError as e:
            return failure(str(e))
        try:
            forgotten = await asyncio.to_thread(
                context.memory.forget, context.agent, key, source="tool"
            )
        except _SERVICE_ERRORS as e:
            return failure(f"Failed to forget memory: {e}")
        if isinstance(forgotten, Unsupported):
            return _append_only(f"forget memory '{key}'", forgotten)
        if forgotten:
            return ok(f"Forgot memory: {key}")
        return ok(f"No memory found with key: {key}")


class MemoryPurgeTool:
    """``memory_purge {session_id?}``: the agent's own rows of the current session."""

    @property
    def spec(self) -> ToolSpec:
        """Name, description and JSON-schema parameters."""
        return MEMORY_PURGE_SPEC

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutcome:
        """Forget every own row of the session; ``Purged N memories from ...``."""
        session = sanitize_session_key(context.session_key)
        try:
            args = check_object(arguments)
            refuse_present(args, "namespace", "namespace purges are refused")
            _check_own_session(optional_str(args, "session_id"), session)
        except ArgumentError as e:
            return failure(str(e))
        try:
            purged = await asyncio.to_thread(_purge, context, session)
        except _SERVICE_ERRORS as e:
            return failure(f"Failed to purge session: {e}")
        if isinstance(purged, Unsupported):
            return _append_only(f"purge session '{session}'", purged)
        return ok(f"Purged {purged} memories from session '{session}'")


def _check_own_session(requested: str | None, session: str) -> None:
    if requested is not None and sanitize_session_key(requested) != session:
        msg = (
            f"Expected 'session_id' to be the current session {session!r}, "
            f"found {requested!r} (only the current session may be purged)"
        )
        raise ArgumentError(msg)


def _purge(context: ToolContext, session: str) -> int | Unsupported:
    """Forget the agent's own rows of ``session`` through the service.

    The service lists at most one page of rows per call, so this repeats until
    a page forgets nothing (bounded by :data:`_PURGE_PASSES`).
    """
    memory, agent = context.memory, context.agent
    backend = memory.backend(agent)
    if backend.capabilities.append_only:
        return Unsupported(
            operation="purge_session",
            backend=backend.name,
            reason=f"{backend.name} memory is append-only (an audit trail)",
        )
    total = 0
    for _ in range(_PURGE_PASSES):
        rows = [e for e in memory.list(agent, session=session) if e.agent == agent]
        done = sum(memory.forget(agent, e.key, source="tool") is True for e in rows)
        total += done
        if done == 0:
            break
    return total


def memory_tools() -> tuple[
    MemoryStoreTool, MemoryRecallTool, MemoryForgetTool, MemoryPurgeTool
]:
    """Return the four memory tools."""
    return (
        MemoryStoreTool(),
        MemoryRecallTool(),
        MemoryForgetTool(),
        MemoryPurgeTool(),
    )
