"""Property: any single change to any stored byte of a sealed ledger is detected."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.contracts.store_contract import new_stream, turn_events
from turnledger.ledger.seal import seal
from turnledger.ledger.store import open_store
from turnledger.ledger.verify import verify


def _sealed_ledger(folder: Path) -> Path:
    path = folder / "ledger.db"
    with open_store(str(path)) as store:
        for stream in (new_stream(), new_stream()):
            store.append(stream, turn_events("t1"), expected_version=0)
            store.append(stream, turn_events("t2"), expected_version=8)
        assert seal(store, key="k").ok
    raw = sqlite3.connect(path)
    for (name,) in raw.execute("SELECT name FROM sqlite_master WHERE type='trigger'"):
        raw.execute(f"DROP TRIGGER {name}")
    raw.commit()
    raw.close()
    return path


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    position=st.integers(1, 32),
    where=st.floats(0, 1, exclude_max=True),
    flip=st.integers(1, 255),
    column=st.sampled_from(["state", "topic", "originator_version"]),
)
def test_any_single_change_is_named(
    position: int, where: float, flip: int, column: str
) -> None:
    """Flip one byte of a row's state, change its type tag or its version: not ok."""
    with tempfile.TemporaryDirectory() as folder:
        path = _sealed_ledger(Path(folder))
        raw = sqlite3.connect(path)
        state, topic, version = raw.execute(
            "SELECT state, topic, originator_version FROM stored_events "
            "WHERE rowid = ?",
            (position,),
        ).fetchone()
        if column == "state":
            at = int(where * len(state))
            value: object = state[:at] + bytes([state[at] ^ flip]) + state[at + 1 :]
        elif column == "topic":
            value = "turn.completed" if topic != "turn.completed" else "turn.started"
        else:
            value = version + 100
        raw.execute(
            f"UPDATE stored_events SET {column} = ? WHERE rowid = ?", (value, position)
        )
        raw.commit()
        raw.close()
        with open_store(str(path)) as store:
            report = verify(store, seal_key="k")
        assert not report.ok
        assert position in {p.position for p in report.problems}
