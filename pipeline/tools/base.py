"""The tool contract: JSON arguments in, a small structured outcome out."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from turnledger.pipeline.providers.base import ToolSpec

if TYPE_CHECKING:
    from turnledger.ledger.store import EventStore
    from turnledger.pipeline.memory import MemoryService


class ToolOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """What a tool returns (reference §6.1): success, output text, error."""

    success: bool = True
    output: str = ""
    error: str | None = None


class ToolContext:
    """What a tool may use: who is calling, the agent's workspace and memory.

    Attributes:
        agent: The agent running the turn.
        session_key: The session (sanitized key).
        turn_id: The turn.
        workspace: The agent's workspace root (file tools are confined to it).
        memory: The agent's scoped memory (writes become ledger events).
        store: The ledger (knowledge captures are recorded in it).
    """

    def __init__(
        self,
        *,
        agent: str,
        session_key: str,
        turn_id: str,
        workspace: Path,
        memory: MemoryService,
        store: EventStore,
    ) -> None:
        self.agent = agent
        self.session_key = session_key
        self.turn_id = turn_id
        self.workspace = workspace
        self.memory = memory
        self.store = store


class Tool(Protocol):
    """A tool the model can call."""

    @property
    def spec(self) -> ToolSpec:
        """Name, description and JSON-schema parameters."""
        ...

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutcome:
        """Run with parsed arguments; failures are outcomes, not exceptions."""
        ...
