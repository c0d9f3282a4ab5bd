"""``memory_export``: the agent's own memories as JSON lines (reference §2.1 export).

Only the calling agent's rows that are visible from the calling session
(session-less ``core``/``daily`` facts and this session's rows), oldest first,
at most ``limit`` (default 100, at most 1,000); each line is one JSON object
with ``key``, ``content``, ``category``, ``session``, ``namespace``,
``importance``, ``created_at`` and ``updated_at``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from datetime import UTC, datetime
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
)
from turnledger.pipeline.tools.base import ToolContext, ToolOutcome
from turnledger.policies.paths import sanitize_session_key
from turnledger.projections.memory.protocol import MemoryEntry, visible_in_session

DEFAULT_EXPORT_LIMIT: Final = 100
MAX_EXPORT_LIMIT: Final = 1_000

MEMORY_EXPORT_SPEC: Final = ToolSpec(
    name="memory_export",
    description=(
        "Export your long-term memories as JSON lines (oldest first), optionally "
        "filtered by category and creation time."
    ),
    parameters={
        "type": "object",
        "properties": {
            "category": {"type": "string", "description": "Only this category."},
            "since": {
                "type": "string",
                "description": "Only entries created at or after (ISO 8601).",
            },
            "until": {
                "type": "string",
                "description": "Only entries created at or before (ISO 8601).",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_EXPORT_LIMIT,
                "description": f"Max entries (default {DEFAULT_EXPORT_LIMIT}).",
            },
        },
    },
)


def optional_moment(arguments: Mapping[str, Any], name: str) -> datetime | None:
    """Return an optional ISO 8601 date or date-time argument (UTC when naive).

    Raises:
        ArgumentError: It is present but not an ISO date or date-time.
    """
    text = optional_str(arguments, name)
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        msg = f"Expected '{name}' to be an ISO 8601 date or date-time, found {text!r}"
        raise ArgumentError(msg) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def export_line(entry: MemoryEntry) -> str:
    """One JSON line of an entry (no ids, no scores)."""
    return json.dumps(
        {
            "key": entry.key,
            "content": entry.content,
            "category": entry.category,
            "session": entry.session,
            "namespace": entry.namespace,
            "importance": entry.importance,
            "created_at": entry.created_at.isoformat(),
            "updated_at": entry.updated_at.isoformat(),
        },
        ensure_ascii=False,
    )


class MemoryExportTool:
    """``memory_export {category?, since?, until?, limit?}``."""

    @property
    def spec(self) -> ToolSpec:
        """Name, description and JSON-schema parameters."""
        return MEMORY_EXPORT_SPEC

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutcome:
        """Export the agent's visible entries; ``No memories found.`` when none."""
        try:
            args = check_object(arguments)
            category = optional_str(args, "category")
            since = optional_moment(args, "since")
            until = optional_moment(args, "until")
            limit = optional_int(
                args,
                "limit",
                default=DEFAULT_EXPORT_LIMIT,
                minimum=1,
                maximum=MAX_EXPORT_LIMIT,
            )
        except ArgumentError as e:
            return failure(str(e))
        try:
            entries = await asyncio.to_thread(
                context.memory.export,
                context.agent,
                category=category,
                since=since,
                until=until,
            )
        except (MemoryAccessError, LedgerError, OSError) as e:
            return failure(f"Memory export failed: {e}")
        session = sanitize_session_key(context.session_key)
        visible = [
            e for e in entries if visible_in_session(e.session, e.category, session)
        ][:limit]
        if not visible:
            return ok("No memories found.")
        return ok("\n".join(export_line(e) for e in visible))
