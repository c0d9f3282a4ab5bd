"""Consolidation: turning one finished turn into a daily entry and a durable fact.

The shell (``pipeline/strategy.py``) makes ONE provider call per qualifying turn
and applies these decisions, in this order (reference §2.8):

1. trigger: :func:`decide_consolidation` (autosave on, user message of at least
   20 characters, not synthetic text);
2. prompt: :func:`build_consolidation_prompt` (media markers become
   ``[media attachment]``, the turn is cut to 4,000 characters plus ``…``);
3. answer: :func:`parse_consolidation_answer`; a malformed answer is a
   :class:`MalformedAnswer` value, never an exception and never a fallback
   entry (ZeroClaw stored the raw turn text instead [gap]);
4. policy gate: :func:`gate_memory_text` (empty, synthetic or noise text is
   refused; credentials are scrubbed from what is kept);
5. de-duplication: :func:`dedup_decision` (exact, or token Jaccard at or above
   0.80, against the agent's live core facts: reject or merge);
6. conflict: :func:`conflict_decision` (other core facts scoring above 0.85
   with a different key and content are superseded);
7. importance: :func:`importance_for` (category base plus keyword boost).

Keys are built from ids and dates the caller passes (:func:`daily_key`,
:func:`core_key`): policies have no clock and no randomness.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import date
from typing import Final, Literal, TypeAlias

import msgspec

from turnledger.policies.autosave import (
    AUTOSAVE_MIN_MESSAGE_CHARS,
    should_skip_autosave_content,
)
from turnledger.policies.errors import PolicyError
from turnledger.policies.scrubbing import ELLIPSIS, scrub_text, summarize

CORE_CATEGORY: Final = "core"
"""The category of durable facts."""
DAILY_CATEGORY: Final = "daily"
"""The category of daily history entries."""

CONSOLIDATION_MIN_MESSAGE_CHARS: Final = AUTOSAVE_MIN_MESSAGE_CHARS
"""A turn qualifies when its user message has at least this many characters."""
MAX_TURN_CHARS: Final = 4_000
"""The character bound of the turn text sent to the model (then ``…``)."""
MEDIA_PLACEHOLDER: Final = "[media attachment]"
"""What every media marker becomes in the consolidation prompt."""

DEFAULT_DEDUP_THRESHOLD: Final = 0.80
"""Token Jaccard at or above which a new fact duplicates an existing one."""
DEFAULT_CONFLICT_THRESHOLD: Final = 0.85
"""Score above which a different core fact is superseded by the new one."""

CATEGORY_BASE_IMPORTANCE: Final[Mapping[str, float]] = {
    CORE_CATEGORY: 0.7,
    DAILY_CATEGORY: 0.3,
    "conversation": 0.2,
}
"""Base importance per category."""
CUSTOM_BASE_IMPORTANCE: Final = 0.4
"""Base importance of any other (custom) category."""
HIGH_SIGNAL_KEYWORDS: Final = (
    "decision",
    "always",
    "never",
    "important",
    "critical",
    "must",
    "requirement",
    "policy",
    "rule",
    "principle",
)
"""Words that raise importance by :data:`KEYWORD_BOOST` each."""
KEYWORD_BOOST: Final = 0.1
"""The boost per high-signal keyword found."""
MAX_KEYWORD_BOOST: Final = 0.2
"""The cap of the total keyword boost."""

CONSOLIDATION_SYSTEM_PROMPT: Final = """\
You consolidate memory. You are given one conversation turn. Extract:
1. "history_entry": one or two sentences saying what happened in this turn, \
naming its main topic or action.
2. "memory_update": new facts, preferences, decisions or commitments that are \
worth remembering long-term, or null when the turn taught nothing new.

