"""Recall selection, the ``[Memory context]`` block and its injection (§4).

After the recall of :mod:`policies.recall_scope` (the injection policy, the
bounded limit, the merged scopes), a selector from :func:`make_recall_selector`
picks the candidates to show (relevance floor, entry and character bounds) and
renders them (:func:`render_memory_block`), and :func:`inject_memory_context`
prepends the block to the last real user message, at most once. Beyond
ZeroClaw: a conversation row outside the turn's sessions is dropped here too
(for backends that ignore sessions).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Final, Literal, TypeAlias

import msgspec

from turnledger.policies.autosave import MEMORY_CONTEXT_OPEN, NoiseReason, noise_reason
from turnledger.policies.messages import Message, measure_chars, starts_turn
from turnledger.policies.recall_scope import (
    InjectPolicy,
    RecallCandidate,
    RecallConfigError,
)
from turnledger.policies.types import CONVERSATION_CATEGORY

DEFAULT_MAX_ENTRIES: Final = 4
"""How many entries a block holds at most."""
DEFAULT_ENTRY_MAX_CHARS: Final = 800
"""The character bound of one entry's content (longer: cut, then ``...``)."""
DEFAULT_MAX_TOTAL_CHARS: Final = 4_000
"""The character bound of all entry lines together (the wrapper is not counted)."""
DEFAULT_MIN_RELEVANCE_SCORE: Final = 0.4
"""The default relevance floor (``memory.min_relevance_score``)."""
MEMORY_CONTEXT_CLOSE: Final = "[/Memory context]"
"""The closing line of a rendered recall block."""


RecallSkipReason: TypeAlias = (
    Literal["low_relevance", "conversation_excluded", "foreign_session"] | NoiseReason
)
"""Why a candidate was left out of the block: the relevance floor, the
conversation rules, or the skip set (:func:`policies.autosave.noise_reason`)."""


class RecalledMemory(msgspec.Struct, frozen=True, kw_only=True):
    """An entry shown in the block.

    Attributes:
        id: The backend row id.
        key: The key.
        content: The content as rendered (cut to the entry bound, with ``...``).
        truncated: Whether the content was cut.
    """

    id: str
    key: str
    content: str
    truncated: bool


class SkippedMemory(msgspec.Struct, frozen=True, kw_only=True):
    """A candidate left out of the block.

    Attributes:
        id: The backend row id.
        key: The key.
        reason: Why.
    """

    id: str
    key: str
    reason: RecallSkipReason


StopReason: TypeAlias = Literal["max_entries", "max_total_chars"]
"""Why the selection stopped before the end of the candidates."""


