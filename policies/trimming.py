"""Whole-turn trimming of a message history to a token budget.

ZeroClaw's ``trim_to_recent_turns`` (reference §5.1-5.2), same numbers: a message
costs ``ceil(chars / 4) + 4`` tokens; the leading system messages stay verbatim;
the oldest whole turns go until the rest fits; the newest turn stays even alone
over budget. A turn starts at a real user message (``starts_turn``), so calls,
``tool`` rows and carriers stay with their turn and no tool exchange is split.

Fixed reference quirks: the breadcrumb is not a turn boundary (PR #9368); it is
part of the decision (right after the system block, an existing one reused, stale
ones in the kept turns removed, never two) and its tokens count against the
budget; the reactive trim dedupes it too; sizes are characters, not bytes.

The estimates are :mod:`policies.token_estimates` (``ceil(chars / 4) + 4`` per
message).

Speed: two list comprehensions read the messages (estimates from ``chars``, then
role/kind tags); the rest runs in C over those lists (slice sums for a bisection,
``list.count``, ``list.index``). A caller that keeps the estimates passes them and
skips the costlier pass. ``chars`` is trusted as measured by ``make_message``
(never negative); checking it per message would cost another pass.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import msgspec

from turnledger.policies.errors import PolicyError
from turnledger.policies.messages import BREADCRUMB_TEXT, Message, make_message
from turnledger.policies.token_estimates import (
    CHARS_PER_TOKEN,
    estimate_each,
    system_floor_tokens,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

REASON_BUDGET_EXCEEDED: Final = "context token budget exceeded"
"""Reason of a trim forced by the token budget (also the reported-budget trim)."""

REASON_CONTEXT_OVERFLOW: Final = "context window exceeded"
"""Reason of a trim made after the provider rejected the request as too long."""

REASON_DISABLED: Final = "token budget disabled"
"""Reason of an untouched history when the budget is 0."""

REASON_WITHIN_BUDGET: Final = "history within token budget"
"""Reason of an untouched history that already fits."""

REASON_NOTHING_TO_TRIM: Final = "at most one turn: nothing to trim"
"""Reason of an untouched history that is over budget but has one turn or none."""

BREADCRUMB: Final = make_message("user", BREADCRUMB_TEXT, kind="breadcrumb")
"""The breadcrumb message a trim inserts."""

_BREADCRUMB_TOKENS: Final = -(-BREADCRUMB.chars // CHARS_PER_TOKEN) + 4

# A message's tag: its role when its kind is "normal", else its kind. A turn
# starts at each "user" tag; a breadcrumb has the "breadcrumb" tag.
_TURN: Final = "user"
_CRUMB: Final = "breadcrumb"


class TrimmingError(PolicyError):
    """A trimming policy was given a value it cannot work with."""


class TrimDecision(msgspec.Struct, frozen=True, kw_only=True):
    """What a trim keeps and what it reports.

    Attributes:
        messages: The system block, the breadcrumb (when trimmed), the kept
            turns; the input itself when nothing was trimmed.
        trimmed: Whether anything was dropped.
        reason: One of the ``REASON_*`` constants.
        dropped_messages: Input messages absent from ``messages`` (a reused
            breadcrumb is kept; a stale one is dropped).
        dropped_turns: Turns dropped.
        kept_turns: Turns in ``messages``.
        tokens_before: Estimated tokens of the input.
        tokens_after: Estimated tokens of ``messages``, breadcrumb included.
            Both are provider tokens for :func:`trim_to_reported_budget`.
        budget: The budget the trim ran against, in estimated tokens.
        breadcrumb_inserted: Whether the breadcrumb is new (not reused).
    """

    messages: tuple[Message, ...]
    trimmed: bool
    reason: str
    dropped_messages: int
    dropped_turns: int
    kept_turns: int
    tokens_before: int
    tokens_after: int
    budget: int
    breadcrumb_inserted: bool


class OverflowTrimDecision(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of a trim made after a context-overflow error.

    ``decision.trimmed`` is ``False`` when nothing could be trimmed (a retry
    would fail the same way); ``system_floor_tokens`` is the figure to report.

    Attributes:
        decision: The trim itself.
        target_tokens: The budget it aimed at: 2/3 of the current estimate.
        system_floor_tokens: Estimated tokens of every ``system`` message.
    """

    decision: TrimDecision
    target_tokens: int
    system_floor_tokens: int


