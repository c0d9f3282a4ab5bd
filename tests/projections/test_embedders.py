"""Embedders: URL rules, the OpenAI-compatible client against a REAL local HTTP
server (success, HTTP errors, malformed bodies, timeouts, no key in errors), and
the missing-extra error of the local sentence-transformers embedder."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.contracts.memory_contract import T0
from turnledger.projections.memory.embedding import (
    EmbedderError,
    EmbedderNotInstalledError,
    EmbeddingIdentity,
    NoEmbedder,
    OpenAICompatibleEmbedder,
    SentenceTransformerEmbedder,
    embeddings_url,
    parse_embeddings,
)
from turnledger.projections.memory.protocol import NewMemory
from turnledger.projections.memory.sqlite import SQLiteMemory

API_KEY = "sk-test-SECRET-0123456789"
DIMS = 3


def fake_vector(text: str) -> list[float]:
    return [float(len(text)), float(sum(c in "aeiou" for c in text)), 1.0]


class FakeServer:
    """What the fake /embeddings endpoint does next, and what it received."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.requests: list[dict] = []
        self.sleep = 0.0


def make_handler(state: FakeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # keep test output quiet
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length))
            state.requests.append(
                {
                    "path": self.path,
                    "auth": self.headers.get("Authorization"),
                    "body": body,
                }
            )
            if state.sleep:
                time.sleep(state.sleep)
            status, payload = self.answer(body)
            raw = (
                payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            )
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (the timeout test)

        def answer(self, body: dict) -> tuple[int, object]:
            texts = body["input"]
            data = [
                {"object": "embedding", "index": i, "embedding": fake_vector(t)}
                for i, t in enumerate(texts)
            ]
            match state.mode:
                case "ok":
                    return 200, {"object": "list", "data": data, "model": body["model"]}
                case "reversed":
                    return 200, {"data": list(reversed(data))}
                case "error":
                    echoed = self.headers.get("Authorization")
                    return 500, {"error": {"message": f"boom, you sent {echoed}"}}
                case "not_json":
                    return 200, b"<html>gateway</html>"
                case "no_data":
                    return 200, {"result": []}
                case "short":
                    return 200, {"data": data[:-1]}
                case "wrong_dims":
                    return 200, {"data": [{"index": 0, "embedding": [1.0]}]}
            raise AssertionError(state.mode)

    return Handler


@pytest.fixture(name="server")
def _server() -> Iterator[tuple[FakeServer, str]]:
    state = FakeServer()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(state))
    httpd.daemon_threads = True
    thread = threading.Thread(
        target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
    )
    thread.start()
    host, port = httpd.server_address[:2]
    yield state, f"http://{host}:{port}"
    httpd.shutdown()
    httpd.server_close()
    thread.join()


@pytest.fixture(name="embedder")
def _embedder(server) -> Iterator[OpenAICompatibleEmbedder]:
    _, base = server
    embedder = OpenAICompatibleEmbedder(
        base, "fake-embed", DIMS, api_key=API_KEY, timeout=5
    )
    yield embedder
    embedder.close()


@pytest.mark.parametrize(
    ("base", "url"),
    [
        ("https://api.openai.com", "https://api.openai.com/v1/embeddings"),
        ("https://api.openai.com/", "https://api.openai.com/v1/embeddings"),
        ("https://openrouter.ai/api/v1", "https://openrouter.ai/api/v1/embeddings"),
        ("http://host:8080/custom/", "http://host:8080/custom/embeddings"),
        ("http://host/v1/embeddings", "http://host/v1/embeddings"),
    ],
)
def test_url_rule(base, url):
    """As-is when it ends with /embeddings; /embeddings after a path; else /v1/embeddings."""
    assert embeddings_url(base) == url


def test_url_must_be_http():
    with pytest.raises(EmbedderError, match="Expected an http"):
        embeddings_url("ftp://example.com")


def test_success(server, embedder):
    """Vectors come back in order; the key is sent as a bearer token."""
    state, _ = server
    assert embedder.embed(["alpha", "be"]) == [fake_vector("alpha"), fake_vector("be")]
    (request,) = state.requests
    assert request["path"] == "/v1/embeddings"
    assert request["auth"] == f"Bearer {API_KEY}"
    assert request["body"] == {"model": "fake-embed", "input": ["alpha", "be"]}
    assert embedder.identity == EmbeddingIdentity(
        f"openai-compatible:{embedder.url}", "fake-embed", DIMS
    )


def test_batches_and_index_order(server):
    """Large inputs are split; data[].index decides the order."""
    state, base = server
    state.mode = "reversed"
    embedder = OpenAICompatibleEmbedder(
        base, "m", DIMS, batch_size=2, send_dimensions=True
    )
    try:
        texts = ["a", "bb", "ccc", "dddd", "eeeee"]
        assert embedder.embed(texts) == [fake_vector(t) for t in texts]
    finally:
        embedder.close()
    assert [len(r["body"]["input"]) for r in state.requests] == [2, 2, 1]
    assert state.requests[0]["body"]["dimensions"] == DIMS
    assert state.requests[0]["auth"] is None
    assert embedder.embed([]) == []


