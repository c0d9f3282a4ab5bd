"""De-duplication and conflict of consolidated core facts.

Before a new core fact is written (reference §2.8), :func:`dedup_decision`
compares it with the agent's live core facts (exact, or token Jaccard at or
above 0.80: reject it or merge it into the survivor with :func:`merge_facts`),
and :func:`conflict_decision` names the other core facts scoring above 0.85 with
a different key and content, which the new fact supersedes. The token
similarity (:func:`tokens`, :func:`jaccard`, :func:`token_jaccard`) is shared
with retention's merging of daily entries.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal, TypeAlias

import msgspec

from turnledger.policies.memory_entries import CORE_CATEGORY, ConsolidationConfigError

DEFAULT_DEDUP_THRESHOLD: Final = 0.80
"""Token Jaccard at or above which a new fact duplicates an existing one."""
DEFAULT_CONFLICT_THRESHOLD: Final = 0.85
"""Score above which a different core fact is superseded by the new one."""


DedupMode: TypeAlias = Literal["reject", "merge"]
"""What to do with a near-duplicate fact: drop it, or merge it into the survivor."""

DedupAction: TypeAlias = Literal["insert", "reject", "merge"]
"""What the de-duplication decided."""


class ExistingFact(msgspec.Struct, frozen=True, kw_only=True):
    """A live memory entry as dedup and conflict handling see it.

    Attributes:
        key: The entry's key.
        content: Its text.
        category: Its category (only ``core`` entries are considered).
        score: Its similarity to the candidate on [0, 1], when scored.
    """

    key: str
    content: str
    category: str = CORE_CATEGORY
    score: float | None = None


class DedupDecision(msgspec.Struct, frozen=True, kw_only=True):
    """What to do with a candidate fact given the existing core facts.

    Attributes:
        action: ``insert`` (new), ``reject`` (a duplicate) or ``merge``.
        duplicate_of: The key of the existing fact it duplicates.
        similarity: Token Jaccard with that fact (1.0 for an exact match).
        merged_content: With ``merge``: the survivor's new content.
    """

    action: DedupAction
    duplicate_of: str | None = None
    similarity: float = 0.0
    merged_content: str | None = None


def _check_unit(name: str, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        msg = f"Expected {name} between 0 and 1, found {value!r}"
        raise ConsolidationConfigError(msg)


def tokens(text: str) -> frozenset[str]:
    """Return the set of case-folded whitespace-separated tokens of a text."""
    return frozenset(text.casefold().split())


def jaccard(left: frozenset[str], right: frozenset[str]) -> float:
    """Return the Jaccard similarity of two token sets (two empty sets: 1.0)."""
    if not left and not right:
        return 1.0
    return len(left & right) / len(left | right)


def token_jaccard(left: str, right: str) -> float:
    """Return the token Jaccard similarity of two texts.

    Args:
        left: A text.
        right: Another text.

    Returns:
        The size of the intersection over the size of the union of the
        case-folded whitespace tokens, on [0, 1]; 1.0 when both texts have no
        tokens, 0.0 when only one has none.
    """
    return jaccard(tokens(left), tokens(right))


def _normalized(text: str) -> str:
    return " ".join(text.split())


def merge_facts(survivor: str, incoming: str) -> str:
    """Return the content of a survivor fact after merging a near-duplicate in.

    Args:
        survivor: The existing fact's content.
        incoming: The new fact's content.

    Returns:
        The survivor when it already contains the new fact, the new fact when it
        contains the survivor, else both, sorted, one per line (deterministic).
    """
    old, new = survivor.strip(), incoming.strip()
    if not new or new in old:
        return old
    if old in new:
        return new
    return "\n".join(sorted((old, new)))


def _best_duplicate(
    candidate: str, facts: Sequence[ExistingFact], threshold: float
) -> tuple[ExistingFact, float] | None:
    wanted = _normalized(candidate)
    exact = next((f for f in facts if _normalized(f.content) == wanted), None)
    if exact is not None:
        return exact, 1.0
    candidate_tokens = tokens(candidate)
    scored = [(f, jaccard(candidate_tokens, tokens(f.content))) for f in facts]
    best = max(scored, key=lambda pair: pair[1], default=None)
    if best is None or best[1] < threshold:
        return None
    return best


def dedup_decision(
    candidate: str,
    existing_core: Sequence[ExistingFact],
    threshold: float = DEFAULT_DEDUP_THRESHOLD,
    mode: DedupMode = "reject",
) -> DedupDecision:
    """Decide whether a new core fact duplicates an existing one.

    An exact match (whitespace-normalised) or the best token Jaccard at or
    above ``threshold`` among the ``core`` facts is a duplicate (the first
    fact wins a tie). Facts of other categories are ignored.

    Args:
        candidate: The new fact's content.
        existing_core: The agent's live facts.
        threshold: The Jaccard at or above which a fact is a duplicate.
        mode: ``reject`` drops the candidate; ``merge`` folds it into the
            survivor (:func:`merge_facts`).

    Returns:
        The decision.

    Raises:
        ConsolidationConfigError: ``threshold`` is outside [0, 1] or ``mode`` is
            unknown.
    """
    _check_unit("a dedup threshold", threshold)
    if mode not in ("reject", "merge"):
        msg = f"Expected dedup mode 'reject' or 'merge', found {mode!r}"
        raise ConsolidationConfigError(msg)
    core = [f for f in existing_core if f.category == CORE_CATEGORY]
    found = _best_duplicate(candidate, core, threshold)
    if found is None:
        return DedupDecision(action="insert")
    fact, similarity = found
    if mode == "reject":
        return DedupDecision(
            action="reject", duplicate_of=fact.key, similarity=similarity
        )
    return DedupDecision(
        action="merge",
        duplicate_of=fact.key,
        similarity=similarity,
        merged_content=merge_facts(fact.content, candidate),
    )


def conflict_decision(
    candidate_key: str,
    candidate_content: str,
    scored_core_entries: Sequence[ExistingFact],
    threshold: float = DEFAULT_CONFLICT_THRESHOLD,
) -> tuple[str, ...]:
    """Return the keys of the core facts a new fact supersedes.

    A fact conflicts when it is ``core``, has another key and another
    (whitespace-normalised) content, and scores strictly above ``threshold``.
    Unscored facts never conflict.

    Args:
        candidate_key: The new fact's key (its own row is an update, not a
            conflict).
        candidate_content: The new fact's content.
        scored_core_entries: Existing facts with their similarity scores.
        threshold: The score above which a fact is superseded.

    Returns:
        The keys to supersede, in input order, without repeats.

    Raises:
        ConsolidationConfigError: ``threshold`` is outside [0, 1].
    """
    _check_unit("a conflict threshold", threshold)
    wanted = _normalized(candidate_content)
    keys = (
        fact.key
        for fact in scored_core_entries
        if fact.category == CORE_CATEGORY
        and fact.key != candidate_key
        and _normalized(fact.content) != wanted
        and fact.score is not None
        and fact.score > threshold
    )
    return tuple(dict.fromkeys(keys))
