"""``turnledger collect``: an OTLP/HTTP receiver of OpenTelemetry GenAI telemetry."""

# Commands import what they run inside their handlers: building the parser and
# the light commands stay light (issue #24).
# ruff: noqa: PLC0415

from __future__ import annotations

import argparse
from typing import Final

from turnledger.pipeline.cli.common import (
    Command,
    UsageError,
    config,
    count,
    open_ledger,
    print_json,
    target,
)
from turnledger.pipeline.cli.listening import base_url, bind, checked_token

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
    counts them); spans of no known shape are counted, not recorded. POST
    /v1/logs takes the GenAI log events instrumentations emit in a call's span
    (gen_ai.client.inference.operation.details, gen_ai.user.message,
    gen_ai.choice...): the call's content, before or after its span; other log
    records are counted, not recorded. A 200 answer means the whole batch is
    committed; a malformed batch is 400 and writes nothing. Binds 127.0.0.1
    by default; any other address needs --token (or $TURNLEDGER_COLLECT_TOKEN),
    sent as Authorization: Bearer. --port 0 picks a free port; --json prints
    the address as one JSON object (url, endpoint, logs_endpoint, host, port,
    token_required) once listening, and the totals (batches, spans,
    log_records, refused) as another when stopped.

    Example: OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 with turnledger collect
    """
    token = checked_token(args, TOKEN_ENV)
    if args.max_body < 1:
        msg = f"Expected --max-body of at least 1 byte, found {args.max_body}"
        raise UsageError(msg)
    pricing = config(args).pricing
    ledger_url = target(args)
    import signal

    import uvicorn

    from turnledger.pipeline.collect import Recorder
    from turnledger.pipeline.collect.server import LOGS_PATH, PATH, CollectApp
    from turnledger.pipeline.web.server import server_config

    with open_ledger(args) as store:
        sock = bind(args.host, args.port)
        port = sock.getsockname()[1]
        url = base_url(args.host, sock)
        recorder = Recorder(store, pricing=pricing)
        recorder.catch_up()  # the links the ledger holds, before the first batch
        app = CollectApp(recorder, token=token, max_body=args.max_body)
        if args.json:
            print_json(
                {
                    "url": url,
                    "endpoint": f"{url}{PATH}",
                    "logs_endpoint": f"{url}{LOGS_PATH}",
                    "host": args.host,
                    "port": port,
                    "token_required": bool(token),
                }
            )
        else:
            guard = " (token required)" if token else ""
            print(
                f"collecting into {ledger_url} at {url}{PATH} and {url}{LOGS_PATH}"
                f"{guard}; stop with Ctrl-C",
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
    totals = {
        "batches": app.batches,
        "spans": app.spans,
        "log_records": app.log_records,
        "refused": app.refused,
    }
    if args.json:
        print_json(totals)
    else:
        print(
            f"collected {app.spans} span(s) and {app.log_records} log record(s) "
            f"in {app.batches} batch(es); {app.refused} request(s) refused"
        )
    return 0


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