def test_http_error_does_not_leak_the_key(server, embedder):
    """A 500 raises EmbedderError with the status; an echoed key is masked."""
    state, _ = server
    state.mode = "error"
    with pytest.raises(EmbedderError) as failed:
        embedder.embed(["x"])
    text = str(failed.value)
    assert text.startswith(f"Expected HTTP 200 from {embedder.url}, found 500: ")
    assert API_KEY not in text
    assert "Bearer ***" in text
    assert API_KEY not in repr(embedder)
    assert "api_key=***" in repr(embedder)


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("not_json", "Expected a JSON body from"),
        ("no_data", "Expected 1 embeddings in 'data', found NoneType"),
        ("wrong_dims", "Expected a 3-dimension embedding at data[0], found 1"),
    ],
)
def test_malformed_bodies(server, embedder, mode, message):
    state, _ = server
    state.mode = mode
    with pytest.raises(EmbedderError) as failed:
        embedder.embed(["x"])
    assert message in str(failed.value)


def test_short_answer(server, embedder):
    state, _ = server
    state.mode = "short"
    with pytest.raises(EmbedderError, match="Expected 2 embeddings in 'data', found 1"):
        embedder.embed(["x", "y"])


def test_timeout(server):
    """A slow server raises EmbedderError naming the timeout."""
    state, base = server
    state.sleep = 0.5
    embedder = OpenAICompatibleEmbedder(base, "m", DIMS, api_key=API_KEY, timeout=0.05)
    try:
        with pytest.raises(EmbedderError) as failed:
            embedder.embed(["x"])
    finally:
        embedder.close()
    assert (
        str(failed.value)
        == f"Embedding request to {embedder.url} timed out after 0.05s"
    )
    assert failed.value.__cause__ is None


def test_connection_refused_does_not_leak_the_key():
    """A dead endpoint raises EmbedderError; the key is not in the text."""
    embedder = OpenAICompatibleEmbedder(
        "http://127.0.0.1:9", "m", DIMS, api_key=API_KEY, timeout=2
    )
    try:
        with pytest.raises(EmbedderError) as failed:
            embedder.embed(["x"])
    finally:
        embedder.close()
    assert "failed: ConnectError" in str(failed.value)
    assert API_KEY not in str(failed.value)


def test_sqlite_memory_over_http(server, embedder, tmp_path):
    """The backend stores vectors from the HTTP embedder and recalls with them."""
    memory = SQLiteMemory(tmp_path / "m.db", embedder=embedder, search_mode="embedding")
    try:
        memory.store(
            NewMemory(agent="alice", key="k", content="alpha", entry_id="e1", at=T0)
        )
        memory.embed_pending()  # vectors come after the write
        (entry,) = memory.recall("alpha", agents=["alice"])
        assert entry.key == "k"
        assert entry.score == pytest.approx(1.0)
        state, _ = server
        state.mode = "error"
        memory.store(
            NewMemory(agent="alice", key="k2", content="beta", entry_id="e2", at=T0)
        )
        assert memory.embed_pending() == 0
        assert memory.count(agents=["alice"]) == 2
        assert API_KEY not in memory.last_embedding_error
    finally:
        memory.close()


def test_parse_rejects_bad_items():
    with pytest.raises(EmbedderError, match="Expected an object at data"):
        parse_embeddings({"data": [1]}, count=1, dims=1)
    with pytest.raises(EmbedderError, match=r"index in 0..0, found 3"):
        parse_embeddings({"data": [{"index": 3, "embedding": [1.0]}]}, count=1, dims=1)
    with pytest.raises(EmbedderError, match="duplicate indexes"):
        parse_embeddings(
            {"data": [{"index": 0, "embedding": [1.0]}] * 2}, count=2, dims=1
        )
    with pytest.raises(EmbedderError, match="finite numbers"):
        parse_embeddings({"data": [{"embedding": [float("nan")]}]}, count=1, dims=1)


def test_no_embedder():
    """The default embeds nothing."""
    embedder = NoEmbedder()
    assert embedder.identity == EmbeddingIdentity("none", "none", 0)
    assert embedder.embed(["a", "b"]) == [[], []]


def test_sentence_transformers_missing_extra(monkeypatch):
    """Without the optional package, a typed error says how to install it."""
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(EmbedderNotInstalledError) as failed:
        SentenceTransformerEmbedder()
    assert str(failed.value) == (
        "Expected the sentence-transformers package for local embeddings, "
        "found it not installed (pip install sentence-transformers)"
    )
    assert isinstance(failed.value, EmbedderError)
    assert isinstance(failed.value, ImportError)


class FakeModel:
    """Stands in for sentence_transformers.SentenceTransformer (no download)."""

    def __init__(self, name, device=None):
        if name == "missing-model":
            raise OSError("not found on the hub")
        self.name, self.device = name, device

    def get_sentence_embedding_dimension(self):
        return 2

    def encode(self, texts, convert_to_numpy=True):
        import numpy as np

        if "boom" in texts:
            raise RuntimeError("CUDA out of memory")
        return np.array([[float(len(t)), 1.0] for t in texts])


def test_sentence_transformers_with_a_fake_module(monkeypatch):
    """With the package importable, the model is loaded and used lazily."""
    fake = type(sys)("sentence_transformers")
    fake.SentenceTransformer = FakeModel
    monkeypatch.setitem(sys.modules, "sentence_transformers", fake)
    embedder = SentenceTransformerEmbedder("tiny", device="cpu")
    assert embedder.identity == EmbeddingIdentity("sentence-transformers", "tiny", 2)
    assert embedder.embed(["abc", "de"]) == [[3.0, 1.0], [2.0, 1.0]]
    assert embedder.embed([]) == []
    assert repr(embedder) == "SentenceTransformerEmbedder(model='tiny')"
    with pytest.raises(EmbedderError, match="CUDA out of memory"):
        embedder.embed(["boom"])
    with pytest.raises(EmbedderError, match="not found on the hub"):
        SentenceTransformerEmbedder("missing-model")