Answer with JSON only, exactly of this shape: \
{"history_entry": "...", "memory_update": "..." or null}
Write nothing outside the JSON object."""
"""The fixed system prompt of the consolidation call."""

_MEDIA_MARKER: Final = re.compile(
    r"\[(?:IMAGE|DOCUMENT|FILE|VIDEO|VOICE|AUDIO):[^\]]*(?:\]|\Z)", re.IGNORECASE
)
_FENCE: Final = re.compile(r"^```[A-Za-z]*\s*|\s*```$")
_ANSWER_EXCERPT_CHARS: Final = 80


class ConsolidationConfigError(PolicyError):
    """A consolidation policy got an unusable threshold, mode or id."""


ConsolidationSkip: TypeAlias = Literal["disabled", "too_short", "synthetic"]
"""Why a turn is not consolidated."""

GateRejection: TypeAlias = Literal["empty", "synthetic", "image", "tool_result"]
"""Why the policy gate refused a text."""

DedupMode: TypeAlias = Literal["reject", "merge"]
"""What to do with a near-duplicate fact: drop it, or merge it into the survivor."""

DedupAction: TypeAlias = Literal["insert", "reject", "merge"]
"""What the de-duplication decided."""


class ConsolidationTrigger(msgspec.Struct, frozen=True, kw_only=True):
    """Whether a turn is consolidated.

    Attributes:
        run: Whether to make the consolidation call.
        reason: Why not, when ``run`` is false.
    """

    run: bool
    reason: ConsolidationSkip | None = None


class ConsolidationPrompt(msgspec.Struct, frozen=True, kw_only=True):
    """The two messages of a consolidation call.

    Attributes:
        system: The system prompt (:data:`CONSOLIDATION_SYSTEM_PROMPT`).
        turn: ``User: ...`` and ``Assistant: ...`` lines, media markers
            replaced, bounded.
        truncated: Whether the turn text was cut.
    """

    system: str
    turn: str
    truncated: bool = False


class ConsolidationAnswer(msgspec.Struct, frozen=True, kw_only=True):
    """A well-formed model answer.

    Attributes:
        history_entry: The daily entry (stripped; may be empty).
        memory_update: The durable fact, or ``None`` when there is none.
    """

    history_entry: str
    memory_update: str | None = None


class MalformedAnswer(msgspec.Struct, frozen=True, kw_only=True):
    """A model answer that is not the expected JSON object.

    Attributes:
        reason: What was wrong, in a sentence.
        excerpt: A scrubbed excerpt of the answer (at most 80 characters + ``…``).
    """

    reason: str
    excerpt: str


class GateDecision(msgspec.Struct, frozen=True, kw_only=True):
    """Whether a text may be written to memory, and what to write.

    Attributes:
        allowed: Whether to write it.
        reason: Why not, when ``allowed`` is false.
        content: The text to write: stripped and scrubbed of credentials;
            empty when refused.
    """

    allowed: bool
    reason: GateRejection | None = None
    content: str = ""


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


def decide_consolidation(user_message: str, *, autosave: bool) -> ConsolidationTrigger:
    """Decide whether a finished turn is consolidated.

    Args:
        user_message: The user's message of the turn, as sent.
        autosave: Whether autosave is on for the agent.

    Returns:
        The trigger; the first failed check (disabled, too short, synthetic)
        is the reason.
    """
    checks: tuple[tuple[bool, ConsolidationSkip], ...] = (
        (not autosave, "disabled"),
        (len(user_message) < CONSOLIDATION_MIN_MESSAGE_CHARS, "too_short"),
        (should_skip_autosave_content(user_message), "synthetic"),
    )
    reason = next((why for failed, why in checks if failed), None)
    return ConsolidationTrigger(run=reason is None, reason=reason)


def importance_for(content: str, category: str) -> float:
    """Return the heuristic importance of an entry.

    The base is 0.7 for core, 0.3 for daily, 0.2 for conversation and 0.4 for
    any other category; each high-signal keyword found (a case-insensitive
    substring match, counted once) adds 0.1, the boost is capped at 0.2 and the
    total at 1.0.

    Args:
        content: The entry's text.
        category: The entry's category.

    Returns:
        The importance on [0, 1], rounded to 6 decimals.
    """
    base = CATEGORY_BASE_IMPORTANCE.get(category, CUSTOM_BASE_IMPORTANCE)
    lowered = content.lower()
    found = sum(1 for word in HIGH_SIGNAL_KEYWORDS if word in lowered)
    boost = min(found * KEYWORD_BOOST, MAX_KEYWORD_BOOST)
    return round(min(base + boost, 1.0), 6)


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


def gate_memory_text(text: str) -> GateDecision:
    """Decide whether a text produced by consolidation may be written.

    Args:
        text: The model's history entry or memory update.

    Returns:
        Refused when the text is empty after trimming, synthetic
        (:func:`~policies.autosave.should_skip_autosave_content`), or holds an
        inline image marker or a stale tool result; otherwise allowed, with
        the stripped text scrubbed of credentials.
    """
    stripped = text.strip()
    checks: tuple[tuple[bool, GateRejection], ...] = (
        (not stripped, "empty"),
        (should_skip_autosave_content(stripped), "synthetic"),
        ("[IMAGE:" in stripped, "image"),
        ("<tool_result" in stripped, "tool_result"),
    )
    reason = next((why for failed, why in checks if failed), None)
    if reason is not None:
        return GateDecision(allowed=False, reason=reason)
    return GateDecision(allowed=True, content=scrub_text(stripped))


def strip_media_markers(text: str) -> str:
    """Replace every media marker by :data:`MEDIA_PLACEHOLDER`.

    Markers are ``[IMAGE:…]``, ``[DOCUMENT:…]``, ``[FILE:…]``, ``[VIDEO:…]``,
    ``[VOICE:…]`` and ``[AUDIO:…]`` (any case); an unclosed marker runs to the
    end of the text, so cut inline bytes never reach the model.
    """
    return _MEDIA_MARKER.sub(MEDIA_PLACEHOLDER, text)


def build_consolidation_prompt(
    user_message: str, assistant_response: str, *, max_chars: int = MAX_TURN_CHARS
) -> ConsolidationPrompt:
    """Build the system prompt and turn text of a consolidation call.

    Args:
        user_message: The user's message.
        assistant_response: The assistant's final answer.
        max_chars: The bound of the turn text before the ``…``.

    Returns:
        The prompt; the turn is a ``User: {user}`` line then an
        ``Assistant: {assistant}`` line, media markers replaced, cut to
        ``max_chars`` characters plus ``…``.

    Raises:
        ConsolidationConfigError: ``max_chars`` is below 1.
    """
    if max_chars < 1:
        msg = f"Expected a turn bound >= 1, found {max_chars}"
        raise ConsolidationConfigError(msg)
    turn = (
        f"User: {strip_media_markers(user_message)}\n"
        f"Assistant: {strip_media_markers(assistant_response)}"
    )
    if len(turn) <= max_chars:
        return ConsolidationPrompt(system=CONSOLIDATION_SYSTEM_PROMPT, turn=turn)
    return ConsolidationPrompt(
        system=CONSOLIDATION_SYSTEM_PROMPT,
        turn=turn[:max_chars] + ELLIPSIS,
        truncated=True,
    )


class _Wire(msgspec.Struct, frozen=True):
    history_entry: str
    memory_update: str | None = None


_decoder: Final = msgspec.json.Decoder(_Wire)


def _json_candidates(text: str) -> tuple[str, ...]:
    # Models often fence the object or add a sentence around it: try the
    # unfenced text, then the outermost {...} span.
    unfenced = _FENCE.sub("", text.strip())
    start, end = unfenced.find("{"), unfenced.rfind("}")
    if 0 <= start < end:
        return (unfenced, unfenced[start : end + 1])
    return (unfenced,)


def _malformed(reason: str, text: str) -> MalformedAnswer:
    return MalformedAnswer(
        reason=reason, excerpt=summarize(text, _ANSWER_EXCERPT_CHARS)
    )


def parse_consolidation_answer(text: str) -> ConsolidationAnswer | MalformedAnswer:
    """Parse the model's answer to a consolidation call.

    Args:
        text: The answer, expected to be
            ``{"history_entry": "...", "memory_update": "..." | null}``,
            possibly inside a code fence or a sentence.

    Returns:
        The answer (both texts stripped; an empty ``memory_update`` becomes
        ``None``; other fields ignored), or :class:`MalformedAnswer` saying what
        was wrong. Never raises.
    """
    error = "expected a JSON object with a string history_entry"
    for candidate in _json_candidates(text):
        try:
            wire = _decoder.decode(candidate)
        except msgspec.ValidationError as e:
            error = (
                f"expected {{'history_entry': str, 'memory_update': str | null}}: {e}"
            )
        except msgspec.DecodeError:
            continue
        else:
            update = (wire.memory_update or "").strip()
            return ConsolidationAnswer(
                history_entry=wire.history_entry.strip(), memory_update=update or None
            )
    return _malformed(error, text)


def _check_id(entry_id: str) -> str:
    if not entry_id.strip():
        msg = f"Expected a non-empty entry id for a memory key, found {entry_id!r}"
        raise ConsolidationConfigError(msg)
    return entry_id


def daily_key(day: date, entry_id: str) -> str:
    """Return the key of a daily entry: ``daily_{YYYY-MM-DD}_{id}``.

    Args:
        day: The entry's day (a datetime gives its date part).
        entry_id: A unique id the caller minted.

    Returns:
        The key.

    Raises:
        ConsolidationConfigError: ``entry_id`` is empty.
    """
    return f"{DAILY_CATEGORY}_{day:%Y-%m-%d}_{_check_id(entry_id)}"


def core_key(entry_id: str) -> str:
    """Return the key of a consolidated core fact: ``core_{id}``.

    Args:
        entry_id: A unique id the caller minted.

    Returns:
        The key.

    Raises:
        ConsolidationConfigError: ``entry_id`` is empty.
    """
    return f"{CORE_CATEGORY}_{_check_id(entry_id)}"
