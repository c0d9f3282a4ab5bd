"""Issue #11 item 4 (one format of it): OpenAI Agents SDK run state and session items.

Public files: the SDK's own run-state fixtures (``tests/fixtures/openai_agents``,
MIT, with ``PROVENANCE.md``) and a real ``SQLiteSession`` database of session
items from a public project (``tests/fixtures/transcripts/openai-agents/
deep-search-market-agent``, MIT, its ``PROVENANCE.md`` beside it): counted by the
documented rule, and imported then exported in every format without losing a
call or a result. Real framework code: a run of the SDK's ``Runner`` (its model
is a scripted implementation of the SDK's ``Model`` interface), saved with
``RunState.to_json()`` and ``to_input_list()``.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from contextlib import closing
from pathlib import Path

import pytest
from agents import Agent, ModelResponse, Runner, Usage, function_tool
from agents.models.interface import Model
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from turnledger.pipeline.cli import main
from turnledger.pipeline.export import EXPORT_FORMATS
from turnledger.pipeline.formats import count_pairing, parse_transcript, read_transcript
from turnledger.pipeline.formats.openai_responses import MISSING_ID_PREFIX

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "openai_agents"
SESSION_DB = (
    FIXTURES.parent
    / "transcripts"
    / "openai-agents"
    / "deep-search-market-agent"
    / "conversation_history.db"
)


def _counts(parsed) -> tuple[int, int, int, int, int]:
    c = count_pairing(parsed)
    return (
        c.conversations,
        c.tool_calls,
        c.tool_results,
        c.unpaired_calls,
        c.unpaired_results,
    )


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("v1_9_custom_tool_call_and_tool_origin.json", (1, 1, 1, 0, 0)),
        ("v1_11_tool_output_custom_data.json", (1, 0, 1, 0, 1)),
    ],
)
def test_the_sdks_public_run_state_fixtures_are_counted_by_the_rule(name, expected):
    """Detected as openai-agents; counts as PROVENANCE.md states them."""
    parsed = read_transcript(FIXTURES / name)
    assert parsed.format == "openai-agents"
    assert _counts(parsed) == expected
    assert parsed.conversations[0].messages[0].text == "historical input"


@function_tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


class ScriptedModel(Model):
    """The SDK's Model interface: a call to `add`, then the answer."""

    def __init__(self) -> None:
        self.calls = 0

    async def get_response(self, *args, **kwargs) -> ModelResponse:
        self.calls += 1
        if self.calls == 1:
            output = [
                ResponseFunctionToolCall(
                    type="function_call",
                    id="fc_1",
                    call_id="call_1",
                    name="add",
                    arguments='{"a":1,"b":2}',
                    status="completed",
                )
            ]
        else:
            text = ResponseOutputText(type="output_text", text="3", annotations=[])
            output = [
                ResponseOutputMessage(
                    type="message",
                    id="msg_1",
                    role="assistant",
                    status="completed",
                    content=[text],
                )
            ]
        return ModelResponse(output=output, usage=Usage(), response_id=f"r{self.calls}")

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError


async def test_a_real_sdk_run_reads_back_from_its_state_and_its_items(tmp_path):
    """RunState.to_json() and to_input_list() both read as one paired exchange."""
    agent = Agent(name="calc", instructions="Add.", model=ScriptedModel(), tools=[add])
    result = await Runner.run(agent, "What is 1+2?")
    assert result.final_output == "3"
    state = tmp_path / "state.json"
    state.write_text(json.dumps(result.to_state().to_json()))
    items = tmp_path / "items.json"
    items.write_text(json.dumps(result.to_input_list()))
    from_state = read_transcript(state)
    from_items = read_transcript(items)
    assert (from_state.format, from_items.format) == (
        "openai-agents",
        "openai-responses",
    )
    assert _counts(from_state) == _counts(from_items) == (1, 1, 1, 0, 0)
    texts = [m.text for m in from_state.conversations[0].messages if m.text]
    assert texts == ["What is 1+2?", "3"]
    assert from_state.conversations[0].messages == from_items.conversations[0].messages


