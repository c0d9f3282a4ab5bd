"""``turnledger serve``: the local web UI over the ledger."""

# Commands import what they run inside their handlers: building the parser and
# the light commands stay light (issue #24).
# ruff: noqa: PLC0415

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Final

from turnledger.pipeline.cli.common import (
    Command,
    UsageError,
    config,
    open_ledger,
    print_json,
    target,
)
from turnledger.pipeline.web import TOKEN_ENV, is_loopback, token_problem

if TYPE_CHECKING:
    import socket

DEFAULT_PORT: Final = 8765


def _bind(host: str, port: int) -> socket.socket:
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


def cmd_serve(args: argparse.Namespace) -> int:
    """Serve a local web UI over the ledger until interrupted (Ctrl-C).

    Pages: sessions (filter, pages), a session's timeline (every step, trims,
    bounded results, recall with links to the entries, pairing violations, crash
    repairs) with a position scrubber and a live view of new events, memory
    (provenance, forgotten entries, the exact [Memory context] block of a query)
    and costs (per day, model and agent; budgets drawn). Every asset is served by
    the app (works offline). Binds 127.0.0.1 by default; any other address needs
    --token (or $TURNLEDGER_SERVE_TOKEN), checked on every request. Export and
    memory forget are offered only with --allow-writes. --port 0 picks a free
    port; --json prints the address as one JSON object (url, host, port,
    allow_writes, token_required) once listening.

    Example: turnledger serve --port 8765 --open
    """
    import gc
    import threading
    import webbrowser

    token = args.token if args.token is not None else os.environ.get(TOKEN_ENV, "")
    if token and (problem := token_problem(token)) is not None:
        raise UsageError(problem)
    if not is_loopback(args.host) and not token:
        from turnledger.ledger.errors import quote_value

        msg = (
            f"Expected --token (or ${TOKEN_ENV}) to bind the non-loopback address "
            f"{quote_value(args.host)}, found none"
        )
        raise UsageError(msg)
    if not 0 <= args.port <= 65535:
        msg = f"Expected a port from 0 to 65535, found {args.port}"
        raise UsageError(msg)
    cfg = config(args)
    ledger_url = target(args)
    import uvicorn  # the server loads only for this command

    from turnledger.pipeline.web.app import create_app
    from turnledger.pipeline.web.server import server_config
    from turnledger.pipeline.web.state import WebSettings

    with open_ledger(args) as store:
        sock = _bind(args.host, args.port)
        port = sock.getsockname()[1]
        shown = f"[{args.host.strip('[]')}]" if ":" in args.host else args.host
        url = f"http://{shown}:{port}/"
        settings = WebSettings(
            store=store,
            config=cfg,
            ledger_url=ledger_url,
            allow_writes=args.allow_writes,
            token=token,
            host=args.host,
        )
        app = create_app(settings)
        # The session list just read lives as long as the process (the ledger
        # only grows): keep the collector from walking it on every full pass.
        gc.freeze()
        if args.json:
            print_json(
                {
                    "url": url,
                    "host": args.host,
                    "port": port,
                    "allow_writes": args.allow_writes,
                    "token_required": bool(token),
                }
            )
        else:
            guard = " (token required)" if token else ""
            print(f"serving {ledger_url} at {url}{guard}; stop with Ctrl-C", flush=True)
        if args.open:
            threading.Timer(0.5, webbrowser.open, args=(url,)).start()
        # Slow clients are dropped and connections capped (web.server).
        server = uvicorn.Server(server_config(app))
        try:
            server.run(sockets=[sock])
        finally:
            sock.close()
    return 0


COMMANDS: Final[dict[str, Command]] = {"serve": cmd_serve}


def add_arguments(name: str, p: argparse.ArgumentParser) -> None:
    """Add the serve command's options."""
    del name
    p.add_argument("--host", default="127.0.0.1", help="the address to bind")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help="0 picks a free one")
    p.add_argument("--open", action="store_true", help="open a browser at the address")
    p.add_argument(
        "--allow-writes",
        action="store_true",
        help="offer export downloads and memory forget",
    )
    p.add_argument(
        "--token",
        default=None,
        help=f"the access token every request must carry (default ${TOKEN_ENV})",
    )
    p.add_argument(
        "--json", action="store_true", help="print the address as one JSON object"
    )
