"""TurnledgerMemoryService: ADK memories as memory events, searched through the projection."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from google.adk.events import Event
from google.genai import types

from turnledger.adapters.adk import TurnledgerSessionService
from turnledger.adapters.adk.memory import TurnledgerMemoryService
from turnledger.ledger.events import MemoryForgotten, MemoryStored
from turnledger.ledger.store import open_store
from turnledger.pipeline.cli import main

APP = "ops-app"


def says(author: str, text: str) -> Event:
    role = "user" if author == "user" else "model"
    return Event(
        author=author, content=types.Content(role=role, parts=[types.Part(text=text)])
    )


async def fill(path: str) -> None:
    sessions = TurnledgerSessionService(path)
    memory = TurnledgerMemoryService(path)
    session = await sessions.create_session(app_name=APP, user_id="u1", session_id="s1")
    for event in (
        says("user", "My favourite editor is Helix."),
        says("ops", "Noted: you use Helix."),
        says("user", "The release is due on Friday."),
    ):
        await sessions.append_event(session, event)
    other = await sessions.create_session(app_name=APP, user_id="u2", session_id="s9")
    await sessions.append_event(other, says("user", "I use Helix too, says u2."))
    stored = await sessions.get_session(app_name=APP, user_id="u1", session_id="s1")
    assert stored is not None
    await memory.add_session_to_memory(stored)
    await memory.add_session_to_memory(stored)  # again: nothing new to write
    second = await sessions.get_session(app_name=APP, user_id="u2", session_id="s9")
    assert second is not None
    await memory.add_session_to_memory(second)
    memory.close()
    sessions.close()


def test_search_finds_the_users_memories_only_and_delete_forgets(
    sqlite_path, capsys, tmp_path
):
    """Search is scoped to the user; delete appends memory.forgotten; rebuilds agree."""
    asyncio.run(fill(sqlite_path))

    async def search() -> None:
        memory = TurnledgerMemoryService(sqlite_path)  # rebuilt from the ledger
        found = await memory.search_memory(
            app_name=APP, user_id="u1", query="Helix editor"
        )
        texts = [m.content.parts[0].text for m in found.memories]
        assert texts
        assert all("u2" not in t for t in texts)
        assert any("favourite editor is Helix" in t for t in texts)
        target = next(
            m for m in found.memories if "favourite" in m.content.parts[0].text
        )
        await memory.delete_memory(app_name=APP, user_id="u1", memory_id=target.id)
        again = await memory.search_memory(
            app_name=APP, user_id="u1", query="favourite editor"
        )
        assert all("favourite" not in m.content.parts[0].text for m in again.memories)
        await memory.delete_memory(app_name=APP, user_id="u1", memory_id="no/such")
        memory.close()

    asyncio.run(search())
    with open_store(sqlite_path) as store:
        events = [r.event for r in store.iter_all()]
    assert sum(isinstance(e, MemoryStored) for e in events) == 4
    assert sum(isinstance(e, MemoryForgotten) for e in events) == 1
    assert (
        main(["--db", sqlite_path, "memory", "list", "--agent", "ops-app/u1", "--json"])
        == 0
    )
    listed = capsys.readouterr().out
    assert "release is due on Friday" in listed
    assert "favourite" not in listed
    out = str(tmp_path / "rebuilt")
    rebuild = ["memory", "rebuild", "--agent", "ops-app/u1", "--backend", "markdown"]
    assert main(["--db", sqlite_path, *rebuild, "--out", out]) == 0
    capsys.readouterr()
    rebuilt = " ".join(p.read_text() for p in Path(out).rglob("*.md"))
    assert "due on Friday" in rebuilt
    assert "favourite" not in rebuilt
    recall = ["memory", "recall", "--agent", "ops-app/u1", "Friday", "--json"]
    assert main(["--db", sqlite_path, *recall]) == 0
    recalled = [r["content"] for r in json.loads(capsys.readouterr().out)]
    # The match first; its thread neighbour (the message before it, the
    # forgotten one stepped over) is lent half its score.
    assert recalled == ["The release is due on Friday.", "Noted: you use Helix."]
