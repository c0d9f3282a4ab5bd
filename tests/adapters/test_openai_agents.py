"""TurnledgerSession: lossless items, removals as events, pairing-safe limits, a real Runner."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from agents import Agent, Runner, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from turnledger.adapters.openai_agents import TurnledgerSession
from turnledger.adapters.openai_agents.items import ItemError
from turnledger.ledger.events import ItemRecorded, ItemsRemoved
from turnledger.ledger.store import open_store
from turnledger.ledger.verify import verify
from turnledger.pipeline.cli import main
from turnledger.pipeline.sessions import list_sessions, load_history

ids = st.text("abcdef0123456789", min_size=1, max_size=6)
texts = st.text(max_size=30)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | texts,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
extras = st.dictionaries(
    st.sampled_from(["id", "status", "namespace", "x_meta"]), json_values, max_size=2
)


@st.composite
def items(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A random session: users, assistants, calls and outputs, odd shapes too."""
    out: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(
            st.sampled_from(
                [
                    "user",
                    "user_parts",
                    "assistant",
                    "assistant_str",
                    "call",
                    "output",
                    "output_list",
                    "reasoning",
                    "system",
                ]
            )
        )
        extra = draw(extras)
        call_id = draw(ids)
        item: dict[str, Any]
        if kind == "user":
            item = {"role": "user", "content": draw(texts)}
        elif kind == "user_parts":
            parts = [{"type": "input_text", "text": draw(texts)}]
            item = {"type": "message", "role": "user", "content": parts}
        elif kind == "assistant":
            part = {"type": "output_text", "text": draw(texts), "annotations": []}
            item = {"type": "message", "role": "assistant", "content": [part]}
        elif kind == "assistant_str":
            item = {"role": "assistant", "content": draw(texts)}
        elif kind == "call":
            item = {
                "type": "function_call",
                "call_id": call_id,
                "name": draw(st.sampled_from(["weather", "add", ""])),
                "arguments": draw(st.sampled_from(["{}", '{"a":1}', ""])),
            }
        elif kind == "output":
            item = {"type": "function_call_output", "call_id": call_id}
            item["output"] = draw(texts)
        elif kind == "output_list":
            item = {"type": "function_call_output", "call_id": call_id}
            item["output"] = [{"type": "input_text", "text": draw(texts)}]
        elif kind == "reasoning":
            item = {"type": "reasoning", "id": "rs_" + call_id, "summary": []}
        else:
            item = {"role": draw(st.sampled_from(["system", "developer"]))}
            item["content"] = draw(texts)
        out.append({**item, **extra} if kind != "user" else item)
    return out


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=st.lists(items(), min_size=1, max_size=3))
def test_items_come_back_exactly(tmp_path_factory, batches):
    """Whatever was added is given back equal, by this and by a fresh instance."""
    path = str(tmp_path_factory.mktemp("oa") / "l.db")

    async def scenario() -> None:
        session = TurnledgerSession("s", path)
        for batch in batches:
            await session.add_items(batch)  # type: ignore[arg-type]
        expected = [item for batch in batches for item in batch]
        assert await session.get_items() == expected
        fresh = TurnledgerSession("s", path)
        assert await fresh.get_items() == expected
        if expected:
            assert await fresh.pop_item() == expected[-1]
            assert await session.get_items() == expected[:-1]
        session.close()
        fresh.close()

    _run(scenario())


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(st.tuples(st.booleans(), st.integers(0, 3)), max_size=12),
    limit=st.integers(0, 12),
)
def test_limit_never_returns_an_output_without_its_call(tmp_path_factory, steps, limit):
    """get_items(limit) is the newest items minus outputs whose call is older."""
    path = str(tmp_path_factory.mktemp("oa") / "l.db")
    history: list[dict[str, Any]] = []
    for is_call, n in steps:
        if is_call:
            history.append(
                {
                    "type": "function_call",
                    "call_id": f"c{n}",
                    "name": "f",
                    "arguments": "",
                }
            )
        else:
            history.append(
                {"type": "function_call_output", "call_id": f"c{n}", "output": "o"}
            )

    async def scenario() -> list[dict[str, Any]]:
        session = TurnledgerSession("s", path)
        await session.add_items(history)  # type: ignore[arg-type]
        got = await session.get_items(limit=limit)
        session.close()
        return got  # type: ignore[return-value]

    got = _run(scenario())
    window = history[-limit:] if limit else []
    if len(window) == len(history):
        assert got == window  # nothing cut: the history as recorded
        return
    seen: set[str] = set()
    kept = []
    for item in window:
        if item["type"] == "function_call":
            seen.add(item["call_id"])
        elif item["call_id"] not in seen:
            continue
        kept.append(item)
    assert got == kept


