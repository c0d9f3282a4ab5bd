"""Append goldens for event types/versions/field sets that have none yet.

A field added to a type (additive, same version) gets a golden of the new shape
beside the old one. Never rewrites a line.

Run: python -m tests.ledger.make_golden
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from uuid import UUID

import msgspec

from tests.ledger.examples import EXAMPLES
from turnledger.ledger.codec import MsgspecMapper, PendingEvent
from turnledger.ledger.events import tag_of

GOLDEN = Path(__file__).parent / "golden" / "events.jsonl"
STREAM = UUID("00000000-0000-4000-8000-000000000001")
AT_US = 1_780_000_000_123_456


def existing() -> set[tuple[str, int, frozenset[str]]]:
    if not GOLDEN.exists():
        return set()
    lines = [json.loads(line) for line in GOLDEN.read_text().splitlines() if line]
    return {
        (line["tag"], line["schema_version"], frozenset(line["event"]))
        for line in lines
    }


def main() -> None:
    have = existing()
    mapper = MsgspecMapper()
    with GOLDEN.open("a") as out:
        for version, event in enumerate(EXAMPLES, start=1):
            fields = frozenset(json.loads(msgspec.json.encode(event)))
            key = (tag_of(type(event)), type(event).SCHEMA_VERSION)
            if (*key, fields) in have:
                continue
            stored = mapper.to_stored_event(PendingEvent(STREAM, version, event, AT_US))
            line = {
                "tag": key[0],
                "schema_version": key[1],
                "frame": base64.b64encode(stored.state).decode(),
                "event": json.loads(msgspec.json.encode(event)),
            }
            out.write(json.dumps(line, ensure_ascii=False, sort_keys=True) + "\n")
            print("added", key)


if __name__ == "__main__":
    main()
