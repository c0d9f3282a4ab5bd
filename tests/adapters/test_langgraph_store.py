"""TurnledgerStore: LangGraph's BaseStore over the long-term memory projection."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from langgraph.store.base import GetOp, PutOp, SearchOp

from turnledger.adapters.langgraph import TurnledgerStore
from turnledger.ledger.events import MemoryForgotten, MemoryStored
from turnledger.ledger.ids import memory_stream_id
from turnledger.ledger.store import open_store
from turnledger.pipeline.cli import main

NS = ("memories", "user-1")


def fill(store: TurnledgerStore) -> None:
    store.put(NS, "editor", {"content": "Helix is my editor", "kind": "pref"})
    store.put(NS, "release", {"content": "The release is on Friday", "kind": "fact"})
    store.put(("memories", "user-2"), "editor", {"content": "Vim forever"})
    store.put(("notes",), "n1", {"content": "a note", "rank": 3})


def test_put_get_search_list_delete(sqlite_path: str, tmp_path: Path) -> None:
    """Items round-trip; search ranks by the backend's recall; deletes are events."""
    with TurnledgerStore.from_url(
        sqlite_path, memory_path=tmp_path / "m.sqlite", agent="lg"
    ) as store:
        fill(store)
        item = store.get(NS, "editor")
        assert item is not None
        assert item.value == {"content": "Helix is my editor", "kind": "pref"}
        assert (tuple(item.namespace), item.key) == (NS, "editor")
        assert store.get(NS, "missing") is None
        assert store.get(("memories", "user-2"), "editor").value == {  # type: ignore[union-attr]
            "content": "Vim forever"
        }
        hits = store.search(NS, query="helix editor")
        assert [h.key for h in hits][:1] == ["editor"]
        assert hits[0].score is not None
        assert [
            h.key for h in store.search(("memories",), filter={"kind": "fact"})
        ] == ["release"]
        assert [
            h.key for h in store.search(("notes",), filter={"rank": {"$gte": 3}})
        ] == ["n1"]
        assert store.search(("notes",), filter={"rank": {"$gt": 3}}) == []
        assert store.list_namespaces(prefix=("memories",)) == [
            ("memories", "user-1"),
            ("memories", "user-2"),
        ]
        assert store.list_namespaces(max_depth=1) == [("memories",), ("notes",)]
        store.delete(NS, "editor")
        assert store.get(NS, "editor") is None
    with open_store(sqlite_path) as ledger:
        events = [r.event for r in ledger.read_stream(memory_stream_id("lg"))]
    assert sum(isinstance(e, MemoryStored) for e in events) == 4
    assert [e.key for e in events if isinstance(e, MemoryForgotten)] == [
        "memories.user-1/editor"
    ]


def test_batch_reads_see_earlier_puts_and_a_new_view_rebuilds(
    sqlite_path: str, tmp_path: Path
) -> None:
    """A batch runs in order; a store with an empty view sees what the ledger has."""
    with TurnledgerStore.from_url(
        sqlite_path, memory_path=tmp_path / "a.sqlite", agent="lg"
    ) as store:
        results = store.batch(
            [
                PutOp(NS, "k", {"content": "one"}),
                GetOp(NS, "k"),
                PutOp(NS, "k", {"content": "two"}),
                GetOp(NS, "k"),
            ]
        )
        assert results[1].value == {"content": "one"}  # type: ignore[union-attr]
        assert results[3].value == {"content": "two"}  # type: ignore[union-attr]
    with TurnledgerStore.from_url(
        sqlite_path, memory_path=tmp_path / "b.sqlite", agent="lg"
    ) as fresh:
        found = asyncio.run(fresh.abatch([SearchOp(NS, query="two")]))
        assert [i.value for i in found[0]] == [{"content": "two"}]  # type: ignore[union-attr]


