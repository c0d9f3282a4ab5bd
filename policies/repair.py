"""Crash repair: what to record when a turn was interrupted mid-way.

A process that stops mid-turn leaves the turn open in the ledger, possibly with
tool calls whose results were never recorded. Before the next turn of that
session, the engine closes it: every unanswered call gets a synthesized failed
result (so the provider never sees a ``tool_use`` without its ``tool_result``),
then the turn is recorded as failed with kind ``interrupted``. The decision is
pure: this module returns the events; the shell appends them.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Final

from turnledger.ledger.events import ToolResultRecorded, TurnFailed
from turnledger.policies.messages import ToolCall

INTERRUPTED_CALL_ERROR: Final = "interrupted: the tool call did not complete"
"""The error a synthesized result carries."""

INTERRUPTED_TURN_ERROR: Final = "the process stopped mid-turn"
"""The error the closing ``turn.failed`` carries."""


def repair_interrupted_turn(
    turn_id: str, calls: Sequence[ToolCall], answered: Collection[str]
) -> tuple[ToolResultRecorded | TurnFailed, ...]:
    """Return the events that close an interrupted turn.

    Args:
        turn_id: The open turn.
        calls: The tool calls the turn's assistant messages made, in order.
        answered: Call ids that already have a recorded result.

    Returns:
        One synthesized failed ``tool_result.recorded`` per unanswered call (each
        call id once, in call order), then ``turn.failed`` (kind
        ``interrupted``).
    """
    seen = set(answered)
    synthesized: list[ToolResultRecorded | TurnFailed] = []
    for call in calls:
        if call.id in seen:
            continue
        seen.add(call.id)
        synthesized.append(
            ToolResultRecorded(
                turn_id=turn_id,
                call_id=call.id,
                tool=call.name,
                success=False,
                error=INTERRUPTED_CALL_ERROR,
                provenance="synthesized",
            )
        )
    synthesized.append(
        TurnFailed(turn_id=turn_id, kind="interrupted", error=INTERRUPTED_TURN_ERROR)
    )
    return tuple(synthesized)
