"""``turnledger serve``: the local web UI over the ledger."""

# Commands import what they run inside their handlers: building the parser and
# the light commands stay light (issue #24).
# ruff: noqa: PLC0415

from __future__ import annotations

import argparse
from typing import Final

from turnledger.pipeline.cli.common import (
    Command,
    config,
    open_ledger,
    print_json,
    target,
)
from turnledger.pipeline.cli.listening import base_url, bind, checked_token
from turnledger.pipeline.web import TOKEN_ENV

DEFAULT_PORT: Final = 8765


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

    token = checked_token(args, TOKEN_ENV)
    cfg = config(args)
    ledger_url = target(args)
    import uvicorn  # the server loads only for this command

    from turnledger.pipeline.web.app import create_app
    from turnledger.pipeline.web.server import server_config
    from turnledger.pipeline.web.state import WebSettings

    with open_ledger(args) as store:
        sock = bind(args.host, args.port)
        port = sock.getsockname()[1]
        url = f"{base_url(args.host, sock)}/"
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
