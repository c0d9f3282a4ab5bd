"""Why a turn ends without an answer, decided by a step and recorded by the engine.

A step that ends its turn (the budget check, the model step, the iteration
limit) returns a :class:`TurnFailure`; the engine records it, once, as the
turn's ``turn.failed`` event (:meth:`TurnFailure.event`). The reason is bounded
and carries no payload: figures, a classified provider error (scrubbed), or
the field of a response that cannot be recorded.
"""

from __future__ import annotations

import msgspec

from turnledger.ledger.events import TurnFailed, TurnFailureKind


class TurnFailure(msgspec.Struct, frozen=True, kw_only=True):
    """A turn's failure, before it is recorded.

    Attributes:
        kind: Why the turn failed (``budget_exceeded``, ``provider_error``,
            ``unrecordable_response``, ``iteration_limit``).
        error: The one-line reason (bounded, never a payload).
    """

    kind: TurnFailureKind
    error: str

    def event(self, turn_id: str) -> TurnFailed:
        """The ``turn.failed`` event recording this failure of ``turn_id``."""
        return TurnFailed(turn_id=turn_id, kind=self.kind, error=self.error)