def test_pop_and_clear_are_events_the_ledger_keeps(sqlite_path, capsys):
    """Removals append items.removed; history drops the items; the ledger keeps all."""

    async def scenario() -> None:
        session = TurnledgerSession("keep", sqlite_path)
        await session.add_items(
            [
                {"role": "user", "content": "first"},
                {"role": "assistant", "content": "answer"},
                {"role": "user", "content": "second"},
            ]
        )
        assert (await session.pop_item()) == {"role": "user", "content": "second"}
        session.close()

    _run(scenario())
    assert main(["--db", sqlite_path, "history", "keep", "--json"]) == 0
    shown = capsys.readouterr().out
    assert "first" in shown
    assert "second" not in shown

    async def clear() -> None:
        session = TurnledgerSession("keep", sqlite_path)
        await session.clear_session()
        assert await session.get_items() == []
        session.close()

    _run(clear())
    assert main(["--db", sqlite_path, "history", "keep", "--json"]) == 0
    shown = capsys.readouterr().out
    assert "first" not in shown
    with open_store(sqlite_path) as store:
        events = [r.event for r in store.iter_all()]
        removed = [e for e in events if isinstance(e, ItemsRemoved)]
        assert [e.reason for e in removed] == ["pop_item", "clear_session"]
        texts = json.dumps([getattr(e, "user_input", "") for e in events])
        assert "second" in texts  # popped, yet still in the ledger
        assert verify(store).ok


