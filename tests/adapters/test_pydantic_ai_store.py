"""TurnledgerConversationStore: the ConversationStore contract, on the reference and on ours.

pydantic-ai's repository has no store tests reachable at the pinned version (the
snapshot reachable here is v2.33, before ``conversation_store`` existed), so these
tests state the contract the installed 2.68 module documents, and run each on
pydantic-ai's own ``InMemoryConversationStore`` (the reference) and on ours.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, BinaryContent, ModelRetry
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import (
    ConversationConflict,
    ConversationStore,
    InMemoryConversationStore,
)
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from turnledger.adapters.pydantic_ai import TurnledgerConversationStore
from turnledger.ledger.events import ItemRecorded, ItemsRemoved
from turnledger.ledger.store import open_store
from turnledger.pipeline.cli import main
from turnledger.pipeline.formats.pydantic_ai import parse_pydantic_ai
from turnledger.pipeline.sessions import list_sessions, load_history


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Call the weather tool once per question, then answer with its result."""
    last = messages[-1].parts[-1]
    if last.part_kind == "tool-return":
        return ModelResponse(parts=[TextPart(f"Answer: {last.content}")])
    return ModelResponse(parts=[ToolCallPart("weather", {"city": "Paris"})])


def make_agent() -> Agent[None, str]:
    agent = Agent(FunctionModel(scripted))

    @agent.tool_plain
    def weather(city: str) -> str:
        """Return the weather of a city."""
        return f"sunny in {city}"

    return agent


@pytest.fixture(name="store", params=["reference", "turnledger"])
def _store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[ConversationStore]:
    if request.param == "reference":
        yield InMemoryConversationStore()
        return
    store = TurnledgerConversationStore(str(tmp_path / "l.db"))
    yield store
    store.close()


async def turn(
    store: ConversationStore, cid: str, prompt: str, **kw: Any
) -> Conversation:
    conversation = await store.load(cid, **kw) or Conversation(conversation_id=cid)
    result = await make_agent().run(prompt, conversation=conversation)
    await store.save(result, **kw)
    return result.conversation


def test_runs_are_saved_and_load_back_equal(store):
    """Agent.run with tools; each save appends the new messages; load gives them back."""

    async def scenario() -> None:
        first = await turn(store, "c", "Weather?")
        second = await turn(store, "c", "Again?")
        loaded = await store.load("c")
        assert loaded is not None
        assert loaded.messages == second.messages
        assert len(loaded.messages) == 8
        assert loaded.messages[:4] == first.messages
        assert loaded.revision == second.revision
        window = await store.load("c", limit=3)
        assert window is not None
        assert window.messages == loaded.messages[-3:]

    asyncio.run(scenario())


def test_a_stale_revision_is_a_conflict_and_writes_nothing(store):
    """Two writers from one revision: the second save raises ConversationConflict."""

    async def scenario() -> None:
        await turn(store, "c", "Weather?")
        one = await store.load("c")
        two = await store.load("c")
        assert one is not None
        assert two is not None
        agent = make_agent()
        await store.save(await agent.run("from one", conversation=one))
        late = await agent.run("from two", conversation=two)
        with pytest.raises(ConversationConflict):
            await store.save(late)
        stored = await store.load("c")
        assert stored is not None
        assert "from two" not in repr(stored.messages)
        with pytest.raises(ConversationConflict):
            await store.save(Conversation(conversation_id="c"))

    asyncio.run(scenario())


def test_fork_shares_the_history_and_forks_of_forks_work(store):
    """A fork keeps a prefix of the source; the source carries on unchanged."""

    async def scenario() -> None:
        await turn(store, "c", "Weather?")
        await turn(store, "c", "Again?")
        source = await store.load("c")
        assert source is not None
        fork = await store.fork("c", at=4, new_conversation_id="f")
        assert fork.messages == source.messages[:4]
        record = await store.read_record("f")
        assert record is not None
        assert record.forked_from == "c"
        await turn(store, "f", "Forked question?")
        again = await store.fork("f", new_conversation_id="ff")
        loaded_fork = await store.load("f")
        assert loaded_fork is not None
        assert again.messages == loaded_fork.messages
        unchanged = await store.load("c")
        assert unchanged is not None
        assert unchanged.messages == source.messages

    asyncio.run(scenario())


