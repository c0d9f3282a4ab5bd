"""The MCP server: the official SDK's low-level server over our services.

:func:`build_server` answers ``tools/list``, ``tools/call``, ``resources/list``,
``resources/templates/list`` and ``resources/read``. A call is checked first
(:func:`~turnledger.pipeline.mcp.tools.check_arguments`); a refused one gets
one JSON-RPC ``INVALID_PARAMS`` error and writes nothing. An accepted call
runs in a worker thread (one at a time: the store and the memory backends
block) and is recorded with its outcome
(:class:`~turnledger.pipeline.mcp.recording.McpRecorder`: a write before it
runs and after, a read once, after), which is returned: a failure as a tool
result with ``isError`` set. A resource read is recorded as a read, a call of
``read_resource``; reading a session outside the agent's scope is a
``RESOURCE_NOT_FOUND`` error (after its failed result is recorded).

:func:`serve_stdio` and :func:`http_app` are the two transports; the HTTP app
checks ``Authorization: Bearer <token>`` on every request when a token is set
(401 otherwise).
"""

from __future__ import annotations

import hmac
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any, Final

import anyio.to_thread
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from turnledger.ledger.errors import LedgerError
from turnledger.pipeline.errors import PipelineError
from turnledger.pipeline.logs import library_logger
from turnledger.pipeline.mcp.resources import (
    SESSION_PREFIX,
    VIEWS,
    list_resources,
    parse_uri,
    read_resource,
)
from turnledger.pipeline.mcp.tools import TOOLS, RefusedCallError, check_arguments
from turnledger.policies.errors import PolicyError
from turnledger.policies.scrubbing import scrub_text, summarize

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

    from turnledger.pipeline.mcp.recording import McpRecorder
    from turnledger.pipeline.mcp.tools import ToolServices

SERVER_NAME: Final = "turnledger"
"""The name the server gives clients."""

RESOURCE_NOT_FOUND: Final = -32002
"""The MCP error code of a resource that does not exist."""

READ_RESOURCE: Final = "read_resource"
"""The tool name a resource read is recorded under."""

_FAILURES: Final = (LedgerError, PipelineError, PolicyError, OSError)
"""What a call may raise that is its failed result (anything else too, as an
internal error)."""

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def client_name(ctx: ServerRequestContext[Any, Any]) -> str:
    """The calling client's name (its ``clientInfo``), else ``unknown``."""
    params = ctx.session.client_params
    if params is not None and params.client_info is not None:
        return params.client_info.name or "unknown"
    info = (ctx.meta or {}).get(types.CLIENT_INFO_META_KEY)
    if isinstance(info, dict) and isinstance(info.get("name"), str):
        return info["name"] or "unknown"
    return "unknown"


class _Calls:
    """Runs accepted calls one at a time, each recorded before and after."""

    def __init__(self, services: ToolServices, recorder: McpRecorder) -> None:
        self.services = services
        self.recorder = recorder
        self._lock = threading.Lock()

    def call(self, client: str, name: str, args: dict[str, Any]) -> tuple[bool, str]:
        """Run a call, recorded; return ``(success, text)`` as recorded.

        A write is recorded before it runs, its result after; a read with its
        result, in one append, once it ran.
        """
        with self._lock:
            if not TOOLS[name].writes:
                key = self.recorder.session_key(client)
                success, text = self._outcome(
                    lambda: self.services.run(name, args, key)
                )
                recorded = self.recorder.record_read(
                    client, name, args, success=success, text=text
                )
                return recorded.success, recorded.text
            ref = self.recorder.record_call(client, name, args)
            success, text = self._outcome(
                lambda: self.services.run(name, args, ref.session_key)
            )
            recorded = self.recorder.record_result(ref, success=success, text=text)
        return recorded.success, recorded.text

    def read(
        self, client: str, uri: str, target: tuple[str, str] | None
    ) -> tuple[bool, str]:
        """Read a resource and record the read with its outcome; ``(success, text)``."""
        with self._lock:
            success, text = self._outcome(lambda: read_resource(self.services, target))
            recorded = self.recorder.record_read(
                client, READ_RESOURCE, {"uri": uri}, success=success, text=text
            )
        # The client gets the resource whole (scrubbed); the ledger keeps it bounded.
        return success, text if success else recorded.text

    @staticmethod
    def _outcome(run: Callable[[], str]) -> tuple[bool, str]:
        try:
            return True, run()
        except _FAILURES as e:
            return False, summarize(scrub_text(str(e)), limit=1_000)
        except Exception as e:  # noqa: BLE001 - any crash is a failed result, recorded
            library_logger("turnledger.mcp").warning(
                "mcp.call_crashed", error=type(e).__name__
            )
            return False, f"Internal error ({type(e).__name__}); the call was recorded"


