"""Counting tool calls, results and their pairing over a parsed transcript.

The rule is the corpus's (``shared/corpus/README.md`` §2): matching is
one-to-one and in order. Each call takes the first not-yet-used result with
the same id in a *later* message; a call left without one is unpaired, and a
result no call took (unknown id, a second result for an answered id, a result
before its call) is unpaired. Each conversation is counted on its own and the
counts are summed.

This differs from :func:`policies.pairing.audit_pairing`, which reports
placement (``misplaced_result``) and, for counting, treats a second result for
an answered id as a ``duplicate_result`` that is *not* unpaired, and a second
call with a used id as a ``duplicate_call`` that needs no result of its own.
"""

from __future__ import annotations

from collections import defaultdict, deque
from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:
    from collections.abc import Sequence

    from turnledger.pipeline.formats.model import ParsedTranscript
    from turnledger.policies.messages import Message


class PairingCounts(msgspec.Struct, frozen=True, kw_only=True):
    """Tool-item counts of a transcript, as ``EXPECTED.tsv`` states them.

    Attributes:
        conversations: Conversations in the transcript.
        tool_calls: Client tool calls.
        tool_results: Tool results.
        unpaired_calls: Calls no later result answers.
        unpaired_results: Results that answer no call.
    """

    conversations: int
    tool_calls: int
    tool_results: int
    unpaired_calls: int
    unpaired_results: int

    def __add__(self, other: PairingCounts) -> PairingCounts:
        return PairingCounts(
            conversations=self.conversations + other.conversations,
            tool_calls=self.tool_calls + other.tool_calls,
            tool_results=self.tool_results + other.tool_results,
            unpaired_calls=self.unpaired_calls + other.unpaired_calls,
            unpaired_results=self.unpaired_results + other.unpaired_results,
        )


NO_COUNTS = PairingCounts(
    conversations=0, tool_calls=0, tool_results=0, unpaired_calls=0, unpaired_results=0
)
"""The counts of a transcript with no conversation."""


def count_pairing(parsed: ParsedTranscript) -> PairingCounts:
    """Count the conversations, calls, results and unpaired items of a transcript.

    Args:
        parsed: A parsed transcript.

    Returns:
        The counts, summed over its conversations.
    """
    total = NO_COUNTS
    for conversation in parsed.conversations:
        total += count_messages(conversation.messages)
    return total


def count_messages(messages: Sequence[Message]) -> PairingCounts:
    """Count one conversation's calls, results and unpaired items.

    Args:
        messages: The conversation, oldest first.

    Returns:
        The counts, with ``conversations=1``.
    """
    results: defaultdict[str, deque[int]] = defaultdict(deque)
    for index, message in enumerate(messages):
        for result in message.tool_results:
            results[result.call_id].append(index)
    calls = [
        (index, call.id) for index, m in enumerate(messages) for call in m.tool_calls
    ]
    paired = sum(
        _take_result_after(results[call_id], index) for index, call_id in calls
    )
    result_count = sum(len(message.tool_results) for message in messages)
    return PairingCounts(
        conversations=1,
        tool_calls=len(calls),
        tool_results=result_count,
        unpaired_calls=len(calls) - paired,
        unpaired_results=result_count - paired,
    )


def _take_result_after(positions: deque[int], index: int) -> bool:
    """Use the first result after message ``index``; report whether one existed.

    Calls are visited in message order, so a result at or before ``index`` can
    pair with no later call of the same id either, and is dropped for good.
    """
    while positions and positions[0] <= index:
        positions.popleft()
    if not positions:
        return False
    positions.popleft()
    return True
