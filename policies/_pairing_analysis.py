"""The pairing analysis shared by the audit and the repair (private).

One pass over a history: the home slot of each call id (its first call), the
reused call ids, the fate of every result (pairs in place, misplaced, duplicate,
before its call, or with no call) and the set of answered calls;
:func:`audit_of` turns that analysis into the public
:class:`~policies.pairing.PairingAudit`. :mod:`policies.pairing` and
:mod:`policies.pairing_repair` both build on it, so the repair acts on exactly
what the audit reports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, NamedTuple, TypeAlias

import msgspec

if TYPE_CHECKING:
    from collections.abc import Sequence

    from turnledger.policies.messages import Message

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

Slot: TypeAlias = tuple[int, int]
"""A call or result: (message index, index within the message)."""


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


class Result(NamedTuple):
    slot: Slot
    call_id: str
    fate: ViolationKind | None


class Analysis(NamedTuple):
    homes: dict[str, Slot]
    duplicate_calls: list[tuple[Slot, str]]
    results: list[Result]
    answered: set[str]


def holds_results(message: Message) -> bool:
    """Whether a message belongs to the result block of the message before it."""
    if message.tool_calls:
        return False
    return message.role == "tool" or message.kind == "tool_results"


def block_owners(messages: Sequence[Message]) -> list[int]:
    """Map each message to the message whose block it is in (-1 for none)."""
    owners: list[int] = []
    current = -1
    for index, message in enumerate(messages):
        if holds_results(message):
            owners.append(current)
        else:
            current = index
            owners.append(-1)
    return owners


def analyse(messages: Sequence[Message]) -> Analysis:
    homes: dict[str, Slot] = {}
    duplicate_calls: list[tuple[Slot, str]] = []
    for index, message in enumerate(messages):
        for position, call in enumerate(message.tool_calls):
            if call.id in homes:
                duplicate_calls.append(((index, position), call.id))
            else:
                homes[call.id] = (index, position)
    owners = block_owners(messages)
    answered: set[str] = set()
    results: list[Result] = []
    for index, message in enumerate(messages):
        for position, result in enumerate(message.tool_results):
            fate = fate_of(result.call_id, index, homes, answered, owners)
            results.append(Result((index, position), result.call_id, fate))
    return Analysis(homes, duplicate_calls, results, answered)


def fate_of(
    call_id: str,
    index: int,
    homes: dict[str, Slot],
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


def audit_of(analysis: Analysis) -> PairingAudit:
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
