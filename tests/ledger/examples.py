"""One fully populated example of every event type (goldens and round trips use them)."""

from __future__ import annotations

from turnledger.ledger.events import (
    AssistantMessage,
    ErasureRecorded,
    Event,
    HistoryTrimmed,
    ItemRecorded,
    ItemsRemoved,
    KnowledgeCaptured,
    MediaAttached,
    MemoryForgotten,
    MemoryRecalled,
    MemoryStored,
    MemorySuperseded,
    ModelCalled,
    PromptAssembled,
    PromptSection,
    RecallRef,
    SessionForked,
    SessionOpened,
    SessionRewound,
    SystemPromptSet,
    ToolCallRecord,
    ToolResultRecorded,
    TurnCompleted,
    TurnFailed,
    TurnStarted,
)

SHA = "a" * 64

EXAMPLES: list[Event] = [
    SessionOpened(
        agent="ops", session_key="telegram_42", channel="telegram", workspace="/w"
    ),
    TurnStarted(
        turn_id="t1", origin="channel", user_input="résumé ✓ please", attachments=(SHA,)
    ),
    MemoryRecalled(
        turn_id="t1",
        backend="sqlite",
        entries=(RecallRef(key="editor", entry_id="e1", score=0.82, agent="ops"),),
        query_summary="favourite editor",
        injected_chars=57,
    ),
    PromptAssembled(
        turn_id="t1",
        iteration=0,
        sections=(PromptSection(name="system", chars=120, messages=1, digest=SHA),),
        fingerprint=SHA,
        estimated_tokens=34,
    ),
    ModelCalled(
        turn_id="t1",
        provider="openai",
        model="gpt-x",
        input_tokens=1200,
        output_tokens=80,
        cached_input_tokens=1000,
        cache_write_tokens=150,
        reasoning_tokens=30,
        cost_usd=0.0123,
        duration_ms=812.5,
        success=False,
        error="HTTP 429 rate limited",
        iteration=1,
    ),
    AssistantMessage(
        turn_id="t1",
        text="Let me look.",
        tool_calls=(
            ToolCallRecord(id="call_1", name="file_read", arguments='{"p":"a"}'),
        ),
        iteration=1,
    ),
    ToolResultRecorded(
        turn_id="t1",
        call_id="call_1",
        tool="file_read",
        success=False,
        output="partial",
        error="EACCES",
        original_chars=90000,
        kept_chars=50000,
        truncated=True,
        provenance="executed",
    ),
    HistoryTrimmed(
        turn_id="t1",
        dropped_messages=12,
        dropped_turns=3,
        kept_turns=2,
        tokens_before=40000,
        tokens_after=30000,
        reason="context token budget exceeded",
        dropped_through_version=57,
        breadcrumb=True,
    ),
    MediaAttached(
        turn_id="t1",
        file_name="cat.png",
        mime="image/png",
        kind="image",
        size_bytes=2048,
        sha256=SHA,
        storage_ref=f"media/{SHA}",
        summary=None,
    ),
    MemoryStored(
        agent="ops",
        key="editor",
        content="Helix",
        category="core",
        session=None,
        namespace="default",
        importance=0.7,
        source="consolidation",
        entry_id="e1",
    ),
    MemoryForgotten(
        agent="ops", key="editor", session="s", source="cli", reason="asked"
    ),
    MemorySuperseded(
        agent="ops", key="editor", superseded_by="editor_2", source="consolidation"
    ),
    KnowledgeCaptured(
        agent="ops",
        subject="alice",
        relation="works_on",
        object="turnledger",
        provenance="t1",
    ),
    TurnCompleted(turn_id="t1", iterations=2, duration_ms=1500.0),
    TurnFailed(turn_id="t2", kind="interrupted", error="process died"),
    SystemPromptSet.of(
        "You are a careful assistant. Résumé ✓", role="developer", turn_id="t1"
    ),
    ItemRecorded(
        turn_id="t1",
        framework="openai-agents",
        kind="function_call",
        fields='{"id":"fc_1","status":"completed"}',
        typed=True,
    ),
    ItemsRemoved(
        first_version=4, last_version=5, framework="openai-agents", reason="pop_item"
    ),
    SessionForked(
        agent="ops",
        session_key="telegram_42-fork-1",
        source_stream="00000000-0000-4000-8000-000000000001",
        source_version=7,
        source_position=7,
        base_version=7,
        channel="telegram",
    ),
    SessionRewound(
        to_version=3,
        to_position=3,
        turns=("t2",),
        memory_rule="supersede",
        superseded=("editor",),
    ),
    ErasureRecorded(
        subject="session",
        agent="ops",
        subject_digest="0" * 64,
        streams=("00000000-0000-4000-8000-000000000001",),
        keys_destroyed=2,
        command="turnledger erase --session",
    ),
]
