"""Tool call / tool result pairing: audit and deterministic repair.

Providers reject histories whose calls and results do not pair (the HTTP 400s of
reference §5.5 and §9). OpenAI Chat wants each ``tool`` row right after the
assistant message that made the call; Anthropic wants each ``tool_result`` in the
user message right after the ``tool_use``. In the neutral model both are one
rule: a result sits in the *result block* of its call's message, the run of
result holders (``tool`` rows, carriers) right after it.

The audit pairs results to calls by id, in message order, and lists every
violation. The repair makes the history audit clean and keeps every result that
pairs: results with no call, before their call, or second for a call are dropped;
a reused call id is dropped from the later message; a result outside its call's
block is moved to the end of that block; a call with no result gets a synthesized
error result (:data:`INTERRUPTED_TEXT`) or, with ``strategy="drop_calls"``, is
stripped (``strip_orphaned_tool_calls_from_assistants``). Unlike ZeroClaw's pass
1 it never drops a whole assistant message that still has calls. The repair is
deterministic, idempotent, and the identity on a clean history.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Literal, NamedTuple, TypeAlias

import msgspec

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

ViolationKind: TypeAlias = Literal[
    "orphan_call",
    "orphan_result",
    "duplicate_result",
    "result_before_call",
    "misplaced_result",
    "duplicate_call",
]
"""What is wrong: a call no later result answers; a result no call has; a second
result for a call; a result before its call (or in its message); a result that
pairs but sits outside its call's block; a call reusing an earlier call's id."""

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

_Slot: TypeAlias = tuple[int, int]
"""A call or result: (message index, index within the message)."""


class PairingError(PolicyError):
    """A pairing policy was given a value it cannot work with."""


class PairingViolation(msgspec.Struct, frozen=True, kw_only=True):
    """One unpaired, duplicated or misplaced call or result.

    Attributes:
        kind: What is wrong (see :data:`ViolationKind`).
        call_id: The call id involved.
        position: The index of the message holding the call or result.
    """

    kind: ViolationKind
    call_id: str
    position: int


class PairingAudit(msgspec.Struct, frozen=True, kw_only=True):
    """Every pairing violation of a history, and counts.

    Attributes:
        violations: The violations, by position (stable within a message).
        tool_calls: Calls in the history.
        tool_results: Results in the history.
        unpaired_calls: Calls (first of their id) no later result answers: the
            ``orphan_call`` violations.
        unpaired_results: Results that answer no call: ``orphan_result`` plus
            ``result_before_call``. Duplicate and misplaced results pair.
        clean: No violations: valid for OpenAI Chat and Anthropic alike.
    """

    violations: tuple[PairingViolation, ...]
    tool_calls: int
    tool_results: int
    unpaired_calls: int
    unpaired_results: int
    clean: bool


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


class _Result(NamedTuple):
    slot: _Slot
    call_id: str
    fate: ViolationKind | None


class _Analysis(NamedTuple):
    homes: dict[str, _Slot]
    duplicate_calls: list[tuple[_Slot, str]]
    results: list[_Result]
    answered: set[str]


class _Plan(NamedTuple):
    removed_calls: set[_Slot]
    kept_results: set[_Slot]
    incoming: dict[int, list[tuple[ToolResult, bool]]]


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
    return _audit(_analyse(messages))


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
    analysis = _analyse(messages)
    audit = _audit(analysis)
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


def _holds_results(message: Message) -> bool:
    """Whether a message belongs to the result block of the message before it."""
    if message.tool_calls:
        return False
    return message.role == "tool" or message.kind == "tool_results"


def _block_owners(messages: Sequence[Message]) -> list[int]:
    """Map each message to the message whose block it is in (-1 for none)."""
    owners: list[int] = []
    current = -1
    for index, message in enumerate(messages):
        if _holds_results(message):
            owners.append(current)
        else:
            current = index
            owners.append(-1)
    return owners


def _analyse(messages: Sequence[Message]) -> _Analysis:
    homes: dict[str, _Slot] = {}
    duplicate_calls: list[tuple[_Slot, str]] = []
    for index, message in enumerate(messages):
        for position, call in enumerate(message.tool_calls):
            if call.id in homes:
                duplicate_calls.append(((index, position), call.id))
            else:
                homes[call.id] = (index, position)
    owners = _block_owners(messages)
    answered: set[str] = set()
    results: list[_Result] = []
    for index, message in enumerate(messages):
        for position, result in enumerate(message.tool_results):
            fate = _fate(result.call_id, index, homes, answered, owners)
            results.append(_Result((index, position), result.call_id, fate))
    return _Analysis(homes, duplicate_calls, results, answered)


def _fate(
    call_id: str,
    index: int,
    homes: dict[str, _Slot],
    answered: set[str],
    owners: list[int],
) -> ViolationKind | None:
    """Classify one result; ``None`` means it pairs in place."""
    home = homes.get(call_id)
    if home is None:
        return "orphan_result"
    if home[0] >= index:
        return "result_before_call"
    if call_id in answered:
        return "duplicate_result"
    answered.add(call_id)
    return None if owners[index] == home[0] else "misplaced_result"


def _audit(analysis: _Analysis) -> PairingAudit:
    found = [
        PairingViolation(kind="duplicate_call", call_id=call_id, position=slot[0])
        for slot, call_id in analysis.duplicate_calls
    ]
    found += [
        PairingViolation(
            kind=result.fate, call_id=result.call_id, position=result.slot[0]
        )
        for result in analysis.results
        if result.fate is not None
    ]
    orphan_calls = [
        PairingViolation(kind="orphan_call", call_id=call_id, position=slot[0])
        for call_id, slot in analysis.homes.items()
        if call_id not in analysis.answered
    ]
    found += orphan_calls
    found.sort(key=lambda violation: violation.position)
    unpaired = ("orphan_result", "result_before_call")
    return PairingAudit(
        violations=tuple(found),
        tool_calls=len(analysis.homes) + len(analysis.duplicate_calls),
        tool_results=len(analysis.results),
        unpaired_calls=len(orphan_calls),
        unpaired_results=sum(result.fate in unpaired for result in analysis.results),
        clean=not found,
    )


def _plan(
    messages: Sequence[Message],
    analysis: _Analysis,
    unanswered: list[tuple[_Slot, str]],
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
        if not _holds_results(message):
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
    analysis: _Analysis,
    audit: PairingAudit,
    unanswered: tuple[list[tuple[_Slot, str]], list[tuple[_Slot, str]]],
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
