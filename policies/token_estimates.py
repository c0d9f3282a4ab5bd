"""Token estimates of messages, from their stored size (reference §5.1).

ZeroClaw's numbers: a message costs ``ceil(chars / 4) + 4`` tokens
(:func:`estimate_tokens`), a history the sum (:func:`estimate_history_tokens`),
and no trim goes below the tokens of its ``system`` messages
(:func:`system_floor_tokens`). ``chars`` is trusted as measured by
``make_message`` (never negative). :func:`estimate_each` is the one-pass list
that :func:`policies.trimming.trim_to_budget` takes as its ``estimates``; the
trims and the prompt cache use these estimates, never a tokenizer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Sequence

    from turnledger.policies.messages import Message

MESSAGE_OVERHEAD_TOKENS: Final = 4
"""Tokens added to every message on top of ``ceil(chars / 4)``."""

CHARS_PER_TOKEN: Final = 4
"""Characters per token in the estimate."""


def estimate_tokens(message: Message) -> int:
    """Estimate a message's tokens from its stored size.

    Args:
        message: The message; its ``chars`` is used, its text is not measured.

    Returns:
        ``ceil(chars / 4) + 4``.
    """
    return -(-message.chars // CHARS_PER_TOKEN) + MESSAGE_OVERHEAD_TOKENS


def estimate_history_tokens(messages: Sequence[Message]) -> int:
    """Estimate a history's tokens: the sum of :func:`estimate_tokens`.

    Args:
        messages: The history.

    Returns:
        The estimated token count (0 for an empty history).
    """
    return sum(estimate_each(messages))


def system_floor_tokens(messages: Sequence[Message]) -> int:
    """Estimate the tokens of every ``system`` message, wherever it sits.

    No trim can go below this figure (reference §5.1, "system floor").

    Args:
        messages: The history.

    Returns:
        The estimated tokens of the system messages.
    """
    return sum(estimate_tokens(m) for m in messages if m.role == "system")


def estimate_each(messages: Sequence[Message]) -> list[int]:
    """Return every message's :func:`estimate_tokens`, in one pass.

    ``(chars + 19) >> 2`` is ``ceil(chars / 4) + 4`` for ``chars >= 0``, in two
    integer operations.

    Args:
        messages: The history.

    Returns:
        One estimate per message, in order.
    """
    return [(message.chars + 19) >> 2 for message in messages]