def test_a_run_state_missing_its_items_is_not_a_run_state():
    """Forced on another document, the reader names what it expected."""
    with pytest.raises(ValueError, match="Expected an OpenAI Agents SDK run state"):
        parse_transcript(b'{"messages": []}', format="openai-agents")


# --- A public SQLiteSession database ------------------------------------------


def _raw_items(path: Path) -> list[dict]:
    """The session items as stored, read with SQLite itself (no reader of ours)."""
    uri = f"file:{path}?mode=ro&immutable=1"
    with closing(sqlite3.connect(uri, uri=True)) as connection:
        rows = connection.execute(
            "SELECT message_data FROM agent_messages ORDER BY id"
        ).fetchall()
    return [json.loads(text) for (text,) in rows]


def _rule_counts(items: list[dict]) -> tuple[int, int, int, int, int]:
    """The corpus rule (README §2, Responses) on raw items, ids as written.

    Each call takes the first not-yet-used later output with an equal
    ``call_id``; calls left over and outputs no call took are unpaired.
    """
    calls = [i for i, item in enumerate(items) if item.get("type") == "function_call"]
    outputs = [
        i for i, item in enumerate(items) if item.get("type") == "function_call_output"
    ]
    used: set[int] = set()
    unpaired_calls = 0
    for call in calls:
        taken = next(
            (
                o
                for o in outputs
                if o > call
                and o not in used
                and items[o].get("call_id", "") == items[call].get("call_id", "")
            ),
            None,
        )
        if taken is None:
            unpaired_calls += 1
        else:
            used.add(taken)
    return (1, len(calls), len(outputs), unpaired_calls, len(outputs) - len(used))


COUNT_KEYS = (
    "conversations",
    "tool_calls",
    "tool_results",
    "unpaired_calls",
    "unpaired_results",
)


def _names(messages) -> Counter[str]:
    return Counter(c.name for m in messages for c in m.tool_calls)


def test_a_public_sqlite_session_database_is_counted_by_the_rule():
    """Every call_id is "": outputs pair in order, each call keeps its own id."""
    items = _raw_items(SESSION_DB)
    assert {item.get("call_id") for item in items if "call_id" in item} == {""}
    parsed = read_transcript(SESSION_DB)
    assert parsed.format == "openai-agents"
    assert (parsed.skipped, parsed.problems) == ({}, ())
    (found,) = parsed.conversations
    assert found.id == "financial_chat"
    assert _counts(parsed) == _rule_counts(items) == (1, 86, 86, 0, 0)
    ids = [c.id for m in found.messages for c in m.tool_calls]
    assert len(set(ids)) == 86
    assert all(i.startswith(MISSING_ID_PREFIX) for i in ids)
    raw_names = Counter(i["name"] for i in items if i.get("type") == "function_call")
    assert _names(found.messages) == raw_names
    assert raw_names["resolve_symbol"] == 25
    texts = [m.text for m in found.messages if m.text][:2]
    assert texts == ["hello", "Hello! How can I help you today?\n"]


