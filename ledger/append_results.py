"""What one written transaction returns: each append's result or its conflict.

The backends answer a batch of :class:`~ledger.backend.AppendRequest` with one
outcome per non-empty request (the positions written, a replay under an
idempotency key, or a version conflict); :func:`append_results` turns those
outcomes, in request order, into the store's
:class:`~ledger.envelope.AppendResult` or typed error for every request, one
:func:`append_result` each (``EventStore.append`` calls that one directly).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from turnledger.ledger.backend import AppendRequest, Conflict, Replayed
from turnledger.ledger.envelope import AppendResult, Position
from turnledger.ledger.errors import ConcurrencyError, IdempotencyKeyError


def append_results(
    requests: Sequence[AppendRequest],
    outcomes: Iterable[tuple[Position, ...] | Conflict | Replayed],
) -> list[AppendResult | ConcurrencyError]:
    """Pair each request with its outcome (empty requests have none).

    A key first used on another stream becomes an
    :class:`~ledger.errors.IdempotencyKeyError` in its request's place.
    """
    remaining = iter(outcomes)
    return [
        append_result(request, next(remaining) if request.rows else None)
        for request in requests
    ]


def append_result(
    request: AppendRequest, outcome: tuple[Position, ...] | Conflict | Replayed | None
) -> AppendResult | ConcurrencyError:
    """Pair one request with its outcome (``None`` for an empty request)."""
    if outcome is None:
        return _empty(request)
    if isinstance(outcome, Replayed):
        # An IdempotencyKeyError is the ConcurrencyError slot's sibling (see
        # ``EventStore.write_requests``): both are LedgerErrors.
        return _replayed(request, outcome)  # type: ignore[return-value]
    if isinstance(outcome, Conflict):
        return ConcurrencyError(
            request.stream_id, request.expected_version, outcome.found
        )
    return AppendResult(
        stream_id=request.stream_id,
        first_version=request.expected_version + 1,
        last_version=request.expected_version + len(request.rows),
        positions=outcome,
    )


def _empty(request: AppendRequest) -> AppendResult:
    return AppendResult(
        stream_id=request.stream_id,
        first_version=request.expected_version + 1,
        last_version=request.expected_version,
        positions=(),
    )


def _replayed(
    request: AppendRequest, outcome: Replayed
) -> AppendResult | IdempotencyKeyError:
    if outcome.stream_id != request.stream_id:
        return IdempotencyKeyError(
            request.idempotency_key or "", outcome.stream_id, request.stream_id
        )
    return AppendResult(
        stream_id=outcome.stream_id,
        first_version=outcome.first_version,
        last_version=outcome.last_version,
        positions=outcome.positions,
    )
