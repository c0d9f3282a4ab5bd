"""The MCP server: memory and the ledger as tools and resources (``turnledger mcp``).

An MCP client (a desktop or IDE assistant) reaches one agent's long-term memory
and read access to its ledger through the official ``mcp`` SDK, over stdio or
streamable HTTP. Tools (:mod:`.tools`): ``memory_store``, ``memory_forget``
(only with writes allowed), ``memory_recall`` (the rows, or exactly the
``[Memory context]`` block a turn would get), ``memory_list``,
``ledger_sessions``, ``ledger_history`` (as of a point), ``ledger_audit``,
``ledger_costs``. Resources (:mod:`.resources`): each session's
provider-visible history and transcript, the lifecycle table. Every call is
recorded in the ledger as a tool call and its result (:mod:`.recording`);
:mod:`.server` builds the SDK server from these parts. This module is the
public face.
"""

from __future__ import annotations

from turnledger.pipeline.mcp.recording import CHANNEL, McpRecorder
from turnledger.pipeline.mcp.server import (
    build_server,
    http_app,
    serve_stdio,
)
from turnledger.pipeline.mcp.tools import (
    MAX_CONTENT_CHARS,
    MAX_QUERY_CHARS,
    TOOLS,
    RefusedCallError,
    ToolFailedError,
    ToolServices,
)

__all__ = [
    "CHANNEL",
    "MAX_CONTENT_CHARS",
    "MAX_QUERY_CHARS",
    "TOOLS",
    "McpRecorder",
    "RefusedCallError",
    "ToolFailedError",
    "ToolServices",
    "build_server",
    "http_app",
    "serve_stdio",
]
