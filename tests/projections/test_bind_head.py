"""A derived store's ``bind`` reads the ledger's head when it runs, not before.

Another process appends to the ledger, then applies to the memory or views it
shares. A head read before ``bind`` (the wiring read ``max_position()`` and
passed the number) can be passed by such a write, and the store was emptied
for being "ahead" of a ledger that held everything it tracked: a four-process
PostgreSQL run lost the first facts of three agents so. Each binder now takes
``store.max_position`` itself and reads it after its own positions, under its
own lock (:data:`~projections.base.LedgerHead`); a number keeps its meaning.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import drop_schema, fresh_schema_url, require_postgres
from turnledger.ledger.events import SessionOpened
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import EventStore, open_store
from turnledger.projections.base import head_position
from turnledger.projections.memory.embedding.static import (
    DEFAULT_STATIC_DIMS,
    StaticEmbedder,
)
from turnledger.projections.memory.markdown import MarkdownMemory
from turnledger.projections.memory.postgres import PostgresMemory
from turnledger.projections.memory.qdrant import QdrantMemory
from turnledger.projections.memory.sqlite import SQLiteMemory
from turnledger.projections.views import SQLiteViewStore
from turnledger.projections.views.postgres import PostgresViewStore

WRITTEN = 3


def _sqlite_memory(tmp_path: Path, _url: str) -> Any:
    return SQLiteMemory(str(tmp_path / "m.db"))


def _postgres_memory(_tmp_path: Path, url: str) -> Any:
    return PostgresMemory(url)


def _sqlite_views(tmp_path: Path, _url: str) -> Any:
    return SQLiteViewStore(str(tmp_path / "v.db"))


def _postgres_views(_tmp_path: Path, url: str) -> Any:
    return PostgresViewStore(url)


def _qdrant(_tmp_path: Path, _url: str) -> Any:
    return QdrantMemory(embedder=StaticEmbedder(DEFAULT_STATIC_DIMS))


def _markdown(tmp_path: Path, _url: str) -> Any:
    return MarkdownMemory(tmp_path / "w", agent="ops")


STORES: dict[str, Callable[[Path, str], Any]] = {
    "sqlite memory": _sqlite_memory,
    "postgres memory": _postgres_memory,
    "sqlite views": _sqlite_views,
    "postgres views": _postgres_views,
    "qdrant": _qdrant,
    "markdown": _markdown,
}


@contextmanager
def _opened(kind: str, tmp_path: Path) -> Iterator[Any]:
    url = fresh_schema_url(require_postgres()) if kind.startswith("postgres") else ""
    target = STORES[kind](tmp_path, url)
    try:
        yield target
    finally:
        target.close()
        if url:
            drop_schema(url)


def _advance(target: Any, position: int) -> None:
    """Another process's write: the store now tracks ``position``."""
    if isinstance(target, (SQLiteViewStore, PostgresViewStore)):
        target.commit("p", {"k": 1}, position)
    else:
        target.apply([], position)


def _append(store: EventStore, count: int) -> None:
    for i in range(count):
        stream = session_stream_id("ops", f"s{i}")
        opened = SessionOpened(agent="ops", session_key=f"s{i}", channel="cli")
        store.append(stream, [opened], expected_version=0)


@pytest.mark.parametrize("kind", list(STORES))
def test_the_head_is_read_when_bind_runs(kind, tmp_path):
    with (
        open_store(str(tmp_path / "ledger.db")) as store,
        _opened(kind, tmp_path) as target,
    ):
        ledger = store.backend.ledger_id
        assert target.bind(ledger, store.max_position) is False  # empty, head 0
        head = store.max_position  # how to read it: nothing read yet
        _append(store, WRITTEN)  # another process appends...
        _advance(target, WRITTEN)  # ...and applies, before this bind runs
        assert target.bind(ledger, head) is False  # nothing emptied
        assert _position(target) == WRITTEN
        # a number read before those writes still means that head: past it
        if isinstance(target, MarkdownMemory):
            with pytest.raises(ValueError, match="past the ledger's end"):
                target.bind(ledger, WRITTEN - 1)
        else:
            assert target.bind(ledger, WRITTEN - 1) is True
            assert _position(target) == 0


def _position(target: Any) -> int:
    if isinstance(target, (SQLiteViewStore, PostgresViewStore)):
        return int(target.tracking("p"))
    return int(target.applied_position())


def test_a_head_is_a_number_or_how_to_read_it():
    assert head_position(7) == 7
    reads = iter([3, 9])
    assert head_position(lambda: next(reads)) == 3
    assert head_position(lambda: next(reads)) == 9
