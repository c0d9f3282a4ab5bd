"""Shared type aliases for the policy package.

These are plain :data:`typing.Literal` aliases: the decision Structs of several
policies name them, and the projections and the pipeline stamp them on events.
"""

from __future__ import annotations

from typing import Final, Literal, TypeAlias

from turnledger.ledger.events import TurnOrigin as LedgerTurnOrigin

TurnOrigin: TypeAlias = LedgerTurnOrigin
"""Who started a turn.

``interactive`` (CLI/REPL), ``channel`` (a chat channel message) and
``agent_direct`` (RPC/gateway) are user-facing. ``cron`` and ``daemon`` are
autonomous. ``sub_turn`` covers delegates, safety nets and skill reviews, and is
also what an unstamped turn must be treated as.
"""

USER_FACING_ORIGINS: Final[frozenset[TurnOrigin]] = frozenset(
    {"interactive", "channel", "agent_direct"}
)
"""The origins a person is directly behind: the only ones autosave accepts."""

AUTONOMOUS_ORIGINS: Final[frozenset[TurnOrigin]] = frozenset({"cron", "daemon"})
"""The origins no person is directly behind: they never see conversation memory."""

Durability: TypeAlias = Literal[
    "turn", "session", "memory", "filesystem", "log", "cost"
]
"""How long a payload surface keeps its data.

``turn`` (one provider request), ``session`` (the session history), ``memory``
(long-term memory rows), ``filesystem`` (files in a workspace), ``log`` (logs and
observer events), ``cost`` (the cost ledger).
"""

LifecycleScope: TypeAlias = Literal[
    "agent", "session", "channel", "workspace", "install"
]
"""What bounds access to a payload surface."""

CONVERSATION_CATEGORY: Final = "conversation"
"""The category of conversation rows (autosaved messages), exact lowercase."""