def test_branch_moves_the_head_and_can_come_back(store):
    """branch(at=) keeps a prefix, lists the branch it left, and from_entry returns to it."""

    async def scenario() -> None:
        await turn(store, "c", "Weather?")
        entries = await store.load_entries("c")
        assert entries is not None
        loaded = await store.load("c")
        assert loaded is not None
        branched = await store.branch("c", at=1, expected_revision=loaded.revision)
        assert branched.messages == loaded.messages[:1]
        record = await store.read_record("c")
        assert record is not None
        assert record.branches == [entries[-1].id]
        back = await store.branch(
            "c", from_entry=entries[-1].id, expected_revision=branched.revision
        )
        assert back.messages == loaded.messages

    asyncio.run(scenario())


def test_scope_and_listing_and_delete(store):
    """Scoped conversations stay with their owner; a delete no longer loads or lists."""

    async def scenario() -> None:
        await turn(store, "a", "Weather?", scope="alice")
        await turn(store, "b", "Weather?", scope="bob")
        assert await store.load("a", scope="bob") is None
        listed = await store.list_conversations(scope="alice")
        assert [r.conversation_id for r in listed] == ["a"]
        every = await store.list_conversations()
        assert [r.conversation_id for r in every] == ["b", "a"]  # newest first
        old = await store.read_record("a")
        assert old is not None
        await store.delete("a", scope="bob")  # another scope: left as it is
        assert await store.load("a") is not None
        await store.delete("a")
        assert await store.load("a") is None
        assert [r.conversation_id for r in await store.list_conversations()] == ["b"]
        fresh = await turn(store, "a", "Weather?")
        assert fresh.revision != old.revision

    asyncio.run(scenario())


