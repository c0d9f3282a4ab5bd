"""`turnledger serve` against slow and numerous clients, over real sockets.

A real server (`turnledger serve --port 0` on 127.0.0.1) is given connections
that send part of a request line and nothing more (slowloris), some of them a
byte now and then: each is closed within the header timeout (10 s, plus a
margin), while a normal request is still answered. Connections beyond the cap
are closed as soon as they are accepted. Loopback only; counts and waits bounded.
"""

from __future__ import annotations

import http.client
import json
import os
import select
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from turnledger.pipeline.web.server import HEADER_TIMEOUT, MAX_CONNECTIONS

MARGIN = 6.0
"""Seconds past the header timeout a slow connection may still be open."""

SLOW = 40
"""Slow connections opened at once."""


@pytest.fixture(scope="module")
def port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """A `turnledger serve` on an empty ledger; its port on 127.0.0.1."""
    root: Path = tmp_path_factory.mktemp("slow")
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from turnledger.pipeline.cli import main; sys.exit(main())",
            "--db",
            str(root / "ledger.db"),
            "serve",
            "--port",
            "0",
            "--json",
        ],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "HOME": str(root)},
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line:
        process.kill()
        _, err = process.communicate()
        pytest.fail(f"turnledger serve did not start: {err[-2000:]}")
    try:
        yield int(json.loads(line)["port"])
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def _connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.setblocking(False)
    return sock


def _closed(sock: socket.socket) -> bool:
    """Whether the server has closed ``sock`` (read end or reset)."""
    try:
        data = sock.recv(4096)
    except BlockingIOError:
        return False
    except (ConnectionResetError, ConnectionAbortedError):
        return True
    return data == b""


def _wait_closed(socks: list[socket.socket], seconds: float) -> list[socket.socket]:
    """Wait up to ``seconds`` for the server to close each socket; the open ones."""
    open_ = list(socks)
    deadline = time.monotonic() + seconds
    while open_ and (left := deadline - time.monotonic()) > 0:
        readable, _, _ = select.select(open_, [], [], min(left, 0.5))
        open_ = [s for s in open_ if s not in readable or not _closed(s)]
    return open_


def _get(port: int, path: str = "/") -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path, headers={"Host": f"127.0.0.1:{port}"})
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def test_slow_connections_are_closed_while_others_are_served(port: int) -> None:
    """Partial request lines are dropped within the timeout; a normal GET works."""
    slow = [_connect(port) for _ in range(SLOW)]
    for sock in slow:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1")
    trickling = slow[:5]
    started = time.monotonic()
    # A normal request is served while every slow connection hangs.
    assert _get(port) == 200
    # Bytes now and then do not move the deadline.
    while time.monotonic() - started < HEADER_TIMEOUT / 2:
        for sock in trickling:
            sock.sendall(b"x")
        time.sleep(1)
    still_open = _wait_closed(
        slow, HEADER_TIMEOUT + MARGIN - (time.monotonic() - started)
    )
    try:
        assert still_open == []
        assert _get(port) == 200
    finally:
        for sock in slow:
            sock.close()


def test_an_idle_keep_alive_connection_with_a_partial_request_is_closed(
    port: int,
) -> None:
    """After a response, the next request's headers have their own deadline."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        request = f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n"
        sock.sendall(request.encode())
        received = b""
        while b"\r\n\r\n" not in received:
            chunk = sock.recv(65536)
            assert chunk, "closed before answering"
            received += chunk
        assert received.startswith(b"HTTP/1.1 200")
        sock.sendall(b"GET / HT")
        sock.setblocking(False)
        assert _wait_closed([sock], HEADER_TIMEOUT + MARGIN) == []
    finally:
        sock.close()


def test_connections_beyond_the_cap_are_closed_at_once(port: int) -> None:
    """With the cap's worth of connections open, one more is closed on arrival."""
    held = [_connect(port) for _ in range(MAX_CONNECTIONS)]
    try:
        time.sleep(0.5)  # let the server accept them all
        extra = [_connect(port) for _ in range(3)]
        try:
            assert _wait_closed(extra, MARGIN) == []
        finally:
            for sock in extra:
                sock.close()
    finally:
        for sock in held:
            sock.close()
    # Once they are gone, requests are served again.
    deadline = time.monotonic() + MARGIN
    status = 0
    while time.monotonic() < deadline and (status := _get(port)) != 200:
        time.sleep(0.2)
    assert status == 200
