"""Counting tool calls, results and their pairing over a parsed transcript.

The rules are the corpus's (``shared/corpus/README.md`` §2): matching is
one-to-one and in order. Each call takes the first not-yet-used result with
the same id in a *later* message that lies in the call's window; a call left
without one is unpaired, and a result no call took (unknown id, a second result
for an answered id, a result before its call, a result outside its call's
window) is unpaired. The window depends on the format (:data:`FORMAT_RULES`):

- ``after``: anywhere later (OpenAI Responses, Codex, Claude Code, the ledger);
- ``no_assistant_between``: before the next assistant message (OpenAI Chat
  Completions; also LangChain and Pydantic AI, whose tool messages answer the
  model message before them, and the recorded APIs of Cohere, Mistral and
  Ollama, whose tool messages are Chat Completions');
- ``next_message``: in the message right after the call's (Anthropic, Gemini,
  ADK, and recorded AWS Bedrock Converse).

Each conversation is counted on its own and the counts are summed.

This differs from :func:`policies.pairing.audit_pairing`, which reports
placement (``misplaced_result``) and, for counting, treats a second result for
an answered id as a ``duplicate_result`` that is *not* unpaired, and a second
call with a used id as a ``duplicate_call`` that needs no result of its own.
"""

from __future__ import annotations

from collections import defaultdict, deque
from typing import TYPE_CHECKING, Final, Literal, NamedTuple, TypeAlias

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


PairingRule: TypeAlias = Literal["after", "no_assistant_between", "next_message"]
"""Where a result may sit to pair with its call (see the module docstring)."""

FORMAT_RULES: Final[dict[str, PairingRule]] = {
    "openai-chat": "no_assistant_between",
    "openai-responses": "after",
    "anthropic": "next_message",
    "gemini": "next_message",
    "adk": "next_message",
    "langchain": "no_assistant_between",
    "pydantic-ai": "no_assistant_between",
    "claude-code": "after",
    "codex": "after",
    "openai-agents": "after",
    "inspect-ai": "no_assistant_between",
    "openhands": "after",
    "cohere": "no_assistant_between",
    "mistral": "no_assistant_between",
    "ollama": "no_assistant_between",
    "bedrock-converse": "next_message",
}
"""The documented pairing rule of each format (a cassette: of its API shape)."""


def rule_for(fmt: str, api: str | None = None) -> PairingRule:
    """Return the pairing rule of a format (``api`` first, for cassettes).

    Formats without a documented rule (the ledger) pair ``after``.
    """
    return FORMAT_RULES.get(api or fmt, "after")


class Unpaired(NamedTuple):
    """One call or result the rule left unpaired.

    Attributes:
        kind: ``orphan_call``; or for a result ``orphan_result`` (no call has
            its id), ``result_before_call``, ``duplicate_result`` (every call of
            its id was answered) or ``misplaced_result`` (after its call, but
            outside the call's window).
        call_id: The id.
        position: The index of the message holding it.
    """

    kind: str
    call_id: str
    position: int


class Matching(NamedTuple):
    """The counts of one conversation and what was left unpaired, in order."""

    counts: PairingCounts
    unpaired: tuple[Unpaired, ...]


NO_COUNTS = PairingCounts(
    conversations=0, tool_calls=0, tool_results=0, unpaired_calls=0, unpaired_results=0
)
"""The counts of a transcript with no conversation."""


def count_pairing(parsed: ParsedTranscript) -> PairingCounts:
    """Count the conversations, calls, results and unpaired items of a transcript.

    Each conversation is counted by the rule of its format (a cassette's by its
    API shape).

    Args:
        parsed: A parsed transcript.

    Returns:
        The counts, summed over its conversations.
    """
    total = NO_COUNTS
    for conversation in parsed.conversations:
        rule = rule_for(parsed.format, conversation.api)
        total += count_messages(conversation.messages, rule)
    return total


