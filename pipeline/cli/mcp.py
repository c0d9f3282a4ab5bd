"""``turnledger mcp``: an MCP server over the agent's memory and the ledger."""

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
    open_ledger,
    print_json,
    target,
)
from turnledger.pipeline.cli.listening import checked_token

TOKEN_ENV: Final = "TURNLEDGER_MCP_TOKEN"  # noqa: S105 - a variable name, not a secret
"""The environment variable holding the HTTP access token (``--token`` wins)."""

DEFAULT_AGENT: Final = "default"
"""The agent served when ``--agent`` is not given (the engine's default too)."""


def _token(args: argparse.Namespace) -> str:
    """The access token, checked; a non-loopback HTTP bind without one is refused."""
    return checked_token(args, TOKEN_ENV, listening=args.transport == "http")


def cmd_mcp(args: argparse.Namespace) -> int:
    """Serve the agent's memory and the ledger to MCP clients (stdio or HTTP).

    Tools: memory_recall (the rows, or with format "block" exactly the
    [Memory context] block a turn would get), memory_list, ledger_sessions,
    ledger_history (with "at": a position, a turn id or an ISO time),
    ledger_audit, ledger_costs; memory_store and memory_forget only with
    --allow-writes. Resources: each session's history and transcript
    (turnledger://sessions/<session>/history|transcript) and
    turnledger://lifecycle. Everything is scoped to --agent and its
    read_memory_from peers. Every call is recorded in the ledger: a session of
    the agent on channel "mcp" per client and server run (key
    mcp-<client>-<run>), each call a tool call and its scrubbed, bounded
    result; a refused call (unknown tool, bad or oversized arguments) gets one
    protocol error and writes nothing. --transport stdio (default) talks on
    standard input and output; --transport http serves streamable HTTP at
    http://HOST:PORT/mcp, 127.0.0.1 by default; a non-loopback address needs
    --token (or $TURNLEDGER_MCP_TOKEN), sent as "Authorization: Bearer TOKEN"
    (401 without it). With http, --json prints the address as one JSON object (url,
    host, port, agent, allow_writes, token_required) once listening.

    Example: turnledger mcp --agent ops --allow-writes
    """
    token = _token(args)
    cfg = config(args)
    ledger_url = target(args)
    try:
        import anyio

        from turnledger.pipeline.mcp import (
            McpRecorder,
            ToolServices,
            build_server,
            http_app,
            serve_stdio,
        )
    except ModuleNotFoundError as e:
        missing = (e.name or "").partition(".")[0]
        if missing == "turnledger":  # a module of ours is missing: a bug
            raise
        msg = (
            "Expected the mcp extra (pip install 'turnledger[mcp]'), "
            f"found no module {missing!r}"
        )
        raise UsageError(msg) from None
    from turnledger.pipeline.memory import MemoryService

    with open_ledger(args) as store:
        memory = MemoryService(store, cfg, ledger_url=ledger_url)
        try:
            services = ToolServices(
                store=store, memory=memory, config=cfg, agent=args.agent
            )
            recorder = McpRecorder(
                store,
                agent=args.agent,
                max_result_chars=cfg.runtime.max_tool_result_chars,
                shredding=memory.shredding,
            )
            server = build_server(services, recorder, allow_writes=args.allow_writes)
            if args.transport == "stdio":
                anyio.run(serve_stdio, server)
                return 0
            _serve_http(args, http_app(server, host=args.host, token=token), token)
        finally:
            memory.close()
    return 0


def _serve_http(args: argparse.Namespace, app: object, token: str) -> None:
    import uvicorn

    from turnledger.pipeline.cli.listening import base_url, bind
    from turnledger.pipeline.web.server import server_config

    sock = bind(args.host, args.port)
    port = sock.getsockname()[1]
    url = f"{base_url(args.host, sock)}/mcp"
    if args.json:
        print_json(
            {
                "url": url,
                "host": args.host,
                "port": port,
                "agent": args.agent,
                "allow_writes": args.allow_writes,
                "token_required": bool(token),
            }
        )
    else:
        guard = " (token required)" if token else ""
        print(
            f"MCP server for agent {args.agent} at {url}{guard}; stop with Ctrl-C",
            flush=True,
        )
    settings = server_config(app)  # type: ignore[arg-type]
    settings.lifespan = "on"  # the SDK's session manager runs in the app's lifespan
    try:
        uvicorn.Server(settings).run(sockets=[sock])
    finally:
        sock.close()


COMMANDS: Final[dict[str, Command]] = {"mcp": cmd_mcp}


def add_arguments(name: str, p: argparse.ArgumentParser) -> None:
    """Add the mcp command's options."""
    del name
    p.add_argument(
        "--transport",
        choices=("stdio", "http"),
        default="stdio",
        help="how clients connect",
    )
    p.add_argument("--host", default="127.0.0.1", help="the address to bind (http)")
    p.add_argument(
        "--port", type=int, default=8766, help="the port (http; 0 picks a free one)"
    )
    p.add_argument(
        "--agent", default=DEFAULT_AGENT, help="the agent whose memory is served"
    )
    p.add_argument(
        "--allow-writes",
        action="store_true",
        help="offer memory_store and memory_forget",
    )
    p.add_argument(
        "--token",
        default=None,
        help=f"the bearer token every HTTP request must carry (default ${TOKEN_ENV})",
    )
    p.add_argument(
        "--json", action="store_true", help="print the HTTP address as one JSON object"
    )
