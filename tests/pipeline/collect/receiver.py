"""A collect receiver on a free loopback port, served by uvicorn in a thread."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn

from turnledger.ledger.store import EventStore
from turnledger.pipeline.collect import Recorder
from turnledger.pipeline.collect.server import CollectApp
from turnledger.pipeline.web.server import server_config
from turnledger.policies.pricing import ModelPrice


@contextmanager
def running(
    store: EventStore,
    *,
    token: str = "",
    max_body: int = 16 * 1024 * 1024,
    pricing: dict[str, ModelPrice] | None = None,
) -> Iterator[tuple[str, CollectApp]]:
    """Serve a receiver over ``store``; yield its base URL and its app."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    app = CollectApp(Recorder(store, pricing=pricing), token=token, max_body=max_body)
    server = uvicorn.Server(server_config(app))  # type: ignore[arg-type]
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]})
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", app
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
