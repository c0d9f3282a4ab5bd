"""The SQLite writer remembers heads between groups only while nobody else wrote.

Another connection (another store on the same file, or a raw sqlite3 client)
committing between two appends must make the writer read positions and heads
from the database again: no stale head, no reused position, the chain intact.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.contracts.store_contract import new_stream, turn_events
from turnledger.ledger.errors import ConcurrencyError
from turnledger.ledger.store import open_store
from turnledger.ledger.verify import verify


def test_another_store_moves_the_head(tmp_path: Path):
    """A stream advanced by another connection is seen, whatever was remembered."""
    path = str(tmp_path / "ledger.db")
    with open_store(path) as first, open_store(path) as second:
        stream = new_stream()
        first.append(stream, turn_events("t1"), expected_version=0)
        head = first.stream_version(stream)
        second.append(stream, turn_events("t2"), expected_version=head)
        with pytest.raises(ConcurrencyError):
            first.append(stream, turn_events("t3"), expected_version=head)
        moved = second.stream_version(stream)
        result = first.append(stream, turn_events("t3"), expected_version=moved)
        assert result.first_version == moved + 1
        assert result.positions[0] == first.max_position() - len(result.positions) + 1
        positions = [r.position for r in first.read_all(limit=1000)]
        assert positions == list(range(1, len(positions) + 1))
        assert verify(first).ok


def test_a_raw_client_row_is_not_overwritten(tmp_path: Path):
    """A row a raw client inserted takes a position the writer then skips."""
    path = str(tmp_path / "ledger.db")
    with open_store(path) as store:
        mine, other = new_stream(), new_stream()
        store.append(mine, turn_events("t1"), expected_version=0)
        before = store.max_position()
        raw = sqlite3.connect(path, isolation_level=None)
        try:
            raw.execute(
                "INSERT INTO stored_events VALUES (?,?,?,?)",
                (other.hex, 1, "turn.started", b"\x01" * 20),
            )
        finally:
            raw.close()
        result = store.append(
            mine, turn_events("t2"), expected_version=store.stream_version(mine)
        )
        assert result.positions[0] == before + 2
        assert len(store.read_stream(mine)) == 2 * len(turn_events("t1"))
        assert [p.kind for p in verify(store).problems if p.stream == mine] == []
