"""Engine steps are idempotent: a step retried after a lost acknowledgement is
written once (issue #10 item 4, wired into the engine).

Every engine append carries the key ``f"{turn_id}:{step}"``; the session cursor
retries an append the database did not acknowledge with the same key, and the
ledger returns the first commit's result instead of writing again. Here the
real ledger commits every keyed append's first try and then answers it with an
error (the acknowledgement lost); two turns (one with a tool call) then leave
exactly the events, and prompts over exactly the history, of the same two turns
on a ledger that never lost an answer, and ``verify`` is clean.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from turnledger.ledger.aio import AsyncLedger
from turnledger.ledger.errors import LedgerLockedError, StoreUnavailableError
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import EventStore, open_store
from turnledger.ledger.verify import verify
from turnledger.pipeline.bootstrap import bootstrap
from turnledger.pipeline.config import parse_config
from turnledger.pipeline.providers.base import ChatResponse
from turnledger.pipeline.providers.scripted import ScriptedProvider
from turnledger.pipeline.tools.memory_tools import memory_tools
from turnledger.policies.messages import ToolCall

AGENT = "ops"


class LostAckLedger(AsyncLedger):
    """The real ledger; the first try of every keyed append commits, then its
    acknowledgement is lost (the database answers with an error)."""

    def __init__(self, store: EventStore) -> None:
        super().__init__(store, close_store=False)
        self.lost: list[str] = []

    async def append(
        self, stream_id, events, *, expected_version, idempotency_key=None
    ):
        result = await super().append(
            stream_id,
            events,
            expected_version=expected_version,
            idempotency_key=idempotency_key,
        )
        if idempotency_key is not None and idempotency_key not in self.lost:
            self.lost.append(idempotency_key)
            raise StoreUnavailableError("the acknowledgement was lost")
        return result


def _script() -> list[ChatResponse]:
    store = ToolCall(
        id="call_1", name="memory_store", arguments='{"key": "k", "content": "v"}'
    )
    return [
        ChatResponse(tool_calls=(store,)),
        ChatResponse(text="stored"),
        ChatResponse(text="second answer"),
    ]


async def _two_turns(path: str, lossy: bool) -> tuple[list[str], list[str]]:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    config = parse_config(f'data_dir = "{Path(path).parent}"\n')
    store = open_store(path)
    ledger = LostAckLedger(store) if lossy else AsyncLedger(store, close_store=False)
    try:
        async with bootstrap(
            config,
            provider=ScriptedProvider(_script()),
            store=store,
            ledger_url=path,
            tools={t.spec.name: t for t in memory_tools()},
            ledger=ledger,
        ) as runtime:
            for text in ("remember that k is v, please", "what is k again?"):
                outcome = await runtime.engine.run_turn(AGENT, "s1", text)
                assert outcome.completed, outcome
        events = [r.event for r in store.read_stream(session_stream_id(AGENT, "s1"))]
        assert verify(store).ok
    finally:
        await ledger.aclose()
        store.close()
    shapes = [
        f"{type(e).__name__}:{getattr(e, 'iteration', '')}:"
        + ",".join(
            f"{s.name}/{s.messages}/{s.chars}" for s in getattr(e, "sections", ())
        )
        for e in events
    ]
    return shapes, ledger.lost if isinstance(ledger, LostAckLedger) else []


def test_engine_steps_retried_after_a_lost_acknowledgement_are_written_once(tmp_path):
    baseline, _ = asyncio.run(
        _two_turns(str(tmp_path / "a" / "ledger.db"), lossy=False)
    )
    shapes, lost = asyncio.run(
        _two_turns(str(tmp_path / "b" / "ledger.db"), lossy=True)
    )
    assert shapes == baseline  # every step once, and the prompts saw the same history
    steps = sorted({key.split(":", 1)[1] for key in lost})
    assert steps == [
        "assistant-0",
        "completed",
        "opened",
        "prompt-0",
        "prompt-1",
        "results-0",
        "started",
    ]
    assert len(lost) == len(set(lost)) == 7 + 3  # turn 2: started, prompt-0, completed


class LockedLedger(AsyncLedger):
    """The real ledger, locked by another writer for the first append's whole wait."""

    def __init__(self, store: EventStore) -> None:
        super().__init__(store, close_store=False)
        self.tries = 0

    async def append(
        self, stream_id, events, *, expected_version, idempotency_key=None
    ):
        self.tries += 1
        if self.tries == 1:
            raise LedgerLockedError("the ledger is locked by another writer")
        return await super().append(
            stream_id,
            events,
            expected_version=expected_version,
            idempotency_key=idempotency_key,
        )


def test_a_failure_that_wrote_nothing_is_not_retried(tmp_path):
    path = str(tmp_path / "ledger.db")
    config = parse_config(f'data_dir = "{tmp_path}"\n')
    store = open_store(path)
    ledger = LockedLedger(store)

    async def turn() -> None:
        runtime = bootstrap(
            config,
            provider=ScriptedProvider([ChatResponse(text="hi")]),
            store=store,
            ledger_url=path,
            tools={},
            ledger=ledger,
        )
        try:
            with pytest.raises(LedgerLockedError):
                await runtime.engine.run_turn(AGENT, "s1", "hello there")
        finally:
            await runtime.aclose()
            await ledger.aclose()

    try:
        asyncio.run(turn())
        assert ledger.tries == 1
        assert store.stream_version(session_stream_id(AGENT, "s1")) == 0
    finally:
        store.close()
