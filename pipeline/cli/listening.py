"""What ``serve``, ``collect`` and ``mcp --transport http`` share to listen.

The token check (its own environment variable per command), the refusal of a
non-loopback address without a token, the port range, the listening socket
and the base URL printed once listening.
"""

# The socket module loads only for the commands that listen (issue #24).
# ruff: noqa: PLC0415

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from turnledger.pipeline.cli.common import UsageError
from turnledger.pipeline.web import is_loopback, token_problem

if TYPE_CHECKING:
    import argparse
    import socket


def checked_token(args: argparse.Namespace, env: str, *, listening: bool = True) -> str:
    """Return the access token (``--token``, else ``$env``), checked with the address.

    Args:
        args: The command's arguments (``token``, ``host``, ``port``).
        env: The variable holding the token when ``--token`` is not given.
        listening: Whether the command binds ``host`` (``mcp`` over stdio does
            not: its address needs no token).

    Raises:
        UsageError: The token cannot travel in a header, a non-loopback address
            has no token, or the port is out of range.
    """
    token: str = args.token if args.token is not None else os.environ.get(env, "")
    if token and (problem := token_problem(token)) is not None:
        raise UsageError(problem)
    if listening and not is_loopback(args.host) and not token:
        from turnledger.ledger.errors import quote_value

        msg = (
            f"Expected --token (or ${env}) to bind the non-loopback address "
            f"{quote_value(args.host)}, found none"
        )
        raise UsageError(msg)
    if not 0 <= args.port <= 65535:
        msg = f"Expected a port from 0 to 65535, found {args.port}"
        raise UsageError(msg)
    return token


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket.

    Made with ``IPPROTO_TCP`` spelled out: asyncio sets ``TCP_NODELAY`` only on
    sockets whose ``proto`` says TCP, and ``socket.create_server`` leaves it 0,
    so every keep-alive answer waited out the peer's delayed ACK (~40 ms).
    """
    import socket

    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    return sock


def base_url(host: str, sock: socket.socket) -> str:
    """``http://host:port`` of a bound socket (an IPv6 host in brackets)."""
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    return f"http://{shown}:{sock.getsockname()[1]}"
