"""Consolidation: turning one finished turn into a daily entry and a durable fact.

The shell (``pipeline/memory/strategy/``) makes ONE provider call per qualifying
turn and applies these decisions, in this order (reference §2.8):

1. trigger: :func:`decide_consolidation` (autosave on, user message of at least
   20 characters, not synthetic text);
2. prompt: :func:`build_consolidation_prompt` (media markers become
   ``[media attachment]``, the turn is cut to 4,000 characters plus ``…``);
3. answer: :func:`parse_consolidation_answer`; a malformed answer is a
   :class:`MalformedAnswer` value, never an exception and never a fallback
   entry (ZeroClaw stored the raw turn text instead [gap]);
4. policy gate: :func:`gate_memory_text` (empty, synthetic or noise text is
   refused; credentials are scrubbed from what is kept);
5. de-duplication: :func:`~policies.fact_dedup.dedup_decision` (exact, or token
   Jaccard at or above 0.80, against the agent's live core facts: reject or
   merge);
6. conflict: :func:`~policies.fact_dedup.conflict_decision` (other core facts
   scoring above 0.85 with a different key and content are superseded);
7. importance: :func:`~policies.memory_entries.importance_for` (category base
   plus keyword boost).

This module holds steps 1 to 4 (the call and what may come of it); steps 5 and 6
are in :mod:`policies.fact_dedup`, and the categories, keys (built from ids and
dates the caller passes: policies have no clock and no randomness), importance
and :class:`~policies.memory_entries.ConsolidationConfigError` in
:mod:`policies.memory_entries`.
"""

from __future__ import annotations

import re
from typing import Final, Literal, TypeAlias

import msgspec

from turnledger.policies.autosave import (
    AUTOSAVE_MIN_MESSAGE_CHARS,
    should_skip_autosave_content,
)
from turnledger.policies.memory_entries import ConsolidationConfigError
from turnledger.policies.scrubbing import ELLIPSIS, scrub_text, summarize

__all__ = [
    "CONSOLIDATION_MIN_MESSAGE_CHARS",
    "CONSOLIDATION_SYSTEM_PROMPT",
    "MAX_TURN_CHARS",
    "MEDIA_PLACEHOLDER",
    "ConsolidationAnswer",
    "ConsolidationPrompt",
    "ConsolidationSkip",
    "ConsolidationTrigger",
    "GateDecision",
    "GateRejection",
    "MalformedAnswer",
    "build_consolidation_prompt",
    "decide_consolidation",
    "gate_memory_text",
    "parse_consolidation_answer",
    "strip_media_markers",
]

CONSOLIDATION_MIN_MESSAGE_CHARS: Final = AUTOSAVE_MIN_MESSAGE_CHARS
"""A turn qualifies when its user message has at least this many characters."""
MAX_TURN_CHARS: Final = 4_000
"""The character bound of the turn text sent to the model (then ``…``)."""
MEDIA_PLACEHOLDER: Final = "[media attachment]"
"""What every media marker becomes in the consolidation prompt."""

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


ConsolidationSkip: TypeAlias = Literal["disabled", "too_short", "synthetic"]
"""Why a turn is not consolidated."""

GateRejection: TypeAlias = Literal["empty", "synthetic", "image", "tool_result"]
"""Why the policy gate refused a text."""


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