def test_outputs_without_a_call_id_pair_in_order_as_the_rule_does():
    """Mixed ids: an id-less output answers the earliest open id-less call."""
    items = [
        {"type": "function_call_output", "call_id": "", "output": "early"},
        {"type": "function_call", "call_id": "", "name": "a", "arguments": "{}"},
        {"type": "function_call", "name": "b", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "", "output": "to a"},
        {"type": "function_call", "call_id": "x", "name": "c", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "x", "output": "to c"},
        {"type": "function_call_output", "output": "to b"},
        {"type": "function_call", "call_id": "", "name": "d", "arguments": "{}"},
    ]
    parsed = parse_transcript(json.dumps(items).encode(), format="openai-responses")
    assert _counts(parsed) == _rule_counts(items) == (1, 4, 4, 1, 1)
    messages = parsed.conversations[0].messages
    calls = {c.name: c.id for m in messages for c in m.tool_calls}
    answered = {r.content: r.call_id for m in messages for r in m.tool_results}
    assert answered["to a"] == calls["a"] != calls["b"] == answered["to b"]
    assert answered["to c"] == calls["c"] == "x"
    assert answered["early"] not in calls.values()


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("fmt", EXPORT_FORMATS)
def test_the_public_database_imports_and_exports_without_loss(capsys, tmp_path, fmt):
    """import -> export FMT keeps all 86 calls and results; re-import is a fixed point."""
    source = read_transcript(SESSION_DB).conversations[0].messages
    db = str(tmp_path / "ledger.db")
    code, out, err = run(capsys, "--db", db, "import", str(SESSION_DB), "--json")
    assert (code, err) == (0, "")
    (session,) = json.loads(out)["sessions"]
    assert session["session"].startswith("financial_chat-")  # the file's digest
    code, first, err = run(
        capsys, "--db", db, "export", session["session"], "--format", fmt
    )
    assert (code, err) == (0, "")
    reread = parse_transcript(first.encode(), format=fmt)
    assert _counts(reread) == (1, 86, 86, 0, 0)
    assert _names(reread.conversations[0].messages) == _names(source)
    if fmt == "openai-responses":
        assert reread.conversations[0].messages == source
    exported = tmp_path / "exported.json"
    exported.write_text(first, encoding="utf-8")
    again = str(tmp_path / "again.db")
    code, out, err = run(
        capsys, "--db", again, "import", str(exported), "--format", fmt, "--json"
    )
    assert (code, err) == (0, "")
    (second,) = json.loads(out)["sessions"]
    code, out, _ = run(
        capsys, "--db", again, "export", second["session"], "--format", fmt
    )
    assert (code, out) == (0, first)


def test_a_public_database_committed_with_its_wal_is_refused_until_checkpointed(
    capsys, tmp_path
):
    """The -wal holds 24 items the file lacks: refused; checkpointed, all counted."""
    source = SESSION_DB.with_name("conversation_history_1.db")
    wal = source.with_name(f"{source.name}-wal")
    alone, pair = tmp_path / "alone", tmp_path / "pair"
    for folder, files in ((alone, [source]), (pair, [source, wal])):
        folder.mkdir()
        for file in files:
            (folder / file.name).write_bytes(file.read_bytes())
    code, out, err = run(capsys, "audit", str(pair / source.name), "--json")
    assert (code, out) == (2, "")
    assert f"140112 bytes not yet checkpointed in {wal.name}" in err
    partial = read_transcript(alone / source.name)
    assert len(_raw_items(alone / source.name)) == 59
    assert _counts(partial) == (1, 9, 9, 0, 0)
    with closing(sqlite3.connect(pair / source.name)) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    items = _raw_items(pair / source.name)
    assert len(items) == 83
    code, out, err = run(capsys, "audit", str(pair / source.name), "--json")
    assert (code, err) == (0, "")
    report = json.loads(out)
    counts = tuple(report[key] for key in COUNT_KEYS)
    assert counts == _rule_counts(items) == (1, 16, 16, 0, 0)


def test_a_public_database_of_an_openai_model_reads_its_turns_in_order():
    """Three user turns, three answers with the API's msg_ ids: the texts, in order."""
    path = SESSION_DB.parent.parent / "agentic-ai-tutorial" / "conversations.db"
    items = _raw_items(path)
    expected = [
        item["content"] if item.get("role") == "user" else item["content"][0]["text"]
        for item in items
    ]
    parsed = read_transcript(path)
    (found,) = parsed.conversations
    assert found.id == "steve_ferns_96"
    assert [m.role for m in found.messages] == ["user", "assistant"] * 3
    assert [m.text for m in found.messages] == expected
    assert expected[0] == "Which anime is monkey de luffy from ?"
    assert _counts(parsed) == _rule_counts(items) == (1, 0, 0, 0, 0)
