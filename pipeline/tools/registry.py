"""The default tool set, its specs, and dispatch by name for the engine.

``default_tools()`` gives the memory, knowledge and workspace file tools keyed by
name; ``tool_specs()`` what the model is shown; ``run_tool()`` dispatches one
call, so an unknown name becomes ``Unknown tool: {name}`` and a tool that raises
despite the contract becomes ``Error executing {name}: {error}`` (reference §6.2)
instead of ending the turn.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from turnledger.pipeline.providers.base import ToolSpec
from turnledger.pipeline.tools.base import Tool, ToolContext, ToolOutcome
from turnledger.pipeline.tools.file_tools import file_tools
from turnledger.pipeline.tools.knowledge_tools import knowledge_tools
from turnledger.pipeline.tools.memory_export_tool import MemoryExportTool
from turnledger.pipeline.tools.memory_tools import memory_tools


def default_tools() -> dict[str, Tool]:
    """Return the built-in tools keyed by name, in a fixed order.

    Memory (``memory_store``, ``memory_recall``, ``memory_forget``,
    ``memory_purge``, ``memory_export``), knowledge (``knowledge_capture``,
    ``knowledge_query``) and workspace files (``file_read``, ``file_write``,
    ``glob_search``, ``content_search``).
    """
    tools: list[Tool] = [
        *memory_tools(),
        MemoryExportTool(),
        *knowledge_tools(),
        *file_tools(),
    ]
    return {tool.spec.name: tool for tool in tools}


def tool_specs(tools: Mapping[str, Tool]) -> tuple[ToolSpec, ...]:
    """Return the tools' specs in the mapping's order (what the model sees)."""
    return tuple(tool.spec for tool in tools.values())


def unknown_tool(name: str) -> ToolOutcome:
    """Return the failed outcome of a call to a tool that does not exist."""
    return ToolOutcome(success=False, error=f"Unknown tool: {name}")


async def run_tool(
    tools: Mapping[str, Tool],
    name: str,
    arguments: dict[str, Any],
    context: ToolContext,
) -> ToolOutcome:
    """Run the tool called ``name``; never raises.

    Args:
        tools: The tools available to the turn, by name.
        name: The name the model called.
        arguments: The parsed JSON arguments.
        context: Who calls, with the workspace, memory and ledger.

    Returns:
        The tool's outcome; ``Unknown tool: {name}`` for a missing tool;
        ``Error executing {name}: {error}`` when the tool raised.
    """
    tool = tools.get(name)
    if tool is None:
        return unknown_tool(name)
    try:
        return await tool.run(arguments, context)
    except Exception as e:  # noqa: BLE001 - a tool's bug must not end the turn (§6.2)
        return ToolOutcome(success=False, error=f"Error executing {name}: {e}")
