"""No memory work of a turn blocks the event loop: other sessions keep moving.

Session A's memory work waits on an embedder that does not answer until
session B has finished three whole turns on the same engine and event loop;
B finishing first proves A's wait ran off the loop. Each case puts the wait in
a different place: the turn's own recall (the engine embeds A's input to
recall for it), the ``memory_store`` tool (its entry is embedded by the
memory's background thread: A's turn does not wait for it at all) and the
``memory_recall`` tool (it embeds its query).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from turnledger.pipeline.bootstrap import bootstrap
from turnledger.pipeline.config import parse_config
from turnledger.pipeline.providers.base import ChatRequest, ChatResponse
from turnledger.pipeline.providers.scripted import ScriptedProvider
from turnledger.policies.messages import ToolCall, starts_turn

SLOW_MARK = "SLOWFACT"
DIMS = 4


class SlowEmbeddings:
    """An OpenAI-compatible /v1/embeddings server; texts with SLOW_MARK wait."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.order: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                texts = body["input"]
                if any(SLOW_MARK in t for t in texts):
                    outer.release.wait(timeout=30)
                    outer.order.append("slow embedding answered")
                data = [
                    {"index": i, "embedding": [1.0, float(len(t) % 7), 0.5, 0.25]}
                    for i, t in enumerate(texts)
                ]
                raw = json.dumps({"data": data}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: object) -> None:
                del args

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"


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
    if case == "memory_store tool":  # the write never waits for its vector
        assert order.index("a done") < order.index("slow embedding answered")
    else:
        assert order[-1] == "a done"
