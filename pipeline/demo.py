"""``turnledger demo``: a small scripted session recorded into the ledger.

The turn engine (issue #5) replaces the script with a real scripted provider; the
events recorded here are the same kinds the engine records.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from uuid import UUID

from ledger.envelope import Recorded
from ledger.events import (
    AssistantMessage,
    Event,
    MemoryStored,
    ModelCalled,
    PromptAssembled,
    PromptSection,
    SessionOpened,
    ToolCallRecord,
    ToolResultRecorded,
    TurnCompleted,
    TurnStarted,
)
from ledger.ids import memory_stream_id, session_stream_id
from ledger.store import EventStore
from projections.base import fold
from projections.history import SESSION_HISTORY, history_digest, visible_messages

AGENT = "demo"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _free_session_key(store: EventStore) -> str:
    index = 1
    while store.stream_version(session_stream_id(AGENT, f"demo-{index}")):
        index += 1
    return f"demo-{index}"


def _turn_rest(
    turn_id: str, history_digest_: str, script: tuple[str, ToolCallRecord, str, str]
) -> list[Event]:
    user, call, result, answer = script
    return [
        PromptAssembled(
            turn_id=turn_id,
            sections=(
                PromptSection(
                    name="system", chars=6, messages=1, digest=_digest("system")
                ),
                PromptSection(
                    name="history", chars=len(user), messages=1, digest=history_digest_
                ),
            ),
            fingerprint=_digest(f"system\n{history_digest_}"),
            estimated_tokens=len(user) // 4 + 8,
        ),
        ModelCalled(
            turn_id=turn_id,
            provider="scripted",
            model="demo-1",
            input_tokens=42,
            output_tokens=12,
            duration_ms=1.5,
        ),
        AssistantMessage(turn_id=turn_id, tool_calls=(call,)),
        ToolResultRecorded(
            turn_id=turn_id,
            call_id=call.id,
            tool=call.name,
            output=result,
            original_chars=len(result),
            kept_chars=len(result),
        ),
        ModelCalled(
            turn_id=turn_id,
            provider="scripted",
            model="demo-1",
            input_tokens=61,
            output_tokens=9,
            duration_ms=1.2,
            iteration=1,
        ),
        AssistantMessage(turn_id=turn_id, text=answer, iteration=1),
        TurnCompleted(turn_id=turn_id, iterations=2),
    ]


def _record_turn(
    store: EventStore,
    stream: UUID,
    turn_id: str,
    script: tuple[str, ToolCallRecord, str, str],
) -> None:
    user = script[0]
    version = store.append(
        stream,
        [TurnStarted(turn_id=turn_id, origin="interactive", user_input=user)],
        expected_version=store.stream_version(stream),
    ).last_version
    # The prompt's history section is what the projection shows at this point.
    state = fold(SESSION_HISTORY, store.read_stream(stream))[str(stream)]
    digest = history_digest(visible_messages(state))
    store.append(
        stream,
        _turn_rest(turn_id, digest, script),
        expected_version=version,
    )


def record_demo_session(store: EventStore) -> UUID:
    """Record a two-turn scripted session (with a memory write); return its stream."""
    key = _free_session_key(store)
    stream = session_stream_id(AGENT, key)
    store.append(
        stream,
        [SessionOpened(agent=AGENT, session_key=key, channel="cli")],
        expected_version=0,
    )
    store_call = ToolCallRecord(
        id="call_1",
        name="memory_store",
        arguments='{"key": "favourite_editor", "content": "Helix"}',
    )
    _record_turn(
        store,
        stream,
        "t1",
        (
            "Remember that my favourite editor is Helix.",
            store_call,
            "Stored memory: favourite_editor",
            "Noted: your favourite editor is Helix.",
        ),
    )
    memory = memory_stream_id(AGENT)
    store.append(
        memory,
        [
            MemoryStored(
                agent=AGENT,
                key="favourite_editor",
                content="Helix",
                session=key,
                source="tool",
            )
        ],
        expected_version=store.stream_version(memory),
    )
    recall_call = ToolCallRecord(
        id="call_2", name="memory_recall", arguments='{"query": "editor"}'
    )
    _record_turn(
        store,
        stream,
        "t2",
        (
            "Which editor do I like?",
            recall_call,
            "Found 1 memories:\n- [100%] favourite_editor: Helix",
            "You like Helix.",
        ),
    )
    return stream


def render_history(events: Sequence[Recorded]) -> Iterator[str]:
    """Yield a readable line per provider-visible step of a session."""
    for recorded in events:
        match recorded.event:
            case SessionOpened(agent=agent, session_key=key, channel=channel):
                yield f"session {key} (agent {agent}, channel {channel or '-'})"
            case TurnStarted(user_input=text):
                yield f"  [user] {text}"
            case AssistantMessage(text=text, tool_calls=calls):
                for call in calls:
                    yield f"  [assistant] -> {call.name} {call.arguments}"
                if text:
                    yield f"  [assistant] {text}"
            case ToolResultRecorded(tool=tool, output=output):
                yield f"  [tool {tool}] {output.splitlines()[0] if output else ''}"
            case ModelCalled(model=model, input_tokens=i, output_tokens=o):
                yield f"    (model {model}: {i} in / {o} out tokens)"
            case _:
                pass