def test_the_ledger_keeps_what_the_store_deleted_and_forks_copy_nothing(
    tmp_path, capsys
):
    """Entries are events: a fork writes one record, a delete erases nothing; CLI reads it."""
    path = str(tmp_path / "l.db")

    async def scenario() -> None:
        store = TurnledgerConversationStore(path)
        await turn(store, "c", "Weather?")
        with open_store(path) as ledger:
            before = sum(isinstance(r.event, ItemRecorded) for r in ledger.iter_all())
        await store.fork("c", new_conversation_id="f")
        with open_store(path) as ledger:
            after = sum(isinstance(r.event, ItemRecorded) for r in ledger.iter_all())
        assert after == before + 1  # one record, no entry copied
        fresh = TurnledgerConversationStore(path)  # durable: another instance reads it
        loaded = await fresh.load("f")
        assert loaded is not None
        assert len(loaded.messages) == 4
        fresh.close()
        store.close()

    asyncio.run(scenario())
    assert main(["--db", path, "audit", "c", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["tool_calls"], report["tool_results"]) == (1, 1)
    assert main(["--db", path, "history", "c"]) == 0
    assert "sunny in Paris" in capsys.readouterr().out
    for fmt in ("openai-chat", "openai-responses", "anthropic"):
        assert main(["--db", path, "export", "c", "--format", fmt]) == 0
        assert "sunny in Paris" in capsys.readouterr().out
    assert main(["--db", path, "replay", "c", "--json"]) == 0
    assert main(["--db", path, "verify"]) == 0
    capsys.readouterr()

    async def delete() -> None:
        store = TurnledgerConversationStore(path)
        await store.delete("c")
        assert await store.load("c") is None
        store.close()

    asyncio.run(delete())
    with open_store(path) as ledger:
        events = [r.event for r in ledger.iter_all()]
    assert any(getattr(e, "user_input", "") == "Weather?" for e in events)
    assert [e.reason for e in events if isinstance(e, ItemsRemoved)] == ["delete"]


def test_a_branch_leaves_the_history_projection(tmp_path, capsys):
    """What a branch leaves is out of `turnledger history`; what it keeps stays."""
    path = str(tmp_path / "l.db")

    async def scenario() -> None:
        store = TurnledgerConversationStore(path)
        await turn(store, "c", "First question?")
        loaded = await store.load("c")
        assert loaded is not None
        branched = await store.branch("c", at=0, expected_revision=loaded.revision)
        result = await make_agent().run("Second question?", conversation=branched)
        await store.save(result)
        store.close()

    asyncio.run(scenario())
    assert main(["--db", path, "history", "c"]) == 0
    shown = capsys.readouterr().out
    assert "Second question?" in shown
    assert "First question?" not in shown
    assert main(["--db", path, "audit", "c"]) == 0
    capsys.readouterr()


@pytest.mark.postgres
def test_store_on_postgres(postgres_url):
    """The same store on the PostgreSQL ledger."""

    async def scenario() -> None:
        store = TurnledgerConversationStore(postgres_url)
        saved = await turn(store, "c", "Weather?")
        loaded = await store.load("c")
        assert loaded is not None
        assert loaded.messages == saved.messages
        store.close()

    asyncio.run(scenario())


def test_a_tool_asking_for_a_retry_is_an_error_result(tmp_path):
    """A tool that raises ``ModelRetry`` returns ``outcome='retried'``: an error.

    Pydantic AI sends it to the model as an error (its ``ERROR_OUTCOMES``);
    the ledger's result says so, as its importer of the same messages does.
    """
    path = str(tmp_path / "l.db")

    def again(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        """As :func:`scripted`, calling the tool again after an error."""
        last = messages[-1].parts[-1]
        if last.part_kind == "tool-return" and last.outcome == "retried":
            return ModelResponse(parts=[ToolCallPart("weather", {"city": "Paris"})])
        return scripted(messages, info)

    agent = Agent(FunctionModel(again))
    tries: list[str] = []

    @agent.tool_plain
    def weather(city: str) -> str:
        """Return the weather of a city (not found the first time)."""
        tries.append(city)
        if len(tries) == 1:
            raise ModelRetry(f"no station near {city} yet")
        return f"sunny in {city}"

    async def scenario() -> list[ModelMessage]:
        store = TurnledgerConversationStore(path)
        result = await agent.run(
            "Weather?", conversation=Conversation(conversation_id="c")
        )
        await store.save(result)
        store.close()
        return result.all_messages()

    messages = asyncio.run(scenario())
    returns = [p for m in messages for p in m.parts if p.part_kind == "tool-return"]
    assert [r.outcome for r in returns] == ["retried", "success"]
    ledger = open_store(path)
    try:
        (session,) = list_sessions(ledger)
        history = load_history(ledger, session.stream_id).entries
        results = [r for e in history for r in e.message.tool_results]
    finally:
        ledger.close()
    assert [(r.is_error, r.content) for r in results] == [
        (True, f"Error: {returns[0].model_response_str()}"),
        (False, "sunny in Paris"),
    ]
    imported = parse_pydantic_ai(
        ModelMessagesTypeAdapter.dump_json(messages), name="run.json"
    )
    carried = [r for m in imported.conversations[0].messages for r in m.tool_results]
    assert [r.is_error for r in carried] == [True, False]


def test_a_prompt_with_an_image_is_its_texts_and_loads_back_whole(tmp_path):
    """The history holds the prompt's texts (as the importer reads them); the
    image is not text, and the conversation loads back equal, image included."""
    path = str(tmp_path / "l.db")
    image = BinaryContent(data=b"\x89PNG not really", media_type="image/png")

    async def scenario() -> tuple[list[ModelMessage], list[ModelMessage]]:
        store = TurnledgerConversationStore(path)
        conversation = Conversation(conversation_id="pic")
        result = await make_agent().run(
            ["What is in", image, "this picture?"], conversation=conversation
        )
        await store.save(result)
        loaded = await store.load("pic")
        store.close()
        assert loaded is not None
        return result.all_messages(), loaded.messages

    sent, loaded = asyncio.run(scenario())
    # As Pydantic AI serialises them (reading it back narrows the image's
    # class to BinaryImage: the same bytes and media type).
    dump = ModelMessagesTypeAdapter.dump_json
    assert dump(loaded) == dump(sent)
    assert b"this picture?" in dump(loaded)
    ledger = open_store(path)
    try:
        (session,) = list_sessions(ledger)
        history = load_history(ledger, session.stream_id).entries
    finally:
        ledger.close()
    assert history[0].message.text == "What is in\nthis picture?"
    imported = parse_pydantic_ai(ModelMessagesTypeAdapter.dump_json(sent), name="r")
    user = next(m for m in imported.conversations[0].messages if m.role == "user")
    assert user.text == history[0].message.text
