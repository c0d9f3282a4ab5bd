"""Tool call / tool result pairing repair: a deterministic rewrite to a clean audit.

The repair makes a history audit clean (:func:`policies.pairing.audit_pairing`)
and keeps every result that pairs: results with no call, before their call, or
second for a call are dropped; a reused call id is dropped from the later
message; a result outside its call's block is moved to the end of that block; a
call with no result gets a synthesized error result (:data:`INTERRUPTED_TEXT`)
or, with ``strategy="drop_calls"``, is stripped
(``strip_orphaned_tool_calls_from_assistants``). Unlike ZeroClaw's pass 1 it
never drops a whole assistant message that still has calls. The repair is
deterministic, idempotent, and the identity on a clean history.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Literal, NamedTuple, TypeAlias

import msgspec

from turnledger.policies._pairing_analysis import (
    Analysis,
    PairingAudit,
    Slot,
    ViolationKind,
    analyse,
    audit_of,
    holds_results,
)
from turnledger.policies.errors import PolicyError
from turnledger.policies.messages import (
    Message,
    ToolCall,
    ToolResult,
    make_message,
    measure_chars,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

RepairStrategy: TypeAlias = Literal["synthesize", "drop_calls"]
"""How a call with no result is repaired: answer it, or remove it."""

INTERRUPTED_TEXT: Final = "Error: [interrupted: the tool call did not complete]"
"""The content of a synthesized result: a failed result, shown the way the session
history shows every failed result (``"Error: "`` and the error), so a synthesized
result exported, imported and exported again reads the same."""

_STRATEGIES: Final = ("synthesize", "drop_calls")
_DROPPED_FATES: Final[tuple[ViolationKind, ...]] = (
    "orphan_result",
    "result_before_call",
    "duplicate_result",
)


class PairingError(PolicyError):
    """A pairing policy was given a value it cannot work with."""


class RepairDecision(msgspec.Struct, frozen=True, kw_only=True):
    """A repaired history and what the repair did.

    Attributes:
        messages: The repaired history; the input itself when it was clean.
        changed: Whether anything changed.
        synthesized: Ids of calls given a synthesized result, in call order.
        dropped_calls: Ids of calls removed (reused ids; under ``drop_calls``
            the unanswered ones too).
        dropped_results: Ids of results removed (no call, early, duplicate).
        moved_results: Ids of results moved into their call's block.
        removed_messages: Input messages removed because nothing was left in
            them (after drops, or after their results moved elsewhere).
        audit: The audit of the input.
    """

    messages: tuple[Message, ...]
    changed: bool
    synthesized: tuple[str, ...]
    dropped_calls: tuple[str, ...]
    dropped_results: tuple[str, ...]
    moved_results: tuple[str, ...]
    removed_messages: int
    audit: PairingAudit


class _Plan(NamedTuple):
    removed_calls: set[Slot]
    kept_results: set[Slot]
    incoming: dict[int, list[tuple[ToolResult, bool]]]


def repair_pairing(
    messages: Sequence[Message], *, strategy: RepairStrategy = "synthesize"
) -> RepairDecision:
    """Rewrite a history so that every call and result pairs in place.

    An unanswered call gets a synthesized result (``is_error=True``, content
    :data:`INTERRUPTED_TEXT`, the call's tool name) at the end of its block:
    appended to the block's last message when that is a carrier, else as a
    ``tool`` row of kind ``synthetic``; with ``drop_calls`` it is removed from
    its message. Moved results take the same shape. A message left with
    nothing (or a ``tool`` row left with no result) is removed. The output
    always audits clean; repairing it again changes nothing.

    Args:
        messages: The history, oldest first.
        strategy: ``"synthesize"`` (default) or ``"drop_calls"``.

    Returns:
        The repaired history and what was done.

    Raises:
        PairingError: If ``strategy`` is not a known strategy.
    """
    if strategy not in _STRATEGIES:
        msg = f"Expected strategy to be one of {_STRATEGIES}, found {strategy!r}"
        raise PairingError(msg)
    analysis = analyse(messages)
    audit = audit_of(analysis)
    if audit.clean:
        return _decision(messages, 0, analysis, audit, ([], []))
    unanswered = [
        (slot, call_id)
        for call_id, slot in analysis.homes.items()
        if call_id not in analysis.answered
    ]
    plan = _plan(messages, analysis, unanswered, strategy)
    repaired, removed = _rebuild(messages, plan)
    if strategy == "synthesize":
        return _decision(repaired, removed, analysis, audit, (unanswered, []))
    return _decision(repaired, removed, analysis, audit, ([], unanswered))


def _plan(
    messages: Sequence[Message],
    analysis: Analysis,
    unanswered: list[tuple[Slot, str]],
    strategy: RepairStrategy,
) -> _Plan:
    removed_calls = {slot for slot, _ in analysis.duplicate_calls}
    kept_results = {result.slot for result in analysis.results if result.fate is None}
    incoming: dict[int, list[tuple[ToolResult, bool]]] = {}
    for result in analysis.results:
        if result.fate == "misplaced_result":
            index, position = result.slot
            home = analysis.homes[result.call_id][0]
            moved = messages[index].tool_results[position]
            incoming.setdefault(home, []).append((moved, False))
    for (index, position), call_id in unanswered:
        if strategy == "drop_calls":
            removed_calls.add((index, position))
            continue
        name = messages[index].tool_calls[position].name
        made = ToolResult(
            call_id=call_id, content=INTERRUPTED_TEXT, is_error=True, name=name
        )
        incoming.setdefault(index, []).append((made, True))
    return _Plan(removed_calls, kept_results, incoming)


def _rebuild(messages: Sequence[Message], plan: _Plan) -> tuple[list[Message], int]:
    """Emit each owner message followed by its repaired result block.

    Returns:
        The repaired messages and how many input messages were removed.
    """
    entries: list[tuple[Message, bool]] = []
    holders_from = 0
    owner = -1
    for index, message in enumerate(messages):
        if not holds_results(message):
            _extend_block(entries, holders_from, plan.incoming.get(owner, []))
            owner = index
            entries.append(_filter(index, message, plan))
            holders_from = len(entries)
        else:
            entries.append(_filter(index, message, plan))
    _extend_block(entries, holders_from, plan.incoming.get(owner, []))
    kept = [message for message, lost in entries if not (lost and _is_empty(message))]
    return kept, len(entries) - len(kept)


def _filter(index: int, message: Message, plan: _Plan) -> tuple[Message, bool]:
    """Drop the calls and results that do not stay in place; flag any loss."""
    calls = tuple(
        call
        for position, call in enumerate(message.tool_calls)
        if (index, position) not in plan.removed_calls
    )
    results = tuple(
        result
        for position, result in enumerate(message.tool_results)
        if (index, position) in plan.kept_results
    )
    if len(calls) + len(results) == len(message.tool_calls) + len(message.tool_results):
        return message, False  # filters only remove, so equal sizes mean no change
    return _with(message, calls, results), True


def _extend_block(
    entries: list[tuple[Message, bool]],
    holders_from: int,
    incoming: list[tuple[ToolResult, bool]],
) -> None:
    """Add moved and synthesized results at the end of the current block.

    They join the block's last message when it is a carrier, else each becomes
    a ``tool`` row.
    """
    if not incoming:
        return
    last = entries[-1][0] if len(entries) > holders_from else None
    if last is not None and last.role != "tool" and last.kind == "tool_results":
        extra = tuple(result for result, _ in incoming)
        entries[-1] = (_with(last, last.tool_calls, last.tool_results + extra), True)
    else:
        entries += [
            (make_message("tool", tool_results=(r,), kind=_row_kind(made)), False)
            for r, made in incoming
        ]


def _row_kind(synthetic: bool) -> Literal["synthetic"] | None:
    return "synthetic" if synthetic else None


def _with(
    message: Message, calls: tuple[ToolCall, ...], results: tuple[ToolResult, ...]
) -> Message:
    chars = measure_chars(message.text, calls, results)
    return msgspec.structs.replace(
        message, tool_calls=calls, tool_results=results, chars=chars
    )


def _is_empty(message: Message) -> bool:
    if message.tool_results or message.tool_calls:
        return False
    return message.role == "tool" or not message.text


def _decision(
    messages: Sequence[Message],
    removed: int,
    analysis: Analysis,
    audit: PairingAudit,
    unanswered: tuple[list[tuple[Slot, str]], list[tuple[Slot, str]]],
) -> RepairDecision:
    """Build the decision; ``unanswered`` is (synthesized, stripped) calls."""
    synthesized, stripped = unanswered
    results = analysis.results
    dropped_calls = [call_id for _, call_id in analysis.duplicate_calls]
    dropped_calls += [call_id for _, call_id in stripped]
    return RepairDecision(
        messages=tuple(messages),
        changed=not audit.clean,
        synthesized=tuple(call_id for _, call_id in synthesized),
        dropped_calls=tuple(dropped_calls),
        dropped_results=tuple(r.call_id for r in results if r.fate in _DROPPED_FATES),
        moved_results=tuple(r.call_id for r in results if r.fate == "misplaced_result"),
        removed_messages=removed,
        audit=audit,
    )
