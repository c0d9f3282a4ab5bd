"""A slow embedder inside a memory tool never stalls other sessions' turns."""

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


def test_other_sessions_keep_moving_while_a_tool_waits_on_the_embedder(
    tmp_path: Path, embeddings: SlowEmbeddings
):
    """Session B completes its turns while session A's memory_recall is embedding.

    One runtime, one event loop; agent beta has no memory backend, so nothing
    but the event loop is shared with alpha's blocked embedding call.
    """
    config = parse_config(
        f'ledger = "{tmp_path / "l.db"}"\ndata_dir = "{tmp_path / "data"}"\n'
        "[memory]\nautosave = false\n"
        '[agents.beta]\nmemory = "none"\n'
        f'[embedding]\nprovider = "openai-compatible"\nbase_url = "{embeddings.url}"\n'
        f'model = "tiny"\ndims = {DIMS}\n'
    )
    # Recall embeds its query in the call (a store embeds when the backend
    # applies the event, at the next catch-up): the tool blocks on the embedder.
    store_call = ToolCall(
        id="c1",
        name="memory_recall",
        arguments=json.dumps({"query": f"{SLOW_MARK} deploys"}),
    )

    def answer(request: ChatRequest) -> ChatResponse:
        turn = request.messages[
            max(i for i, m in enumerate(request.messages) if starts_turn(m)) :
        ]
        if "remember" in turn[0].text and not any(m.role == "tool" for m in turn):
            return ChatResponse(tool_calls=(store_call,))
        return ChatResponse(text="done")

    provider = ScriptedProvider([answer] * 10)

    async def run() -> list[str]:
        async with bootstrap(config, provider=provider) as runtime:
            a = b = runtime
            runtime.memory.store_entry(
                "alpha", "deploys", "deploys happen on fridays", category="core"
            )

            async def session_a() -> None:
                outcome = await a.engine.run_turn("alpha", "a", "please remember it")
                assert outcome.completed
                embeddings.order.append("a done")

            async def session_b() -> None:
                for i in range(3):
                    outcome = await b.engine.run_turn("beta", "b", f"question {i}")
                    assert outcome.completed
                embeddings.order.append("b done")
                embeddings.release.set()

            await asyncio.gather(session_a(), session_b())
        return embeddings.order

    order = asyncio.run(run())
    assert order.index("b done") < order.index("slow embedding answered")
    assert order[-1] == "a done"
