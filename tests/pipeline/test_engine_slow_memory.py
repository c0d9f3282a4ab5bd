"""No memory work of a turn blocks the event loop: other sessions keep moving.

Session A's memory work waits on an embedder that does not answer until
session B has finished three whole turns on the same engine and event loop;
B finishing first proves A's wait ran off the loop. Each case puts the wait in
a different place: the turn's own recall (the engine embeds A's input to
recall for it), the ``memory_store`` tool (its read-back applies the entry,
which embeds it) and the ``memory_recall`` tool (it embeds its query). The
``memory_recall`` case is also in ``test_slow_embedder.py``; here it sits
beside the others.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pipeline.test_slow_embedder import DIMS, SLOW_MARK, SlowEmbeddings
from turnledger.pipeline.bootstrap import bootstrap
from turnledger.pipeline.config import parse_config
from turnledger.pipeline.providers.base import ChatRequest, ChatResponse
from turnledger.pipeline.providers.scripted import ScriptedProvider
from turnledger.policies.messages import ToolCall, starts_turn


@pytest.fixture(name="embeddings")
def _embeddings() -> Iterator[SlowEmbeddings]:
    server = SlowEmbeddings()
    server.thread.start()
    yield server
    server.release.set()
    server.server.shutdown()
    server.server.server_close()


CASES = {
    "turn recall": (f"what about {SLOW_MARK} deploys?", None),
    "memory_store tool": (
        "please remember it",
        ToolCall(
            id="c1",
            name="memory_store",
            arguments=json.dumps({"key": "slow", "content": f"{SLOW_MARK} on fridays"}),
        ),
    ),
    "memory_recall tool": (
        "please remember it",
        ToolCall(
            id="c1",
            name="memory_recall",
            arguments=json.dumps({"query": f"{SLOW_MARK} deploys"}),
        ),
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_other_sessions_finish_while_a_turns_memory_waits(
    tmp_path: Path, embeddings: SlowEmbeddings, case: str
):
    """B completes three turns while A's memory work waits on the embedder."""
    user_input, call = CASES[case]
    config = parse_config(
        f'ledger = "{tmp_path / "l.db"}"\ndata_dir = "{tmp_path / "data"}"\n'
        "[memory]\nautosave = false\n"
        '[agents.beta]\nmemory = "none"\n'
        f'[embedding]\nprovider = "openai-compatible"\nbase_url = "{embeddings.url}"\n'
        f'model = "tiny"\ndims = {DIMS}\n'
    )

    def answer(request: ChatRequest) -> ChatResponse:
        start = max(i for i, m in enumerate(request.messages) if starts_turn(m))
        turn = request.messages[start:]
        asked = call is not None and turn[0].text.endswith(user_input)
        if asked and not any(m.role == "tool" for m in turn):
            return ChatResponse(tool_calls=(call,))
        return ChatResponse(text="done")

    provider = ScriptedProvider([answer] * 10)

    async def run() -> list[str]:
        async with bootstrap(config, provider=provider) as runtime:
            runtime.memory.store_entry(
                "alpha", "deploys", "deploys happen on fridays", category="core"
            )
            runtime.memory.backend("alpha")  # applied (embedded) before the turns

            async def session_a() -> None:
                outcome = await runtime.engine.run_turn("alpha", "a", user_input)
                assert outcome.completed
                embeddings.order.append("a done")

            async def session_b() -> None:
                for i in range(3):
                    outcome = await runtime.engine.run_turn("beta", "b", f"q {i}")
                    assert outcome.completed
                embeddings.order.append("b done")
                embeddings.release.set()

            await asyncio.wait_for(asyncio.gather(session_a(), session_b()), 60)
        return embeddings.order

    order = asyncio.run(run())
    assert order.index("b done") < order.index("slow embedding answered")
    assert order[-1] == "a done"
