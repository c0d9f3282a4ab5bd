"""``turnledger costs``: model call costs from the ledger (model.called events)."""

# Commands import what they run inside their handlers: building the parser and
# the light commands stay light (issue #24).
# ruff: noqa: PLC0415

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import TYPE_CHECKING, Final

from turnledger.pipeline.cli.common import Command, UsageError, open_ledger, print_json

if TYPE_CHECKING:
    from datetime import datetime

    from turnledger.ledger.envelope import Recorded
    from turnledger.ledger.store import EventStore
    from turnledger.projections.costs import CostTotals

GROUPINGS: Final = ("model", "agent", "session", "day")


def _since(text: str | None) -> datetime | None:
    if text is None:
        return None
    from datetime import UTC, datetime

    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        msg = f"--since: expected an ISO date or date-time, found {text!r}"
        raise UsageError(msg) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _events(store: EventStore, page: int = 2_000) -> Iterator[Recorded]:
    from turnledger.ledger.events import ModelCalled, SessionForked, SessionOpened

    return store.iter_all(
        types=(SessionOpened, SessionForked, ModelCalled), page_size=page
    )


def _session_events(
    store: EventStore, key: str, agent: str | None
) -> tuple[list[Recorded], dict[object, tuple[str, str]]]:
    """The model calls of each session keyed ``key``, a fork's source prefix first."""
    from turnledger.ledger.events import ModelCalled
    from turnledger.pipeline.sessions import list_sessions
    from turnledger.projections.lineage import lineage

    events: list[Recorded] = []
    owners: dict[object, tuple[str, str]] = {}
    for ref in list_sessions(store):
        if ref.key != key or agent not in (None, ref.agent):
            continue
        owners[ref.stream_id] = (ref.agent, ref.key)
        events += [
            r for r in lineage(store, ref.stream_id) if isinstance(r.event, ModelCalled)
        ]
    return events, owners


def _totals_json(totals: CostTotals) -> dict[str, object]:
    return {
        "calls": totals.calls,
        "failures": totals.failures,
        "input_tokens": totals.input_tokens,
        "cached_input_tokens": totals.cached_input_tokens,
        "cache_write_tokens": totals.cache_write_tokens,
        "output_tokens": totals.output_tokens,
        "reasoning_tokens": totals.reasoning_tokens,
        "total_tokens": totals.total_tokens,
        "cost_usd": totals.cost_usd,
        "duration_ms": totals.duration_ms,
    }


def cmd_costs(args: argparse.Namespace) -> int:
    """Model call costs: tokens and USD, grouped by model, agent, session or day.

    Filters: --agent A, --session S (a session key; a fork's rows include the
    calls of its source's prefix up to the fork point, what its history cost,
    as history and replay do), --since DATE (ISO, UTC when no zone is given);
    --by model|agent|session|day (default model). --json prints one object:
    ``by``, ``total`` and ``rows`` (``group`` plus calls, failures,
    input_tokens, cached_input_tokens, cache_write_tokens, output_tokens,
    reasoning_tokens, total_tokens, cost_usd, duration_ms), most costly first.
    Cached and cache-write tokens are parts of input_tokens, reasoning tokens
    part of output_tokens. Group names (models, agents, session keys) are
    shown scrubbed of credentials and bounded.

    Example: turnledger costs --by day --since 2026-11-01 --json
    """
    from turnledger.policies.scrubbing import summarize
    from turnledger.projections.costs import summarize_costs

    if args.session is not None and not args.session.strip():
        msg = "--session: expected a session key, found an empty one"
        raise UsageError(msg)
    since = _since(args.since)
    with open_ledger(args) as store:
        if args.session is None:
            total, rows = summarize_costs(
                _events(store), by=args.by, agent=args.agent, since=since
            )
        else:
            events, owners = _session_events(store, args.session, args.agent)
            total, rows = summarize_costs(
                events, by=args.by, session=args.session, since=since, owners=owners
            )
    if args.json:
        print_json(
            {
                "by": args.by,
                "total": _totals_json(total),
                "rows": [
                    {"group": summarize(r.group), **_totals_json(r.totals)}
                    for r in rows
                ],
            }
        )
        return 0
    if not rows:
        print("No model calls found.")
        return 0
    print(f"{args.by:<32} {'calls':>7} {'tokens':>12} {'cost_usd':>12}")
    for row in (*rows, None):
        name, totals = (
            ("total", total) if row is None else (summarize(row.group), row.totals)
        )
        print(
            f"{name[:32]:<32} {totals.calls:>7} {totals.total_tokens:>12} "
            f"{totals.cost_usd:>12.6f}"
        )
    return 0


COMMANDS: Final[dict[str, Command]] = {"costs": cmd_costs}


def add_arguments(name: str, p: argparse.ArgumentParser) -> None:
    """Add the costs command's filters and grouping."""
    del name
    p.add_argument("--agent", default=None, help="only this agent's sessions")
    p.add_argument("--session", default=None, help="only sessions with this key")
    p.add_argument("--since", default=None, help="only calls at or after DATE (ISO)")
    p.add_argument("--by", default="model", choices=GROUPINGS, help="grouping")
    p.add_argument("--json", action="store_true", help="print JSON")
