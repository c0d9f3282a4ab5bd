"""Point ids, payloads and payload filters of :mod:`projections.memory.qdrant`."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final

from qdrant_client import models

from turnledger.projections.memory.protocol import (
    DURABLE_GLOBAL_CATEGORIES,
    MemoryEntry,
    NewMemory,
)

POINT_NAMESPACE: Final = uuid.UUID("6f0d9a52-3c1e-5b8e-9f55-7a1d2c4b8e01")
"""The uuid5 namespace of point ids (agent + key)."""


def point_id(agent: str, key: str) -> str:
    """Return the deterministic point id of an agent's key (JSON-framed pair)."""
    return str(uuid.uuid5(POINT_NAMESPACE, json.dumps([agent, key])))


def point_payload(entry: NewMemory, entry_id: str, created: datetime) -> dict[str, Any]:
    """Return the payload of a write (the entry id and creation time kept)."""
    updated, created = (
        t if t.tzinfo else t.replace(tzinfo=UTC) for t in (entry.at, created)
    )
    return {
        "agent": entry.agent,
        "key": entry.key,
        "entry_id": entry_id,
        "content": entry.content,
        "category": entry.category,
        "session": entry.session,
        "namespace": entry.namespace,
        "importance": entry.importance,
        "created_ts": created.timestamp(),
        "updated_ts": updated.timestamp(),
        "live": True,
    }


def payload_entry(payload: dict[str, Any], score: float | None = None) -> MemoryEntry:
    """Return the entry a point's payload holds."""
    return MemoryEntry(
        id=payload["entry_id"],
        key=payload["key"],
        content=payload["content"],
        category=payload["category"],
        agent=payload["agent"],
        session=payload.get("session"),
        namespace=payload.get("namespace", "default"),
        importance=payload.get("importance"),
        created_at=datetime.fromtimestamp(payload["created_ts"], UTC),
        updated_at=datetime.fromtimestamp(payload["updated_ts"], UTC),
        score=score,
    )


def _match(key: str, value: str) -> models.FieldCondition:
    return models.FieldCondition(key=key, match=models.MatchValue(value=value))


def _session_condition(session: str, *, strict: bool) -> models.Condition:
    own = _match("session", session)
    if strict:
        return own
    durable = models.Filter(
        must=[
            models.IsNullCondition(is_null=models.PayloadField(key="session")),
            models.FieldCondition(
                key="category",
                match=models.MatchAny(any=sorted(DURABLE_GLOBAL_CATEGORIES)),
            ),
        ]
    )
    return models.Filter(should=[own, durable])


def scope_filter(
    agents: Sequence[str],
    session: str | None = None,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    strict: bool = False,
    category: str | None = None,
    live: bool = True,
) -> models.Filter:
    """Return the payload filter a read applies inside its query.

    Args:
        agents: The allowed agents (``MatchAny``).
        session: A session scope; its rows, plus session-less core/daily rows
            unless ``strict``.
        since: Earliest creation time (inclusive).
        until: Latest creation time (inclusive).
        strict: Only the session's own rows.
        category: Only this category.
        live: Leave superseded rows out.
    """
    must: list[models.Condition] = [
        models.FieldCondition(key="agent", match=models.MatchAny(any=list(agents)))
    ]
    if live:
        must.append(
            models.FieldCondition(key="live", match=models.MatchValue(value=True))
        )
    if session is not None:
        must.append(_session_condition(session, strict=strict))
    if category is not None:
        must.append(_match("category", category))
    if since is not None or until is not None:
        window = models.Range(
            gte=since.timestamp() if since else None,
            lte=until.timestamp() if until else None,
        )
        must.append(models.FieldCondition(key="created_ts", range=window))
    return models.Filter(must=must)
