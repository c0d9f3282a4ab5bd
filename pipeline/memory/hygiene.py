"""Memory hygiene on a schedule: retention applied as recorded events.

``[memory] hygiene_hours = H`` (0, the default, is off): after a completed
turn, when an agent's memory was last governed H hours ago or more (or never,
since this process started), the engine runs the agent's strategy's
``govern`` at that moment: expired conversation rows and old daily rows become
``memory.forgotten`` / ``memory.stored`` events with source ``governance``,
exactly as ``turnledger memory govern`` records them. The schedule is kept per
process; a failure is logged, never raised into the turn.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from turnledger.pipeline.memory import MemoryService
from turnledger.pipeline.memory.strategy import strategy_for
from turnledger.pipeline.memory.strategy.types import GovernReport


class HygieneSchedule:
    """When each agent's memory is next governed.

    Args:
        memory: The memory service.
        hours: The interval; 0 (or less) turns hygiene off.
        clock: The current time (UTC-aware); a test passes another.
    """

    def __init__(
        self,
        memory: MemoryService,
        hours: float,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.memory = memory
        self.interval = timedelta(hours=hours) if hours > 0 else None
        self.clock = clock
        self._last: dict[str, datetime] = {}

    def due(self, agent: str) -> bool:
        """Whether the agent's memory is due for governance now."""
        if self.interval is None:
            return False
        last = self._last.get(agent)
        return last is None or self.clock() - last >= self.interval

    def run_if_due(self, agent: str) -> GovernReport | None:
        """Govern the agent's memory when due; return the report (``None``: not due)."""
        if not self.due(agent):
            return None
        now = self.clock()
        self._last[agent] = now
        return strategy_for(agent, self.memory, None).govern(agent, now)