def test_refuses_what_it_cannot_keep(sqlite_path: str, tmp_path: Path) -> None:
    """A non-JSON value or a dotted label is refused; nothing is written."""
    with TurnledgerStore.from_url(
        sqlite_path, memory_path=tmp_path / "m.sqlite", agent="lg"
    ) as store:
        with pytest.raises(TypeError, match="Expected a JSON value"):
            store.put(NS, "k", {"when": object()})
        with pytest.raises(ValueError, match="namespace"):
            store.batch([PutOp(("a.b",), "k", {"x": 1})])
        assert store.store.stream_version(memory_stream_id("lg")) == 0


def test_cli_lists_recalls_and_rebuilds_what_it_wrote(
    capsys: pytest.CaptureFixture[str], sqlite_path: str, tmp_path: Path
) -> None:
    """turnledger memory list/recall/rebuild read the store's memory events."""
    with TurnledgerStore.from_url(
        sqlite_path, memory_path=tmp_path / "m.sqlite", agent="lg"
    ) as store:
        fill(store)
    assert main(["--db", sqlite_path, "memory", "list", "--agent", "lg", "--json"]) == 0
    listed = capsys.readouterr().out
    assert "memories.user-1/editor" in listed
    assert "Helix is my editor" in listed
    code = main(
        ["--db", sqlite_path, "memory", "recall", "--agent", "lg", "helix", "--json"]
    )
    assert code == 0
    assert "Helix is my editor" in capsys.readouterr().out
    out = tmp_path / "rebuilt"
    for backend in ("sqlite", "markdown"):
        code = main(
            [
                "--db",
                sqlite_path,
                "memory",
                "rebuild",
                "--agent",
                "lg",
                "--backend",
                backend,
                "--out",
                str(out / backend),
                "--json",
            ]
        )
        assert code == 0, capsys.readouterr().err
        report = json.loads(capsys.readouterr().out)
        assert report["entries"] == 4


@pytest.mark.postgres
def test_on_postgres(postgres_url: str, tmp_path: Path) -> None:
    """The same store on a PostgreSQL ledger."""
    with TurnledgerStore.from_url(
        postgres_url, memory_path=tmp_path / "m.sqlite", agent="lg"
    ) as store:
        fill(store)
        assert store.get(NS, "release").value["content"] == "The release is on Friday"  # type: ignore[union-attr]
        assert [h.key for h in store.search(NS, query="friday release")][:1] == [
            "release"
        ]


def test_langmem_memory_tool_calls(sqlite_path: str, tmp_path: Path) -> None:
    """The store calls LangMem 0.0.30's manage/search memory tools make, as they make
    them (``langmem/knowledge/tools.py``: aput with a uuid key and ``{"content": ...}``,
    asearch with query/filter/limit/offset, ``item.dict()``, adelete)."""
    import uuid

    async def go(store: TurnledgerStore) -> None:
        namespace = ("memories", "user-7")
        first, second = uuid.uuid4(), uuid.uuid4()
        await store.aput(
            namespace, key=str(first), value={"content": "Team prefers Python"}
        )
        await store.aput(
            namespace, key=str(second), value={"content": "Deploys on Fridays"}
        )
        await store.aput(
            namespace, key=str(first), value={"content": "Team prefers Go"}
        )
        found = await store.asearch(
            namespace, query="team prefers", filter=None, limit=10, offset=0
        )
        dumped = [m.dict() for m in found]
        assert dumped[0]["key"] == str(first)
        assert dumped[0]["value"] == {"content": "Team prefers Go"}
        assert {d["key"] for d in dumped} <= {str(first), str(second)}
        await store.adelete(namespace, key=str(second))
        rest = await store.asearch(namespace, query="fridays", limit=10, offset=0)
        assert [m.key for m in rest] == []

    with TurnledgerStore.from_url(
        sqlite_path, memory_path=tmp_path / "m.sqlite", agent="lg"
    ) as store:
        asyncio.run(go(store))
