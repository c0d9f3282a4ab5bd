"""memory_export, memory_recall since/until, memory_store namespace/importance."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from tests.pipeline.test_tools import World


@pytest.fixture(name="world")
def _world(tmp_path):
    world = World(tmp_path)
    yield world
    world.close()


async def test_export_lists_visible_own_entries_as_json_lines(world):
    await world.call("memory_store", {"key": "a", "content": "core fact one"})
    await world.call(
        "memory_store",
        {"key": "b", "content": "chat here", "category": "conversation"},
    )
    await world.call(
        "memory_store",
        {"key": "c", "content": "other session", "category": "conversation"},
        session="s2",
    )
    await world.call("memory_store", {"key": "x", "content": "bob's"}, agent="bob")
    outcome = await world.call("memory_export", {})
    assert outcome.success
    rows = [json.loads(line) for line in outcome.output.splitlines()]
    assert [r["key"] for r in rows] == ["a", "b"]  # own, visible from s1
    assert set(rows[0]) == {
        "key",
        "content",
        "category",
        "session",
        "namespace",
        "importance",
        "created_at",
        "updated_at",
    }
    only_core = await world.call("memory_export", {"category": "core", "limit": 1})
    assert [json.loads(x)["key"] for x in only_core.output.splitlines()] == ["a"]
    later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    none = await world.call("memory_export", {"since": later})
    assert none.output == "No memories found."


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"since": "soon"}, "ISO 8601"),
        ({"limit": 0}, "between 1 and 1000"),
        ({"until": 5}, "string"),
    ],
)
async def test_export_bad_arguments_fail_cleanly(world, arguments, problem):
    outcome = await world.call("memory_export", arguments)
    assert not outcome.success
    assert problem in outcome.error


async def test_recall_time_window_and_store_namespace_importance(world):
    stored = await world.call(
        "memory_store",
        {
            "key": "k",
            "content": "deploy target",
            "namespace": "infra",
            "importance": 0.8,
        },
    )
    assert stored.success
    entry = world.memory.get("alice", "k")
    assert (entry.namespace, entry.importance) == ("infra", 0.8)
    past = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    future = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    found = await world.call("memory_recall", {"query": "deploy", "since": past})
    assert "deploy target" in found.output
    gone = await world.call("memory_recall", {"query": "deploy", "since": future})
    assert gone.output == "No memories found."
    early = await world.call("memory_recall", {"query": "deploy", "until": past})
    assert early.output == "No memories found."
    bad = await world.call(
        "memory_store", {"key": "z", "content": "x y", "importance": 2}
    )
    assert not bad.success
    assert "between 0 and 1" in bad.error
