"""Appends to a shared stream that survive other writers: decide, append, retry.

Every process running sessions of one agent writes that agent's memory stream
(``memory_stream_id(agent)``): autosave, the ``memory_*`` and
``knowledge_capture`` tools, consolidation and governance. Each append names the
stream version it expects, so two writers that read the same head collide and
one gets a :class:`~turnledger.ledger.errors.ConcurrencyError` (nothing of its
append written).

The design keeps the ONE memory stream per agent and retries, rather than
splitting it (per session or per process): the stream is the agent's memory in
one total order, which a forget, a supersede and a later store of the same key
need (a forget must follow the store it removes in every replay, the knowledge
graph folds the stream, backends rebuild from it); a split would need a merge
rule for every reader. The cost of keeping it is what this module pays: an
append that lost the race is decided again and retried.

:func:`append_decided` is that loop, the one helper every memory-stream writer
uses. ``decide(version)`` is called before every attempt with the head version
the append will expect; it re-validates against state at least that new (the
memory service catches its backend up to the ledger's end first) and returns
the events to write, or ``None`` to write nothing (e.g. the entry to forget is
already gone). A conflict means another writer committed first, so every retry
makes progress for someone; the delays are short, jittered and growing, and
the attempts are bounded: past them :class:`AppendContentionError` is raised,
with nothing written.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from typing import Final
from uuid import UUID

import msgspec

from turnledger.ledger.envelope import AppendResult
from turnledger.ledger.errors import ConcurrencyError, LedgerError
from turnledger.ledger.events import Event
from turnledger.ledger.store import EventStore
from turnledger.pipeline.logs import library_logger


class RetryPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """How often and how patiently a conflicting append is retried.

    Attributes:
        attempts: Appends tried in all (at least 1).
        first_delay: Seconds before the first retry (doubled each time).
        max_delay: The longest delay between two attempts, in seconds.
    """

    attempts: int = 200
    first_delay: float = 0.001
    max_delay: float = 0.05

    def delay(self, retry: int, draw: float) -> float:
        """The pause before retry number ``retry`` (0-based), jittered by ``draw``.

        Args:
            retry: Which retry this is (0 for the first).
            draw: A number in [0, 1) (the jitter: 0.5x to 1.5x the nominal delay).

        Returns:
            Seconds to wait.
        """
        nominal = min(self.max_delay, self.first_delay * 2.0 ** min(retry, 30))
        return nominal * (0.5 + draw)


DEFAULT_RETRY: Final = RetryPolicy()
"""Up to 200 attempts: about 10 s of waiting in all (15 s at most, jittered)."""


class AppendContentionError(LedgerError):
    """An append still conflicted after every attempt; nothing of it was written.

    Attributes:
        stream_id: The contended stream.
        attempts: How many appends were tried.
    """

    def __init__(self, stream_id: UUID, attempts: int, last: ConcurrencyError) -> None:
        self.stream_id = stream_id
        self.attempts = attempts
        super().__init__(
            f"Expected to append to stream {stream_id} within {attempts} attempts, "
            f"found other writers ahead every time (last: {last})"
        )


def append_decided(
    store: EventStore,
    stream_id: UUID,
    decide: Callable[[int], Sequence[Event] | None],
    *,
    policy: RetryPolicy = DEFAULT_RETRY,
    sleep: Callable[[float], None] = time.sleep,
    draw: Callable[[], float] = random.random,
) -> AppendResult | None:
    """Append what ``decide`` returns at the stream's head; retry on a conflict.

    Args:
        store: The ledger.
        stream_id: The stream (an agent's memory stream, typically).
        decide: Called with the head version before each attempt; returns the
            events to append after it, or ``None`` (or nothing) to write nothing.
            It may raise to refuse; the error propagates, nothing written.
        policy: Attempts and delays.
        sleep: How to wait between attempts.
        draw: Jitter source, in [0, 1).

    Returns:
        The append's result, or ``None`` when ``decide`` chose to write nothing.

    Raises:
        AppendContentionError: Every attempt conflicted; nothing was written.
        InvalidEventError: An event fails validation; nothing was written.
    """
    attempts = max(1, policy.attempts)
    last: ConcurrencyError | None = None
    for attempt in range(attempts):
        if attempt:
            sleep(policy.delay(attempt - 1, draw()))
        version = store.stream_version(stream_id)
        events = decide(version)
        if not events:
            return None
        try:
            return store.append(stream_id, events, expected_version=version)
        except ConcurrencyError as e:
            last = e
            library_logger("turnledger.appending").debug(
                "append.conflict", stream=str(stream_id), attempt=attempt + 1
            )
    assert last is not None  # noqa: S101 - the loop ran at least once and conflicted
    raise AppendContentionError(stream_id, attempts, last)
