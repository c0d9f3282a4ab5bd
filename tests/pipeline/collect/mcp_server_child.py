"""An agent calling a tool on an MCP server, both traced by the MCP SDK's own spans.

Run as a child process (the MCP SDK traces through the global tracer
provider, which a process sets once): ``python mcp_server_child.py
OTLP_URL``. The MCP Python SDK's server makes a span of each request it
handles (``tools/call get_weather``: ``gen_ai.operation.name``
``execute_tool``, ``mcp.method.name``, no call id, arguments or result). An
agent's turn, traced by hand in the GenAI current form, asks the model
(a chat span holding the tool call), calls the tool on an in-process
``MCPServer`` through the SDK's ``Client``, and asks the model again with the
result (a chat span holding the answer); then it calls the tool with a city
that fails. Every span goes to the receiver by the SDK's OTLP exporter.
"""

from __future__ import annotations

import asyncio
import sys

from mcp import Client
from mcp.server.mcpserver import MCPServer
from opentelemetry import trace

from tests.pipeline.collect.spans import (
    ANSWER,
    CALL,
    RESULT,
    USER,
    chat_attributes,
    exporter_provider,
)

server = MCPServer("weather")


@server.tool()
def get_weather(city: str) -> str:
    """The weather in a city."""
    if city != "Paris":
        msg = f"no station in {city}"
        raise ValueError(msg)
    return "18C, sunny"


async def turn(tracer: trace.Tracer) -> None:
    """The agent's turn: the call, the tool on the MCP server, the answer."""
    async with Client(server) as client:
        with tracer.start_as_current_span("invoke_agent weather"):
            asked = chat_attributes(inputs=[USER], outputs=[CALL])
            with tracer.start_as_current_span("chat gpt-4o", attributes=asked):
                pass
            await client.call_tool("get_weather", {"city": "Paris"})
            answered = chat_attributes(inputs=[USER, CALL, RESULT], outputs=[ANSWER])
            with tracer.start_as_current_span("chat gpt-4o", attributes=answered):
                pass
            await client.call_tool("get_weather", {"city": "Oslo"})


def main(otlp_url: str) -> None:
    """Run the turn with every span exported to ``otlp_url``."""
    with exporter_provider(otlp_url, "weather-agent") as provider:
        trace.set_tracer_provider(provider)
        asyncio.run(turn(provider.get_tracer("agent")))


if __name__ == "__main__":
    main(sys.argv[1])
