"""The ledger: typed events on an append-only store (SQLite default, PostgreSQL).

Importing ``ledger`` is cheap: each name below loads its module when first used,
and the storage backends load when a store is opened.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from turnledger.ledger.envelope import AppendResult, Position, Recorded
    from turnledger.ledger.errors import (
        ConcurrencyError,
        ConfigurationError,
        CorruptRecordError,
        InvalidEventError,
        LedgerError,
        StoreUnavailableError,
        UnknownEventTypeError,
    )
    from turnledger.ledger.events import (
        EVENT_TYPES,
        AssistantMessage,
        Event,
        HistoryTrimmed,
        KnowledgeCaptured,
        LedgerEvent,
        MediaAttached,
        MemoryForgotten,
        MemoryRecalled,
        MemoryStored,
        MemorySuperseded,
        ModelCalled,
        PromptAssembled,
        PromptSection,
        RecallRef,
        SessionOpened,
        ToolCallRecord,
        ToolResultRecorded,
        TurnCompleted,
        TurnFailed,
        TurnOrigin,
        TurnStarted,
        tag_of,
    )
    from turnledger.ledger.ids import memory_stream_id, session_stream_id

_HOME: dict[str, str] = {
    "AppendResult": "envelope",
    "AssistantMessage": "events",
    "ConcurrencyError": "errors",
    "ConfigurationError": "errors",
    "CorruptRecordError": "errors",
    "EVENT_TYPES": "events",
    "Event": "events",
    "HistoryTrimmed": "events",
    "InvalidEventError": "errors",
    "KnowledgeCaptured": "events",
    "LedgerError": "errors",
    "LedgerEvent": "events",
    "MediaAttached": "events",
    "MemoryForgotten": "events",
    "MemoryRecalled": "events",
    "MemoryStored": "events",
    "MemorySuperseded": "events",
    "ModelCalled": "events",
    "Position": "envelope",
    "PromptAssembled": "events",
    "PromptSection": "events",
    "RecallRef": "events",
    "Recorded": "envelope",
    "SessionOpened": "events",
    "StoreUnavailableError": "errors",
    "ToolCallRecord": "events",
    "ToolResultRecorded": "events",
    "TurnCompleted": "events",
    "TurnFailed": "events",
    "TurnOrigin": "events",
    "TurnStarted": "events",
    "UnknownEventTypeError": "errors",
    "memory_stream_id": "ids",
    "session_stream_id": "ids",
    "tag_of": "events",
}

__all__ = [
    "EVENT_TYPES",
    "AppendResult",
    "AssistantMessage",
    "ConcurrencyError",
    "ConfigurationError",
    "CorruptRecordError",
    "Event",
    "HistoryTrimmed",
    "InvalidEventError",
    "KnowledgeCaptured",
    "LedgerError",
    "LedgerEvent",
    "MediaAttached",
    "MemoryForgotten",
    "MemoryRecalled",
    "MemoryStored",
    "MemorySuperseded",
    "ModelCalled",
    "Position",
    "PromptAssembled",
    "PromptSection",
    "RecallRef",
    "Recorded",
    "SessionOpened",
    "StoreUnavailableError",
    "ToolCallRecord",
    "ToolResultRecorded",
    "TurnCompleted",
    "TurnFailed",
    "TurnOrigin",
    "TurnStarted",
    "UnknownEventTypeError",
    "memory_stream_id",
    "session_stream_id",
    "tag_of",
]


def __getattr__(name: str) -> Any:
    """Load ``name`` from its module on first use."""
    home = _HOME.get(name)
    if home is None:
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
