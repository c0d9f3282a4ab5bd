"""Tool call / tool result pairing: the rule and its audit.

Providers reject histories whose calls and results do not pair (the HTTP 400s of
reference §5.5 and §9). OpenAI Chat wants each ``tool`` row right after the
assistant message that made the call; Anthropic wants each ``tool_result`` in the
user message right after the ``tool_use``. In the neutral model both are one
rule: a result sits in the *result block* of its call's message, the run of
result holders (``tool`` rows, carriers) right after it.

The audit (:func:`audit_pairing`) pairs results to calls by id, in message
order, and lists every violation; the repair that makes a history audit clean
is :func:`policies.pairing_repair.repair_pairing`. Both build on one analysis
(``policies._pairing_analysis``), so the repair fixes exactly what the audit
reports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from turnledger.policies._pairing_analysis import (
    PairingAudit,
    PairingViolation,
    ViolationKind,
    analyse,
    audit_of,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from turnledger.policies.messages import Message

__all__ = ["PairingAudit", "PairingViolation", "ViolationKind", "audit_pairing"]


def audit_pairing(messages: Sequence[Message]) -> PairingAudit:
    """List every pairing violation of a history.

    Pairing is by id, in message order: the first call with an id is its call,
    the first result after it is its result. A result that arrives after a later
    user turn still pairs (the audit is about ids), but is reported as
    ``misplaced_result`` because providers want it in the block right after the
    call. A call answered only by a result placed before it is both an
    ``orphan_call`` and (for the result) a ``result_before_call``.

    Args:
        messages: The history, oldest first.

    Returns:
        The audit.
    """
    return audit_of(analyse(messages))
