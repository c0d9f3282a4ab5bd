"""``turnledger collect``: an OTLP/HTTP receiver of OpenTelemetry GenAI spans."""

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
    count,
    open_ledger,
    print_json,
    target,
)
from turnledger.pipeline.web import is_loopback, token_problem

if TYPE_CHECKING:
    import socket

TOKEN_ENV: Final = "TURNLEDGER_COLLECT_TOKEN"  # noqa: S105 - a variable name, not a secret
"""The variable holding the receiver's token when ``--token`` is not given."""

DEFAULT_PORT: Final = 4318
"""OTLP/HTTP's port."""


def cmd_collect(args: argparse.Namespace) -> int:
    """Receive OpenTelemetry GenAI spans over OTLP/HTTP into the ledger until stopped.

    POST /v1/traces, protobuf or JSON (gzip or not). Model call spans
    (gen_ai.operation.name chat, text_completion, generate_content) record the
    system prompt, user and assistant messages, tool calls, model.called with
    usage and cost ([pricing]); execute_tool spans record their results. A
    session is gen_ai.conversation.id, else the trace id; its agent the
    resource's service.name. Spans without content record usage only (audit
    counts them); spans of no known shape are counted, not recorded. A 200
    answer means the whole batch is committed; a malformed batch is 400 and
    writes nothing. Binds 127.0.0.1 by default; any other address needs
    --token (or $TURNLEDGER_COLLECT_TOKEN), sent as Authorization: Bearer.
    --port 0 picks a free port; --json prints the address as one JSON object
    (url, endpoint, host, port, token_required) once listening, and the totals
    (batches, spans, refused) as another when stopped.

    Example: OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 with turnledger collect
    """
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
    if args.max_body < 1:
        msg = f"Expected --max-body of at least 1 byte, found {args.max_body}"
        raise UsageError(msg)
    pricing = config(args).pricing
    ledger_url = target(args)
    import signal

    import uvicorn

    from turnledger.pipeline.collect import Recorder
    from turnledger.pipeline.collect.server import PATH, CollectApp
    from turnledger.pipeline.web.server import server_config

    with open_ledger(args) as store:
        sock = bind(args.host, args.port)
        port = sock.getsockname()[1]
        shown = f"[{args.host.strip('[]')}]" if ":" in args.host else args.host
        url = f"http://{shown}:{port}"
        app = CollectApp(
            Recorder(store, pricing=pricing), token=token, max_body=args.max_body
        )
        if args.json:
            print_json(
                {
                    "url": url,
                    "endpoint": f"{url}{PATH}",
                    "host": args.host,
                    "port": port,
                    "token_required": bool(token),
                }
            )
        else:
            guard = " (token required)" if token else ""
            print(
                f"collecting into {ledger_url} at {url}{PATH}{guard}; stop with Ctrl-C",
                flush=True,
            )
        server = uvicorn.Server(server_config(app))
        # uvicorn stops gracefully on SIGINT or SIGTERM, then raises the signal
        # again under the handler it found: a SIGTERM that lands in this no-op
        # and a Ctrl-C caught here let the totals be printed.
        signal.signal(signal.SIGTERM, lambda _signum, _frame: None)
        try:
            server.run(sockets=[sock])
        except KeyboardInterrupt:
            pass
        finally:
            sock.close()
    totals = {"batches": app.batches, "spans": app.spans, "refused": app.refused}
    if args.json:
        print_json(totals)
    else:
        print(
            f"collected {app.spans} span(s) in {app.batches} batch(es); "
            f"{app.refused} request(s) refused"
        )
    return 0


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket.

    ``IPPROTO_TCP`` is spelled out so asyncio sets ``TCP_NODELAY`` on its
    connections, as on ``serve``'s.
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


DEFAULT_IMPORT_AGENT: Final = "imported"
"""``import --agent``'s default: an OTLP file's sessions keep their service names."""


COMMANDS: Final[dict[str, Command]] = {"collect": cmd_collect}


def add_arguments(name: str, p: argparse.ArgumentParser) -> None:
    """Add the collect command's options."""
    del name
    p.add_argument("--host", default="127.0.0.1", help="the address to bind")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help="0 picks a free one")
    p.add_argument(
        "--token",
        default=None,
        help=f"the bearer token every request must carry (default ${TOKEN_ENV})",
    )
    p.add_argument(
        "--max-body",
        type=count,
        default=16 * 1024 * 1024,
        help="the largest request body accepted, in bytes (after gunzip)",
    )
    p.add_argument(
        "--json", action="store_true", help="print the address and totals as JSON"
    )
