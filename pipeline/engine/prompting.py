"""Prompt assembly: the provider-visible history shaped for one model call.

The history comes from the session-history projection; the policies bound tool
results, inject the memory block, trim to the budget and repair pairing
(:func:`turnledger.pipeline.export.prepare_history`). What is recorded is never
the prompt itself: a ``prompt.assembled`` event with per-section sizes and
digests and a fingerprint of the whole, and, when the budget trimmed, the
``history.trimmed`` event that shaped it (the versions it dropped). The system
prompt is the exception: it is data, recorded as ``system_prompt.set`` (text and
digest) before the first prompt that uses it whenever it differs from the one
the session recorded last.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Final

import msgspec

from turnledger.ledger.events import (
    Event,
    HistoryTrimmed,
    PromptAssembled,
    PromptSection,
    SystemPromptSet,
)
from turnledger.pipeline.config.sections import RuntimeConfig
from turnledger.pipeline.export import ExportOptions, prepare_history
from turnledger.policies.messages import Message
from turnledger.policies.token_estimates import estimate_history_tokens
from turnledger.policies.trimming import REASON_BUDGET_EXCEEDED, TrimDecision
from turnledger.projections.history import SessionHistoryState
from turnledger.projections.history.read import (
    current_instructions,
    history_digest,
    visible_messages,
)

_ENCODER: Final = msgspec.json.Encoder()


def sha256_hex(data: bytes | str) -> str:
    """Return the SHA-256 hex digest of bytes or UTF-8 text."""
    raw = data.encode() if isinstance(data, str) else data
    return hashlib.sha256(raw).hexdigest()


class AssembledPrompt(msgspec.Struct, frozen=True, kw_only=True):
    """A prompt ready to send, and the events that record how it was made.

    Attributes:
        messages: The messages for the provider (system first).
        events: ``system_prompt.set`` when the system prompt changed, then
            ``prompt.assembled``, then ``history.trimmed`` when the budget
            trimmed; appended together in one step.
    """

    messages: tuple[Message, ...]
    events: tuple[Event, ...]


def assemble_prompt(
    state: SessionHistoryState,
    *,
    turn_id: str,
    iteration: int,
    system: str,
    memory_block: str,
    runtime: RuntimeConfig,
) -> AssembledPrompt:
    """Shape a session's visible history into the next prompt.

    Args:
        state: The session's history (the projection's state).
        turn_id: The turn the prompt belongs to.
        iteration: Which model call of the turn this is (0 first).
        system: The system prompt.
        memory_block: The ``[Memory context]`` block for this turn ("" none).
        runtime: The budget and tool-result bound.

    Returns:
        The messages and the events recording them.
    """
    visible = visible_messages(state)
    prepared = prepare_history(
        visible,
        ExportOptions(
            budget_tokens=runtime.context_budget_tokens,
            max_tool_result_chars=runtime.max_tool_result_chars,
            memory_block=memory_block or None,
            system=system,
        ),
    )
    messages = prepared.messages
    # The prompt event digests the history the projection showed; the trim
    # that shaped this prompt follows it in the same atomic step.
    events: list[Event] = []
    if current_instructions(state) != system:
        events.append(SystemPromptSet.of(system, turn_id=turn_id))
    events.append(
        prompt_event(
            turn_id,
            iteration,
            system,
            visible,
            memory_block=memory_block,
            messages=messages,
        )
    )
    trim = prepared.trim
    if trim is not None and trim.trimmed:
        events.append(
            trim_event(state, turn_id, trim.messages, REASON_BUDGET_EXCEEDED, trim)
        )
    return AssembledPrompt(messages=messages, events=tuple(events))


def prompt_event(
    turn_id: str,
    iteration: int,
    system: str,
    visible: Sequence[Message],
    *,
    memory_block: str,
    messages: Sequence[Message],
) -> PromptAssembled:
    """Return the fingerprint of a prompt: section sizes and digests, never text."""
    sections = [
        PromptSection(
            name="system", chars=len(system), messages=1, digest=sha256_hex(system)
        ),
        PromptSection(
            name="history",
            chars=sum(m.chars for m in visible),
            messages=len(visible),
            digest=history_digest(visible),
        ),
    ]
    if memory_block:
        sections.append(
            PromptSection(
                name="memory",
                chars=len(memory_block),
                messages=0,
                digest=sha256_hex(memory_block),
            )
        )
    return PromptAssembled(
        turn_id=turn_id,
        iteration=iteration,
        sections=tuple(sections),
        fingerprint=sha256_hex(_ENCODER.encode(tuple(messages))),
        estimated_tokens=estimate_history_tokens(messages),
    )


def trim_event(
    state: SessionHistoryState,
    turn_id: str,
    kept: Sequence[Message],
    reason: str,
    decision: TrimDecision,
) -> HistoryTrimmed:
    """Record a trim: the versions it dropped from the provider-visible history."""
    entries = [e for e in state.entries if e.version > state.trimmed_through]
    kept_body = sum(1 for m in kept if m.role != "system" and m.kind != "breadcrumb")
    dropped = max(0, len(entries) - kept_body)
    through = entries[dropped - 1].version if dropped else state.trimmed_through
    return HistoryTrimmed(
        turn_id=turn_id,
        dropped_messages=decision.dropped_messages,
        dropped_turns=decision.dropped_turns,
        kept_turns=decision.kept_turns,
        tokens_before=decision.tokens_before,
        tokens_after=decision.tokens_after,
        reason=reason,
        dropped_through_version=through,
    )