def count_messages(
    messages: Sequence[Message], rule: PairingRule = "after"
) -> PairingCounts:
    """Count one conversation's calls, results and unpaired items.

    Args:
        messages: The conversation, oldest first.
        rule: Where a result may sit to pair (default: anywhere later).

    Returns:
        The counts, with ``conversations=1``.
    """
    return match_messages(messages, rule).counts


def match_messages(messages: Sequence[Message], rule: PairingRule) -> Matching:
    """Pair one conversation's calls and results by a rule.

    Args:
        messages: The conversation, oldest first.
        rule: Where a result may sit to pair with its call.

    Returns:
        The counts and every unpaired call and result, by position.
    """
    results: defaultdict[str, deque[int]] = defaultdict(deque)
    for index, message in enumerate(messages):
        for result in message.tool_results:
            results[result.call_id].append(index)
    ends = _window_ends(messages, rule)
    calls = [
        (index, call.id) for index, m in enumerate(messages) for call in m.tool_calls
    ]
    used: defaultdict[str, list[int]] = defaultdict(list)
    unpaired: list[Unpaired] = []
    for index, call_id in calls:
        taken = _take_result(results[call_id], index, ends[index])
        if taken is None:
            unpaired.append(Unpaired("orphan_call", call_id, index))
        else:
            used[call_id].append(taken)
    unpaired += _unpaired_results(messages, used, calls, unpaired)
    unpaired.sort(key=lambda item: item.position)
    result_count = sum(len(message.tool_results) for message in messages)
    paired = sum(len(positions) for positions in used.values())
    counts = PairingCounts(
        conversations=1,
        tool_calls=len(calls),
        tool_results=result_count,
        unpaired_calls=len(calls) - paired,
        unpaired_results=result_count - paired,
    )
    return Matching(counts, tuple(unpaired))


def _window_ends(messages: Sequence[Message], rule: PairingRule) -> list[int]:
    """For each message, the last index a result answering it may sit at."""
    size = len(messages)
    if rule == "after":
        return [size] * size
    if rule == "next_message":
        return [index + 1 for index in range(size)]
    ends = [size] * size
    next_assistant = size
    for index in range(size - 1, -1, -1):
        ends[index] = next_assistant - 1
        if messages[index].role == "assistant":
            next_assistant = index
    return ends


def _take_result(positions: deque[int], index: int, end: int) -> int | None:
    """Use the first result after message ``index`` if it lies at or before ``end``.

    Calls are visited in message order, so a result at or before ``index`` can
    pair with no later call of the same id either, and is dropped for good; a
    result beyond the window stays for a later call of the same id.
    """
    while positions and positions[0] <= index:
        positions.popleft()
    if not positions or positions[0] > end:
        return None
    return positions.popleft()


def _unpaired_results(
    messages: Sequence[Message],
    used: dict[str, list[int]],
    calls: list[tuple[int, str]],
    orphans: list[Unpaired],
) -> list[Unpaired]:
    waiting = {item.call_id for item in orphans}
    first_call: dict[str, int] = {}
    for index, call_id in calls:
        first_call.setdefault(call_id, index)
    remaining = {call_id: deque(positions) for call_id, positions in used.items()}
    found: list[Unpaired] = []
    for index, message in enumerate(messages):
        for result in message.tool_results:
            call_id = result.call_id
            taken = remaining.get(call_id)
            if taken and taken[0] == index:
                taken.popleft()
                continue
            kind = _result_kind(call_id, index, first_call, waiting)
            found.append(Unpaired(kind, call_id, index))
    return found


def _result_kind(
    call_id: str, index: int, first_call: dict[str, int], waiting: set[str]
) -> str:
    """Why a result is unpaired: no call, early, outside the window, or a repeat.

    A result after a call of its id is ``misplaced_result`` when some call of
    that id went unanswered (the result sat outside its window), else
    ``duplicate_result``.
    """
    first = first_call.get(call_id)
    if first is None:
        return "orphan_result"
    if first >= index:
        return "result_before_call"
    return "misplaced_result" if call_id in waiting else "duplicate_result"
