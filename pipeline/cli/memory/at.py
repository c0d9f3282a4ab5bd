"""``memory list|recall|get --at``: what an agent's memory held at a past point.

Read from the ledger, not from the backend: the agent's memory stream folded up
to the position (:func:`turnledger.projections.memory_at.memory_as_of`). Every
key named by then is shown with its state then (``stored``, ``superseded``,
``forgotten``); a content sealed under a key since shredded reads as
``[forgotten]``. ``recall --at`` scores the entries stored then with the keyword
gate of today's SQLite and PostgreSQL stores, each word's weight counted on
those entries (:func:`~policies.relevance.scope_scores`), best first; it does
not run today's backend against the past.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from turnledger.ledger.ids import memory_stream_id
from turnledger.pipeline.cli.common import print_json
from turnledger.pipeline.memory import MemoryService
from turnledger.pipeline.timetravel.pointintime import resolve_global_at
from turnledger.policies.relevance import scope_scores
from turnledger.projections.memory.shred import FORGOTTEN, is_sealed
from turnledger.projections.memory_at import MemoryAt, memory_as_of


def memory_at(service: MemoryService, args: argparse.Namespace) -> int:
    """Answer ``memory list|recall|get --at`` from the ledger as of the point."""
    position = resolve_global_at(service.store, args.at)
    events = service.store.read_stream(memory_stream_id(args.agent))
    entries = list(memory_as_of(events, position).values())
    opener = _opener(service)
    if args.action == "get":
        entries = [e for e in entries if e.key == args.key]
        if not entries:
            print(f"No memory found with key: {args.key} at position {position}")
            return 1
    if args.action == "list":
        entries = [
            e
            for e in entries
            if args.session in (None, e.session) and args.category in (None, e.category)
        ]
    scores: dict[str, float | None] = {}
    if args.action == "recall":
        stored = [e for e in entries if e.status == "stored"]
        texts = [f"{e.key} {opener(e.content)}" for e in stored]
        scored = list(zip(scope_scores(args.query, texts), stored, strict=True))
        ranked = sorted((s for s in scored if s[0] > 0), key=lambda s: -s[0])
        entries = [e for _, e in ranked[: args.limit]]
        scores = {e.key: s for s, e in ranked}
    rows = [_row(e, opener, scores.get(e.key)) for e in entries]
    if args.json:
        print_json({"agent": args.agent, "at": position, "entries": rows})
        return 0
    print(f"memory of {args.agent} at position {position}: {len(rows)} entries")
    for row in rows:
        print(f"  {row['key']} [{row['status']}] {str(row['content'])[:200]}")
    return 0


def _row(
    entry: MemoryAt, opener: Callable[[str], str], score: float | None
) -> dict[str, object]:
    return {
        "key": entry.key,
        "content": opener(entry.content),
        "category": entry.category,
        "session": entry.session,
        "status": entry.status,
        "superseded_by": entry.superseded_by,
        "position": entry.position,
        "stored_at": entry.stored_at.isoformat(),
        "score": score,
    }


def _opener(service: MemoryService) -> Callable[[str], str]:
    """Open sealed contents with the key store; ``[forgotten]`` once shredded."""
    if service.keys_path.exists():
        return service.keys().open
    return lambda content: FORGOTTEN if is_sealed(content) else content