def test_pop_of_one_of_parallel_calls_keeps_the_other(sqlite_path):
    """Popping the last call of a message re-records the message and its other call."""
    batch = [
        {"type": "message", "role": "assistant", "content": "checking", "id": "m"},
        {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"},
        {"type": "function_call", "call_id": "b", "name": "f", "arguments": "{}"},
    ]

    async def scenario() -> None:
        session = TurnledgerSession("par", sqlite_path)
        await session.add_items(batch)  # type: ignore[arg-type]
        assert await session.pop_item() == batch[-1]
        assert await session.get_items() == batch[:-1]
        other = TurnledgerSession("par", sqlite_path)
        assert await other.get_items() == batch[:-1]
        other.close()
        session.close()

    _run(scenario())


def test_unmodelled_fields_are_kept_in_item_recorded(sqlite_path):
    """An id or status lands in item.recorded; a plain user message needs none."""

    async def scenario() -> None:
        session = TurnledgerSession("x", sqlite_path)
        await session.add_items([{"role": "user", "content": "hi"}])
        await session.add_items(
            [
                {
                    "type": "function_call",
                    "call_id": "c",
                    "name": "f",
                    "arguments": "",
                    "id": "fc_9",
                }
            ]
        )
        session.close()

    _run(scenario())
    with open_store(sqlite_path) as store:
        extras = [
            r.event for r in store.iter_all() if isinstance(r.event, ItemRecorded)
        ]
    assert len(extras) == 1
    assert "fc_9" in extras[0].fields


def test_an_image_in_a_message_is_not_text_and_comes_back_whole(sqlite_path):
    """The history's text is the message's text parts; the item comes back whole."""
    picture = {
        "role": "user",
        "content": [
            {"type": "input_text", "text": "What is in"},
            {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0K"},
            {"type": "input_text", "text": "this picture?"},
        ],
    }

    async def scenario() -> list[Any]:
        session = TurnledgerSession("pic", sqlite_path)
        await session.add_items([picture])  # type: ignore[list-item]
        session.close()
        return await TurnledgerSession("pic", sqlite_path).get_items()

    assert _run(scenario()) == [picture]
    with open_store(sqlite_path) as store:
        (session,) = list_sessions(store)
        history = load_history(store, session.stream_id).entries
    assert [e.message.text for e in history] == ["What is in\nthis picture?"]


def test_bad_items_and_names_are_refused_before_writing(sqlite_path):
    """A non-JSON item or an empty id fails with a typed error; nothing is written."""
    with pytest.raises(ValueError, match="non-empty session id"):
        TurnledgerSession("", sqlite_path)

    async def scenario() -> None:
        session = TurnledgerSession("x", sqlite_path)
        with pytest.raises(ItemError, match="JSON value"):
            await session.add_items([{"role": "user", "content": object()}])  # type: ignore[list-item]
        with pytest.raises(ItemError, match="JSON object"):
            await session.add_items(["text"])  # type: ignore[list-item]
        assert await session.get_items() == []
        session.close()
        with pytest.raises(RuntimeError, match="closed"):
            await session.get_items()

    _run(scenario())
    with open_store(sqlite_path) as store:
        assert store.count() == 0


def test_cancelled_add_is_durable_and_the_cancellation_is_raised(sqlite_path):
    """Cancelling add_items mid-write raises CancelledError after the write lands."""

    async def scenario() -> None:
        session = TurnledgerSession("c", sqlite_path)
        task = asyncio.create_task(
            session.add_items([{"role": "user", "content": "x"}])
        )
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await session.get_items() == [{"role": "user", "content": "x"}]
        session.close()

    _run(scenario())


def test_two_instances_interleave_without_losing_items(sqlite_path):
    """Writers on a stale view are refused by the stream version and retry."""

    async def scenario() -> None:
        one = TurnledgerSession("shared", sqlite_path)
        two = TurnledgerSession("shared", sqlite_path)
        await one.get_items()
        await two.get_items()
        await asyncio.gather(
            *(
                (one if i % 2 else two).add_items(
                    [{"role": "user", "content": f"m{i}"}]
                )
                for i in range(20)
            )
        )
        contents = sorted(i["content"] for i in await one.get_items())  # type: ignore[typeddict-item]
        assert contents == sorted(f"m{i}" for i in range(20))
        one.close()
        two.close()

    _run(scenario())


def test_events_brought_by_a_read_and_a_write_fold_once(sqlite_path):
    """A read that returns what this instance's write already folded adds nothing.

    (A get_items whose read lands after a concurrent add_items of the same
    instance brings back events that add_items folded itself.)
    """

    async def scenario() -> None:
        session = TurnledgerSession("race", sqlite_path)
        await session.add_items([{"role": "user", "content": "m0"}])
        await session.add_items([{"role": "assistant", "content": "a0"}])
        again = session._handle.store.read_stream(session.stream_id)
        session._fold(again)  # what a late read would fold
        assert await session.get_items() == [
            {"role": "user", "content": "m0"},
            {"role": "assistant", "content": "a0"},
        ]
        session.close()

    _run(scenario())


@function_tool
def weather(city: str) -> str:
    """Return the weather of a city."""
    return f"sunny in {city}"


def test_runner_run_records_a_session_the_cli_understands(sqlite_path, capsys):
    """A real Runner.run with function tools; audit, history, export, replay work."""
    model = ScriptedModel()
    model.enqueue(
        [
            assistant_message("Checking both."),
            function_call("weather", {"city": "Paris"}, call_id="call_1"),
            function_call("weather", {"city": "Rome"}, call_id="call_2"),
        ]
    )
    model.enqueue([assistant_message("Sunny in both.")])
    model.enqueue([assistant_message("You asked about Paris and Rome.")])
    agent = Agent(name="ops", model=model, tools=[weather])

    async def scenario() -> list[Any]:
        session = TurnledgerSession("run-1", sqlite_path)
        first = await Runner.run(agent, "Weather in Paris and Rome?", session=session)
        assert first.final_output == "Sunny in both."
        second = await Runner.run(agent, "What did I ask?", session=session)
        assert second.final_output == "You asked about Paris and Rome."
        items = await session.get_items()
        session.close()
        return items

    items = _run(scenario())
    assert [i.get("type", "message") for i in items] == [
        "message",
        "message",
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
        "message",
        "message",
        "message",
    ]
    # The second model call saw the whole first turn, from the ledger.
    assert any(
        isinstance(i, dict) and i.get("output") == "sunny in Rome"
        for i in model.calls[-1].input
    )
    assert main(["--db", sqlite_path, "audit", "run-1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["tool_calls"], report["tool_results"]) == (2, 2)
    assert main(["--db", sqlite_path, "history", "run-1"]) == 0
    assert "sunny in Rome" in capsys.readouterr().out
    for fmt in ("openai-chat", "openai-responses", "anthropic"):
        assert main(["--db", sqlite_path, "export", "run-1", "--format", fmt]) == 0
        assert "call_2" in capsys.readouterr().out
    assert main(["--db", sqlite_path, "replay", "run-1", "--json"]) == 0
    capsys.readouterr()
    assert main(["--db", sqlite_path, "verify"]) == 0


@pytest.mark.postgres
def test_session_on_postgres(postgres_url):
    """The same session on the PostgreSQL ledger."""

    async def scenario() -> None:
        session = TurnledgerSession("pg", postgres_url)
        batch = [
            {"role": "user", "content": "hi"},
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c", "output": "done"},
        ]
        await session.add_items(batch)  # type: ignore[arg-type]
        other = TurnledgerSession("pg", postgres_url)
        assert await other.get_items() == batch
        other.close()
        assert await session.pop_item() == batch[-1]
        assert await session.get_items() == batch[:-1]
        session.close()

    _run(scenario())