class RecallSelection(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of a recall selection.

    Attributes:
        entries: The entries shown, in order.
        skipped: The candidates left out before the selection stopped.
        stopped: Why it stopped early, or ``None`` when every candidate was seen.
        used_chars: The characters of the entry lines (the budgeted figure).
        block: The rendered block, ``""`` when there are no entries.
    """

    entries: tuple[RecalledMemory, ...] = ()
    skipped: tuple[SkippedMemory, ...] = ()
    stopped: StopReason | None = None
    used_chars: int = 0
    block: str = ""


RecallSelector: TypeAlias = Callable[
    [Sequence[RecallCandidate], InjectPolicy], RecallSelection
]
"""``select(candidates, policy)``, as built by :func:`make_recall_selector`."""


def render_memory_block(entries: Iterable[RecalledMemory]) -> str:
    r"""Render entries as the exact ``[Memory context]`` block.

    Args:
        entries: The entries to show.

    Returns:
        ``"[Memory context]\n- key: content\n...[/Memory context]\n\n"``, or
        ``""`` when there are none.
    """
    lines = "".join(_line(entry.key, entry.content) for entry in entries)
    if not lines:
        return ""
    return f"{MEMORY_CONTEXT_OPEN}\n{lines}{MEMORY_CONTEXT_CLOSE}\n\n"


def _line(key: str, content: str) -> str:
    return f"- {key}: {content}\n"


def _cut(content: str, limit: int) -> tuple[str, bool]:
    if len(content) <= limit:
        return content, False
    return content[:limit].rstrip() + "...", True


def _validated_int(name: str, value: int) -> int:
    if value < 1:
        msg = f"Expected {name} >= 1, found {value}"
        raise RecallConfigError(msg)
    return value


def _exclusion(
    candidate: RecallCandidate, policy: InjectPolicy
) -> RecallSkipReason | None:
    if candidate.category == CONVERSATION_CATEGORY:
        if policy.exclude_conversation:
            return "conversation_excluded"
        if candidate.session not in policy.sessions:
            return "foreign_session"
    return noise_reason(candidate.key, candidate.content)


def make_recall_selector(
    *,
    min_relevance_score: float = DEFAULT_MIN_RELEVANCE_SCORE,
    max_entries: int = DEFAULT_MAX_ENTRIES,
    entry_max_chars: int = DEFAULT_ENTRY_MAX_CHARS,
    max_total_chars: int = DEFAULT_MAX_TOTAL_CHARS,
) -> RecallSelector:
    """Build the selector that turns recalled candidates into a block.

    For each candidate in order: a score below the floor is skipped (unscored
    candidates always pass); the selection stops once ``max_entries`` are shown;
    excluded conversation rows and the skip set are skipped; content over
    ``entry_max_chars`` is cut, right-trimmed and given ``...``; and the
    selection stops at the first line that would take the lines over
    ``max_total_chars`` (no later, shorter entry is tried).

    Args:
        min_relevance_score: The relevance floor, in [0, 1].
        max_entries: How many entries at most (>= 1).
        entry_max_chars: The content bound of one entry (>= 1).
        max_total_chars: The bound of all lines together (>= 1).

    Returns:
        ``select(candidates, policy)`` returning a :class:`RecallSelection`;
        nothing is selected when ``policy.inject`` is false.

    Raises:
        RecallConfigError: A setting is out of range.
    """
    floor = min_relevance_score
    if not (math.isfinite(floor) and 0.0 <= floor <= 1.0):
        msg = f"Expected min_relevance_score in [0, 1], found {floor!r}"
        raise RecallConfigError(msg)
    most = _validated_int("max_entries", max_entries)
    entry_chars = _validated_int("entry_max_chars", entry_max_chars)
    total_chars = _validated_int("max_total_chars", max_total_chars)

    def select(
        candidates: Sequence[RecallCandidate], policy: InjectPolicy
    ) -> RecallSelection:
        if not policy.inject:
            return RecallSelection()
        entries: list[RecalledMemory] = []
        skipped: list[SkippedMemory] = []
        used = 0
        stopped: StopReason | None = None
        for candidate in candidates:
            # NaN fails ">=" too, so a NaN score is below any floor.
            low = candidate.score is not None and not candidate.score >= floor
            if not low and len(entries) == most:
                stopped = "max_entries"
                break
            reason = "low_relevance" if low else _exclusion(candidate, policy)
            if reason is not None:
                skipped.append(
                    SkippedMemory(id=candidate.id, key=candidate.key, reason=reason)
                )
                continue
            content, truncated = _cut(candidate.content, entry_chars)
            line_chars = len(_line(candidate.key, content))
            if used + line_chars > total_chars:
                stopped = "max_total_chars"
                break
            used += line_chars
            entries.append(
                RecalledMemory(
                    id=candidate.id,
                    key=candidate.key,
                    content=content,
                    truncated=truncated,
                )
            )
        return RecallSelection(
            entries=tuple(entries),
            skipped=tuple(skipped),
            stopped=stopped,
            used_chars=used,
            block=render_memory_block(entries),
        )

    return select


InjectionOutcome: TypeAlias = Literal[
    "injected", "empty_block", "no_user_message", "already_injected"
]
"""What :func:`inject_memory_context` did."""


class InjectionResult(msgspec.Struct, frozen=True, kw_only=True):
    """The history after injecting a recall block.

    Attributes:
        messages: The messages (unchanged unless ``outcome`` is ``injected``).
        outcome: What happened.
        index: The index of the message the block went into, if any.
    """

    messages: tuple[Message, ...]
    outcome: InjectionOutcome
    index: int | None = None


def inject_memory_context(messages: Sequence[Message], block: str) -> InjectionResult:
    """Prepend a recall block to the last real user message, at most once.

    Tool-result carriers and the trim breadcrumb are user messages that do not
    start a turn; they are passed over. A message that already starts with
    ``[Memory context]`` is left alone, so retries never inject twice.

    Args:
        messages: The provider history.
        block: The rendered block (from a :class:`RecallSelection`).

    Returns:
        The new history and what was done.
    """
    history = tuple(messages)
    if not block:
        return InjectionResult(messages=history, outcome="empty_block")
    for index in range(len(history) - 1, -1, -1):
        message = history[index]
        if not starts_turn(message):
            continue
        if message.text.startswith(MEMORY_CONTEXT_OPEN):
            return InjectionResult(
                messages=history, outcome="already_injected", index=index
            )
        text = block + message.text
        updated = msgspec.structs.replace(
            message,
            text=text,
            chars=measure_chars(text, message.tool_calls, message.tool_results),
        )
        return InjectionResult(
            messages=(*history[:index], updated, *history[index + 1 :]),
            outcome="injected",
            index=index,
        )
    return InjectionResult(messages=history, outcome="no_user_message")
