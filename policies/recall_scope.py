"""Which memory a turn recalls: the injection policy, the recall limit, the scopes (§4).

The engine calls :func:`resolve_inject_policy` (a sub-turn or a suppressed
spawn recalls nothing; cron and daemon turns, and turns without a session, see
no conversation rows), recalls once per session scope with
:func:`bound_recall_limit` ("unlimited" is bounded to 1,024 on every path), and
merges the per-scope results with :func:`merge_scopes`. The merged
:class:`RecallCandidate` values then go to the selector of
:mod:`policies.recall`, which renders the ``[Memory context]`` block.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, Literal, TypeAlias

import msgspec

from turnledger.policies.errors import PolicyError
from turnledger.policies.paths import session_scopes
from turnledger.policies.types import AUTONOMOUS_ORIGINS, TurnOrigin

DEFAULT_RECALL_LIMIT: Final = 5
"""How many entries a scope recall asks for by default."""

MAX_RECALL_LIMIT: Final = 1_024
"""The hard ceiling of any recall limit; ``0`` ("unlimited") means this."""
MAX_CANDIDATE_MULTIPLIER: Final = 20
"""The largest rerank over-fetch multiplier."""


class RecallConfigError(PolicyError):
    """A recall policy was configured with unusable values."""


class RecallCandidate(msgspec.Struct, frozen=True, kw_only=True):
    """One memory row as a backend returns it from a recall.

    Attributes:
        id: The backend row id.
        key: The caller key.
        content: The text.
        category: ``core``, ``daily``, ``conversation`` or a custom name.
        score: Relevance on the [0, 1] axis; ``None`` when the backend did not
            score the row (recent-entries listing).
        session: The sanitized session scope; ``None`` means global.
        agent: The agent the row belongs to.
    """

    id: str
    key: str
    content: str
    category: str
    score: float | None = None
    session: str | None = None
    agent: str | None = None


InjectReason: TypeAlias = Literal[
    "suppressed", "sub_turn", "autonomous", "no_session", "user_facing"
]
"""Why the injection policy is what it is."""


class InjectPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """Whether and how to recall memory for a turn.

    Attributes:
        inject: Whether to recall at all.
        exclude_conversation: Whether conversation rows are dropped.
        sessions: The turn's sanitized session scopes, in recall order.
        reason: Why (see :data:`InjectReason`).
    """

    inject: bool
    exclude_conversation: bool
    sessions: tuple[str, ...]
    reason: InjectReason


def resolve_inject_policy(
    origin: TurnOrigin, *, sessions: Iterable[str | None] = (), suppress: bool = False
) -> InjectPolicy:
    """Decide whether a turn recalls memory, and which rows it may see.

    ``suppress`` (a spawn-site opt-out such as cron ``uses_memory = false``) and
    ``sub_turn`` recall nothing; ``cron`` and ``daemon`` never see conversation
    rows; a user-facing turn sees them only when it has a session scope.

    Args:
        origin: Who started the turn.
        sessions: The turn's session scopes (``None``/empty entries ignored).
        suppress: The spawn-site opt-out.

    Returns:
        The policy, with the sanitized scopes de-duplicated in order.
    """
    scopes = session_scopes(sessions)
    reason: InjectReason = "user_facing"
    if suppress:
        reason = "suppressed"
    elif origin == "sub_turn":
        reason = "sub_turn"
    elif origin in AUTONOMOUS_ORIGINS:
        reason = "autonomous"
    elif not scopes:
        reason = "no_session"
    return InjectPolicy(
        inject=reason not in {"suppressed", "sub_turn"},
        exclude_conversation=reason != "user_facing",
        sessions=scopes,
        reason=reason,
    )


def bound_recall_limit(limit: int, *, candidate_multiplier: int = 1) -> int:
    """Return the limit to pass to a backend recall.

    Args:
        limit: The configured ``memory_recall_limit``; ``0`` means unlimited.
        candidate_multiplier: The rerank over-fetch factor (1 to 20).

    Returns:
        ``limit * candidate_multiplier``, with ``0`` ("unlimited") and every
        result bounded to :data:`MAX_RECALL_LIMIT`.

    Raises:
        RecallConfigError: ``limit`` is negative or ``candidate_multiplier`` is
            outside 1 to 20.
    """
    if limit < 0:
        msg = f"Expected memory_recall_limit >= 0, found {limit}"
        raise RecallConfigError(msg)
    if not 1 <= candidate_multiplier <= MAX_CANDIDATE_MULTIPLIER:
        msg = f"Expected candidate_multiplier in 1..=20, found {candidate_multiplier}"
        raise RecallConfigError(msg)
    if limit == 0:
        return MAX_RECALL_LIMIT
    return min(limit * candidate_multiplier, MAX_RECALL_LIMIT)


def merge_scopes(
    results: Iterable[Iterable[RecallCandidate]],
) -> tuple[RecallCandidate, ...]:
    """De-duplicate per-scope recall results by key; the first scope wins.

    Args:
        results: One recall result per session scope, in scope order.

    Returns:
        The candidates in order, each key once.
    """
    merged: dict[str, RecallCandidate] = {}
    for scope_results in results:
        for candidate in scope_results:
            merged.setdefault(candidate.key, candidate)
    return tuple(merged.values())