def trim_to_budget(
    messages: Sequence[Message],
    budget: int,
    *,
    estimates: Sequence[int] | None = None,
) -> TrimDecision:
    """Drop the oldest whole turns until the history fits a token budget.

    Candidate cuts are the starts of the second, third, ... turn, oldest
    first; the first whose result (system block + breadcrumb + turns from the
    cut on) fits is taken, else the newest turn alone is kept. Everything
    before the cut goes, messages before the first turn included. Nothing
    changes when the budget is 0, the history fits, or it has one turn or none.

    Args:
        messages: The history, oldest first.
        budget: The token budget; 0 disables trimming.
        estimates: Each message's
            :func:`~policies.token_estimates.estimate_tokens`, when the caller
            keeps them (one per appended message); else computed from chars.

    Returns:
        The decision; see :class:`TrimDecision`.

    Raises:
        TrimmingError: If ``budget`` is negative, or ``estimates`` does not
            hold one number per message.
    """
    _check_non_negative("budget", budget)
    if estimates is None:
        estimates = estimate_each(messages)
    elif len(estimates) != len(messages):
        msg = (
            f"Expected one estimate per message ({len(messages)}), "
            f"found {len(estimates)}"
        )
        raise TrimmingError(msg)
    total = sum(estimates)
    if budget == 0:
        return _unchanged(messages, REASON_DISABLED, total, budget)
    if total <= budget:
        return _unchanged(messages, REASON_WITHIN_BUDGET, total, budget)
    tags = _tags(messages)
    second = _second_turn(tags)
    if second is None:
        return _unchanged(messages, REASON_NOTHING_TO_TRIM, total, budget, tags)
    return _cut(messages, (estimates, total), tags, second, budget)