def build_server(
    services: ToolServices, recorder: McpRecorder, *, allow_writes: bool
) -> Server[Any]:
    """Return the MCP server over ``services``, recording with ``recorder``.

    Args:
        services: What the tools run on (the agent's scope).
        recorder: Where calls are recorded.
        allow_writes: Offer and accept the memory writes (store, forget).
    """
    calls = _Calls(services, recorder)
    listed = [
        types.Tool(
            name=tool.name,
            description=tool.description,
            input_schema=tool.input_schema(),
            annotations=types.ToolAnnotations(
                read_only_hint=not tool.writes,
                destructive_hint=tool.name == "memory_forget",
                open_world_hint=False,
            ),
        )
        for tool in TOOLS.values()
        if allow_writes or not tool.writes
    ]

    async def on_list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        del ctx, params
        return types.ListToolsResult(tools=listed)

    async def on_call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        try:
            args = check_arguments(
                params.name, params.arguments, allow_writes=allow_writes
            )
        except RefusedCallError as e:
            raise MCPError(types.INVALID_PARAMS, str(e)) from None
        success, text = await anyio.to_thread.run_sync(
            calls.call, client_name(ctx), params.name, args
        )
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], is_error=not success
        )

    async def on_list_resources(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        del ctx
        cursor = None if params is None else params.cursor
        try:
            found, following = await anyio.to_thread.run_sync(
                list_resources, services, cursor
            )
        except RefusedCallError as e:
            raise MCPError(types.INVALID_PARAMS, str(e)) from None
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    uri=r.uri, name=r.name, description=r.description, mime_type=r.mime
                )
                for r in found
            ],
            next_cursor=following,
        )

    async def on_list_templates(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        del ctx, params
        return types.ListResourceTemplatesResult(
            resource_templates=[
                types.ResourceTemplate(
                    name=f"session {view}",
                    uri_template=f"{SESSION_PREFIX}{{session}}/{view}",
                    description=f"A session's {view} (session key or stream id).",
                    mime_type="application/json",
                )
                for view in VIEWS
            ]
        )

    async def on_read_resource(
        ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        try:
            target = parse_uri(uri)
        except RefusedCallError as e:
            raise MCPError(types.INVALID_PARAMS, str(e)) from None
        success, text = await anyio.to_thread.run_sync(
            calls.read, client_name(ctx), uri, target
        )
        if not success:
            raise MCPError(RESOURCE_NOT_FOUND, text)
        mime = "text/markdown" if target is None else "application/json"
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type=mime, text=text)]
        )

    return Server(
        SERVER_NAME,
        instructions=(
            f"Long-term memory of agent {services.agent!r} and read access to its "
            "ledger; every call is recorded in the ledger."
        ),
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
        on_list_resources=on_list_resources,
        on_list_resource_templates=on_list_templates,
        on_read_resource=on_read_resource,
    )


async def serve_stdio(server: Server[Any]) -> None:
    """Serve one client over standard input and output until it disconnects."""
    from mcp.server.stdio import stdio_server  # noqa: PLC0415

    async with stdio_server() as (read_stream, write_stream):
        await server.run(
            read_stream, write_stream, server.create_initialization_options()
        )


class BearerGuard:
    """ASGI middleware: every HTTP request must carry ``Authorization: Bearer <token>``.

    Args:
        app: The app it guards.
        token: The token (empty: no check).
    """

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._wanted = f"Bearer {token}".encode() if token else b""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer 401 to a request without the token, else pass it on."""
        if scope["type"] == "http" and self._wanted:
            found = dict(scope.get("headers") or ()).get(b"authorization", b"")
            if not hmac.compare_digest(found, self._wanted):
                body = (
                    b'{"error":"Expected the access token (--token) as '
                    b'Authorization: Bearer, found none that matches"}'
                )
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"www-authenticate", b"Bearer"),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def http_app(server: Server[Any], *, host: str, token: str) -> ASGIApp:
    """The streamable HTTP app at ``/mcp``, guarded by the token when one is set.

    On a loopback ``host`` the SDK also checks the ``Host`` and ``Origin``
    headers (DNS rebinding).
    """
    app = server.streamable_http_app(streamable_http_path="/mcp", host=host)
    return BearerGuard(app, token)
