"""What a turn's tools may use: the agent's workspace, its memory, the ledger.

:class:`ToolContexts` gives each batch of tool calls its
:class:`~turnledger.pipeline.tools.base.ToolContext`. An agent's workspace
(:func:`agent_workspace`) is made on its first tool call and kept; it is made
again if it was removed in between.
"""

from __future__ import annotations

from pathlib import Path

from turnledger.ledger.store import EventStore
from turnledger.pipeline.config import Config
from turnledger.pipeline.memory import MemoryService
from turnledger.pipeline.tools.base import ToolContext


class ToolContexts:
    """Builds the tool context of a turn, keeping each agent's workspace.

    Args:
        config: Where workspaces are (each agent's ``workspace``, else under
            ``data_dir``).
        memory: The memory service the tools use.
        store: The ledger the tools record knowledge captures in.
    """

    def __init__(
        self, *, config: Config, memory: MemoryService, store: EventStore
    ) -> None:
        self._config = config
        self._memory = memory
        self._store = store
        self._workspaces: dict[str, Path] = {}

    def for_turn(self, agent: str, session_key: str, turn_id: str) -> ToolContext:
        """Return the context a turn's tool calls run with."""
        workspace = self._workspaces.get(agent)
        if workspace is None or not workspace.is_dir():  # made once, again if gone
            workspace = self._workspaces[agent] = agent_workspace(
                self._config.agent(agent).workspace, self._config.data_dir, agent
            )
        return ToolContext(
            agent=agent,
            session_key=session_key,
            turn_id=turn_id,
            workspace=workspace,
            memory=self._memory,
            store=self._store,
        )


def agent_workspace(configured: str | None, data_dir: str, agent: str) -> Path:
    """Return (creating it) an agent's workspace: configured, else under data_dir."""
    root = (
        Path(configured)
        if configured
        else Path(data_dir) / "agents" / agent / "workspace"
    )
    root.mkdir(parents=True, exist_ok=True)
    return root
