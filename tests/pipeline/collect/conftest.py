"""The collect tests' ledgers: each test runs on SQLite and on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from turnledger.ledger.store import EventStore, open_store


class Ledger(NamedTuple):
    """An open ledger and the URL the command line reaches it by."""

    store: EventStore
    url: str


@pytest.fixture(name="ledger", params=["sqlite", "postgresql"])
def _ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Ledger]:
    if request.param == "sqlite":
        url = str(tmp_path / "ledger.db")
    else:
        url = request.getfixturevalue("postgres_url")
    store = open_store(url)
    try:
        yield Ledger(store, url)
    finally:
        store.close()
