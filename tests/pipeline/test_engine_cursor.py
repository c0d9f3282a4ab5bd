"""A turn trusts its cached session cursor; another writer is found, not missed.

The engine no longer reads a cached session's head before a turn: the turn's
first append expects the cached version. These tests move the session behind a
cached cursor's back (a crashed process's half turn, another engine's turn) and
check that the next turn still sees all of it: the conflict writes nothing, the
cursor is refreshed, the crashed turn is repaired, the prompt includes the
other writer's messages. The session lock keeps one descriptor per engine; two
engines in one process still exclude each other, and so do two sessions of one
engine whose lock bytes collide.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from uuid import UUID

import pytest

from turnledger.ledger.events import (
    AssistantMessage,
    ToolCallRecord,
    ToolResultRecorded,
    TurnFailed,
    TurnStarted,
)
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import open_store
from turnledger.ledger.verify import verify
from turnledger.pipeline.bootstrap import bootstrap
from turnledger.pipeline.config import parse_config
from turnledger.pipeline.engine.session_lock import SessionBusyError, SessionLocks
from turnledger.pipeline.providers.base import ChatRequest, ChatResponse
from turnledger.pipeline.providers.scripted import ScriptedProvider
from turnledger.policies.pairing import audit_pairing


def _config(tmp_path: Path):
    return parse_config(
        f'ledger = "{tmp_path / "l.db"}"\ndata_dir = "{tmp_path / "data"}"\n'
        "[memory]\nautosave = false\n"
    )


class Recording:
    """A scripted answer that keeps every request it was asked."""

    def __init__(self) -> None:
        self.requests: list[ChatRequest] = []

    def __call__(self, request: ChatRequest) -> ChatResponse:
        self.requests.append(request)
        return ChatResponse(text=f"answer {len(self.requests)}")


def test_a_half_turn_written_behind_a_cached_cursor_is_repaired(tmp_path):
    """The stale cursor's first append conflicts; the turn repairs, then runs."""
    recording = Recording()
    stream = session_stream_id("ops", "s1")

    async def run() -> None:
        provider = ScriptedProvider([recording] * 3)
        async with bootstrap(_config(tmp_path), provider=provider) as runtime:
            assert (await runtime.engine.run_turn("ops", "s1", "first")).completed
            store = runtime.store
            store.append(  # another process: a turn that crashed after its call
                stream,
                [
                    TurnStarted(turn_id="dead", origin="interactive", user_input="x1"),
                    AssistantMessage(
                        turn_id="dead",
                        tool_calls=(ToolCallRecord(id="lost", name="echo"),),
                    ),
                ],
                expected_version=store.stream_version(stream),
            )
            outcome = await runtime.engine.run_turn("ops", "s1", "second")
            assert outcome.completed

    asyncio.run(run())
    with open_store(str(tmp_path / "l.db")) as store:
        events = [r.event for r in store.read_stream(stream)]
        assert verify(store).ok
    synthesized = [
        e.call_id
        for e in events
        if isinstance(e, ToolResultRecorded) and e.provenance == "synthesized"
    ]
    assert synthesized == ["lost"]
    assert any(isinstance(e, TurnFailed) and e.turn_id == "dead" for e in events)
    starts = [e.user_input for e in events if isinstance(e, TurnStarted)]
    assert starts == ["first", "x1", "second"]  # nothing written twice
    last = recording.requests[-1].messages
    assert [m.text for m in last if m.role == "user"] == ["first", "x1", "second"]
    assert audit_pairing(list(last)).clean


def test_another_engines_turn_is_in_the_next_prompt(tmp_path):
    """Two engines take turns in one session; each prompt holds every turn."""
    recording = Recording()

    async def run() -> None:
        config = _config(tmp_path)
        a = bootstrap(config, provider=ScriptedProvider([recording] * 4))
        b = bootstrap(config, provider=ScriptedProvider([recording] * 4))
        try:
            for i in range(4):
                engine = (a, b)[i % 2].engine
                assert (await engine.run_turn("ops", "s1", f"q{i}")).completed
        finally:
            await a.aclose()
            await b.aclose()

    asyncio.run(run())
    users = [
        [m.text for m in r.messages if m.role == "user"] for r in recording.requests
    ]
    assert users == [[f"q{j}" for j in range(i + 1)] for i in range(4)]


def _colliding(stream: UUID) -> UUID:
    """Another stream id whose lock byte is the same (first 7 bytes equal)."""
    raw = bytearray(stream.bytes)
    raw[15] ^= 0xFF
    return UUID(bytes=bytes(raw))


def test_session_locks_exclude_across_engines_and_colliding_sessions(tmp_path):
    """One descriptor per engine: still one holder per session, per byte."""
    store = open_store(str(tmp_path / "l.db"))
    stream = session_stream_id("ops", "s1")

    async def run() -> list[str]:
        first, second = SessionLocks(store, wait=0.05), SessionLocks(store, wait=0.05)
        seen = []
        async with first.hold(stream):
            with pytest.raises(SessionBusyError):
                async with second.hold(stream):
                    pass
            with pytest.raises(SessionBusyError):  # same byte, same engine: waits
                async with first.hold(_colliding(stream)):
                    pass
            seen.append("held")
        async with second.hold(stream):  # released: the other engine gets it
            seen.append("second")
            with pytest.raises(SessionBusyError):
                async with first.hold(stream):
                    pass
        async with first.hold(_colliding(stream)):
            seen.append("colliding")
        async with second.hold(stream):
            second.close()  # closing the descriptor drops the lock
            async with first.hold(stream):
                seen.append("after close")
        first.close()
        return seen

    try:
        assert asyncio.run(run()) == ["held", "second", "colliding", "after close"]
    finally:
        store.close()