def trim_to_reported_budget(
    messages: Sequence[Message], budget: int, reported_input_tokens: int
) -> TrimDecision:
    """Trim when the provider reports more input tokens than the budget.

    The estimate and the provider's tokenizer disagree, so the budget is moved
    into estimator units first: ``max(1, budget * estimated // reported)``.
    The token figures of the decision are moved back into provider units
    (``tokens * reported // estimated``), so ``tokens_before`` is the reported
    figure.

    Args:
        messages: The history that was sent, oldest first.
        budget: The token budget in provider tokens; 0 disables trimming.
        reported_input_tokens: The input tokens the provider reported.

    Returns:
        The decision; untouched (with the reported figure as both token
        counts) when the budget is 0 or the report is within it.

    Raises:
        TrimmingError: If ``budget`` or ``reported_input_tokens`` is negative.
    """
    _check_non_negative("budget", budget)
    _check_non_negative("reported_input_tokens", reported_input_tokens)
    if budget == 0 or reported_input_tokens <= budget:
        reason = REASON_DISABLED if budget == 0 else REASON_WITHIN_BUDGET
        return _unchanged(messages, reason, reported_input_tokens, budget)
    sizes = estimate_each(messages)
    estimated = sum(sizes)
    if estimated == 0:
        return _unchanged(messages, REASON_NOTHING_TO_TRIM, 0, budget)
    scaled = max(1, budget * estimated // reported_input_tokens)
    inner = trim_to_budget(messages, scaled, estimates=sizes)
    return msgspec.structs.replace(
        inner,
        tokens_before=inner.tokens_before * reported_input_tokens // estimated,
        tokens_after=inner.tokens_after * reported_input_tokens // estimated,
    )


def trim_after_overflow(messages: Sequence[Message]) -> OverflowTrimDecision:
    """Trim to 2/3 of the current estimate after a context-overflow error.

    The reactive path: :func:`trim_to_budget` at ``estimate * 2 // 3`` (at least
    1), breadcrumb deduped; a trimmed decision carries
    :data:`REASON_CONTEXT_OVERFLOW`. With one turn or none nothing is trimmed.

    Args:
        messages: The history that overflowed, oldest first.

    Returns:
        The decision, the target and the system floor.
    """
    sizes = estimate_each(messages)
    target = max(1, sum(sizes) * 2 // 3)
    decision = trim_to_budget(messages, target, estimates=sizes)
    if decision.trimmed:
        decision = msgspec.structs.replace(decision, reason=REASON_CONTEXT_OVERFLOW)
    return OverflowTrimDecision(
        decision=decision,
        target_tokens=target,
        system_floor_tokens=system_floor_tokens(messages),
    )


def _check_non_negative(name: str, value: int) -> None:
    if value < 0:
        msg = f"Expected {name} >= 0 (0 disables trimming), found {value}"
        raise TrimmingError(msg)


def _tags(messages: Sequence[Message]) -> list[str]:
    """Return every message's tag (see ``_TURN``)."""
    return [m.role if m.kind == "normal" else m.kind for m in messages]


def _leading_system_count(messages: Sequence[Message]) -> int:
    """Count the leading system messages; a non-system message must follow."""
    head = 0
    while messages[head].role == "system":
        head += 1
    return head


def _first_fit(estimates: Sequence[int], total: int, room: int) -> tuple[int, int]:
    """Return the smallest ``i`` with ``sum(estimates[i:]) <= room``, and that sum.

    ``total`` (the whole sum) exceeds ``room``; ``(len + 1, 0)`` when ``room < 0``.
    A bisection: each step sums (in C) the half it discards, about ``len``
    additions in all.
    """
    if room < 0:
        return len(estimates) + 1, 0
    low, high = 0, len(estimates)
    above, below = total, 0  # sum(estimates[low:]) > room >= sum(estimates[high:])
    while high - low > 1:
        middle = (low + high) // 2
        suffix = above - sum(estimates[low:middle])
        if suffix <= room:
            high, below = middle, suffix
        else:
            low, above = middle, suffix
    return high, below


def _unchanged(
    messages: Sequence[Message],
    reason: str,
    tokens: int,
    budget: int,
    tags: list[str] | None = None,
) -> TrimDecision:
    if tags is None:
        tags = _tags(messages)
    return TrimDecision(
        messages=tuple(messages),
        trimmed=False,
        reason=reason,
        dropped_messages=0,
        dropped_turns=0,
        kept_turns=tags.count(_TURN),
        tokens_before=tokens,
        tokens_after=tokens,
        budget=budget,
        breadcrumb_inserted=False,
    )


def _second_turn(tags: list[str]) -> int | None:
    """Return the index of the second turn start, or ``None`` if there is none."""
    try:
        return tags.index(_TURN, tags.index(_TURN) + 1)
    except ValueError:
        return None


def _cut(
    messages: Sequence[Message],
    sized: tuple[Sequence[int], int],
    tags: list[str],
    second: int,
    budget: int,
) -> TrimDecision:
    """Cut at the oldest turn start whose suffix fits; see ``trim_to_budget``.

    ``sized`` is the estimates and their sum; ``second`` the second turn start.
    """
    estimates, total = sized
    head = _leading_system_count(messages)
    system_tokens = sum(estimates[:head])
    reuse = tags[head] == _CRUMB
    crumb = messages[head] if reuse else BREADCRUMB
    crumb_tokens = estimates[head] if reuse else _BREADCRUMB_TOKENS
    room = budget - system_tokens - crumb_tokens
    fit, fit_tokens = _first_fit(estimates, total, room)
    start = _turn_at_or_after(tags, max(fit, second))
    kept_tokens = _suffix_tokens(estimates, fit, fit_tokens, start)
    body: Sequence[Message] = messages[start:]
    if _has_crumb(tags, start):
        # Stale breadcrumbs in the kept turns give way to the one at the head.
        # They counted while fitting, which only made the cut safer.
        body = [message for message in body if message.kind != _CRUMB]
        kept_tokens -= sum(
            estimate
            for estimate, tag in zip(estimates[start:], tags[start:], strict=True)
            if tag == _CRUMB
        )
    kept = (*messages[:head], crumb, *body)
    dropped_turns, kept_turns = tags[:start].count(_TURN), tags[start:].count(_TURN)
    return TrimDecision(
        messages=kept,
        trimmed=True,
        reason=REASON_BUDGET_EXCEEDED,
        dropped_messages=len(messages) - len(kept) + (0 if reuse else 1),
        dropped_turns=dropped_turns,
        kept_turns=kept_turns,
        tokens_before=total,
        tokens_after=system_tokens + crumb_tokens + kept_tokens,
        budget=budget,
        breadcrumb_inserted=not reuse,
    )


def _has_crumb(tags: list[str], start: int) -> bool:
    try:
        tags.index(_CRUMB, start)
    except ValueError:
        return False
    return True


def _suffix_tokens(
    estimates: Sequence[int], fit: int, fit_tokens: int, start: int
) -> int:
    """Return ``sum(estimates[start:])`` from the suffix sum at ``fit`` nearby."""
    if start >= fit:
        return fit_tokens - sum(estimates[fit:start])
    return fit_tokens + sum(estimates[start:fit])


def _turn_at_or_after(tags: list[str], position: int) -> int:
    """Return the first turn start at or after ``position``, else the last one."""
    try:
        return tags.index(_TURN, position)
    except ValueError:
        last = len(tags) - 1
        while tags[last] != _TURN:
            last -= 1
        return last
