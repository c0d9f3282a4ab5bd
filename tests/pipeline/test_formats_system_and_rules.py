"""Issue #11: the system prompt is data; audits follow the documented pairing rules."""

from __future__ import annotations

import json

import msgspec
import pytest

from turnledger.ledger.codec import MsgspecMapper
from turnledger.ledger.events import SystemPromptSet, text_digest
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import open_store
from turnledger.pipeline.cli import main
from turnledger.pipeline.formats import parse_transcript
from turnledger.pipeline.importer import import_transcript
from turnledger.pipeline.sessions import load_history
from turnledger.projections.history.read import provider_messages

SYSTEM = "You are a release assistant. Answer in one line."


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path, name: str, document: object) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return str(path)


CHAT = {
    "messages": [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Star the repo"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "star", "arguments": '{"repo":"x/y"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "starred"},
        {"role": "developer", "content": "From now on answer in French."},
        {"role": "assistant", "content": "Successfully starred the repository"},
    ]
}


# --- the event --------------------------------------------------------------------


def test_a_system_prompt_event_refuses_a_digest_that_is_not_its_texts():
    """The digest is checked when the event is built and when a row decodes."""
    event = SystemPromptSet.of(SYSTEM)
    assert event.digest == text_digest(SYSTEM)
    with pytest.raises(ValueError, match="Expected the text's digest"):
        SystemPromptSet(text=SYSTEM, digest="0" * 64)
    forged = msgspec.json.encode(event).replace(event.digest.encode(), b"0" * 64)
    with pytest.raises(msgspec.ValidationError, match="digest"):
        msgspec.json.decode(forged, type=SystemPromptSet)
    assert MsgspecMapper  # the codec registers the type by its stable tag
    assert SystemPromptSet.__struct_config__.tag == "system_prompt.set"


# --- importers keep it, exports place it --------------------------------------------


def test_chat_import_keeps_system_and_developer_messages_in_place(capsys, tmp_path):
    """No system message is skipped; history and every export show it."""
    db = str(tmp_path / "l.db")
    source = write(tmp_path, "chat.json", CHAT)
    code, out, _ = run(capsys, "--db", db, "import", source, "--json")
    assert code == 0
    report = json.loads(out)
    assert "system message" not in report["skipped"]
    session = report["sessions"][0]["session"]
    code, out, _ = run(capsys, "--db", db, "history", session, "--json")
    roles = [m["role"] for m in json.loads(out)]
    assert roles == ["system", "user", "assistant", "tool", "system", "assistant"]
    _, out, _ = run(capsys, "--db", db, "export", session, "--format", "openai-chat")
    messages = json.loads(out)["messages"]
    assert messages[0] == {"role": "system", "content": SYSTEM}
    assert messages[4] == {"role": "system", "content": "From now on answer in French."}
    assert len(messages) == len(CHAT["messages"])
    _, out, _ = run(capsys, "--db", db, "export", session, "--format", "anthropic")
    assert json.loads(out)["system"] == f"{SYSTEM}\n\nFrom now on answer in French."
    _, out, _ = run(
        capsys, "--db", db, "export", session, "--format", "openai-responses"
    )
    payload = json.loads(out)
    assert payload["instructions"] == SYSTEM
    developer = [i for i in payload["input"] if i.get("role") == "developer"]
    assert developer[0]["content"][0]["text"] == "From now on answer in French."
    _, out, _ = run(capsys, "--db", db, "export", session, "--format", "gemini")
    instruction = json.loads(out)["systemInstruction"]["parts"][0]["text"]
    assert instruction.startswith(SYSTEM)
    code, out, _ = run(capsys, "--db", db, "replay", session, "--json")
    replayed = json.loads(out)
    assert code == 0
    assert replayed["system_prompts"] == 2
    assert replayed["system_digest"] == text_digest("From now on answer in French.")


@pytest.mark.parametrize(
    ("fmt", "document"),
    [
        (
            "anthropic",
            {"system": SYSTEM, "messages": [{"role": "user", "content": "hi"}]},
        ),
        (
            "anthropic",
            {
                "system": [{"type": "text", "text": SYSTEM}],
                "messages": [{"role": "user", "content": "hi"}],
            },
        ),
        ("openai-responses", {"instructions": SYSTEM, "input": "hi"}),
        (
            "gemini",
            {
                "systemInstruction": {"parts": [{"text": SYSTEM}]},
                "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
            },
        ),
        (
            "pydantic-ai",
            [
                {
                    "kind": "request",
                    "parts": [
                        {"part_kind": "system-prompt", "content": SYSTEM},
                        {"part_kind": "user-prompt", "content": "hi"},
                    ],
                }
            ],
        ),
        (
            "langchain",
            [
                {"type": "system", "data": {"content": SYSTEM}},
                {"type": "human", "data": {"content": "hi"}},
            ],
        ),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_every_importer_records_the_system_prompt(tmp_path, fmt, document):
    """Each format's system field becomes a system_prompt.set event, verbatim."""
    parsed = parse_transcript(json.dumps(document).encode(), format=fmt)
    with open_store(str(tmp_path / "l.db")) as store:
        import_transcript(store, parsed, agent="a", session="s")
        events = [r.event for r in store.read_stream(session_stream_id("a", "s"))]
        prompts = [e for e in events if isinstance(e, SystemPromptSet)]
        assert [p.text for p in prompts] == [SYSTEM]
        assert prompts[0].digest == text_digest(SYSTEM)
        messages = provider_messages(load_history(store, session_stream_id("a", "s")))
        assert messages[0].role == "system"
        assert messages[0].text == SYSTEM


def test_a_9001_message_transcript_exports_9001_messages(capsys, tmp_path):
    """The issue's symptom: the system message is no longer the one message lost."""
    turns = [{"role": "system", "content": SYSTEM}]
    for index in range(4500):
        turns += [
            {"role": "user", "content": f"q{index}"},
            {"role": "assistant", "content": f"a{index}"},
        ]
    assert len(turns) == 9001
    db = str(tmp_path / "l.db")
    source = write(tmp_path, "long.json", {"messages": turns})
    assert run(capsys, "--db", db, "import", source, "--session", "long")[0] == 0
    _, out, _ = run(capsys, "--db", db, "export", "long", "--format", "openai-chat")
    assert len(json.loads(out)["messages"]) == 9001


def test_the_leading_system_message_precedes_the_trim_breadcrumb(capsys, tmp_path):
    """A trimmed export keeps the system prompt first, then one breadcrumb."""
    turns = [{"role": "system", "content": SYSTEM}]
    for index in range(40):
        turns += [
            {"role": "user", "content": f"question {index} " * 20},
            {"role": "assistant", "content": f"answer {index} " * 20},
        ]
    db = str(tmp_path / "l.db")
    source = write(tmp_path, "t.json", {"messages": turns})
    assert run(capsys, "--db", db, "import", source, "--session", "t")[0] == 0
    for fmt in ("openai-chat", "langchain", "pydantic-ai"):
        _, out, _ = run(
            capsys, "--db", db, "export", "t", "--format", fmt, "--budget-tokens", "600"
        )
        parsed = parse_transcript(out.encode(), format=fmt)
        messages = parsed.conversations[0].messages
        assert (messages[0].role, messages[0].text) == ("system", SYSTEM), fmt
        assert messages[1].text == "[earlier turns omitted to fit the context window]"
        assert sum(m.text == messages[1].text for m in messages) == 1


# --- audit by the documented rules (§2) ---------------------------------------------

ANTHROPIC_LATE = {
    "messages": [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "tu_1", "name": "f", "input": {}}],
        },
        {"role": "user", "content": "are you there?"},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "tu_1", "content": "ok"}
            ],
        },
    ]
}
CHAT_LATE = [
    {"role": "user", "content": "go"},
    {
        "role": "assistant",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "f", "arguments": "{}"},
            }
        ],
    },
    {"role": "assistant", "content": "still waiting"},
    {"role": "tool", "tool_call_id": "c1", "content": "ok"},
]
RESPONSES_SPLIT = [
    {"role": "user", "content": "go"},
    {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
    {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "and"}],
    },
    {"type": "function_call", "call_id": "c2", "name": "g", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "c1", "output": "1"},
    {"type": "function_call_output", "call_id": "c2", "output": "2"},
]


@pytest.mark.parametrize(
    ("name", "document", "fmt"),
    [
        ("anthropic.json", ANTHROPIC_LATE, "anthropic"),
        ("chat.json", CHAT_LATE, "openai-chat"),
    ],
)
def test_a_result_outside_its_window_is_unpaired_both_ways(
    capsys, tmp_path, name, document, fmt
):
    """Anthropic: not in the next message; chat: after an assistant message."""
    path = write(tmp_path, name, document)
    code, out, _ = run(capsys, "audit", path, "--format", fmt, "--json")
    report = json.loads(out)
    assert (report["unpaired_calls"], report["unpaired_results"]) == (1, 1)
    assert code == 1
    kinds = sorted(v["kind"] for v in report["violations"])
    assert kinds == ["misplaced_result", "orphan_call"]


def test_responses_pairs_by_call_id_across_an_assistant_message(capsys, tmp_path):
    """Paired under the documented rule: exit 0, the placement is a warning."""
    path = write(tmp_path, "r.json", RESPONSES_SPLIT)
    code, out, _ = run(capsys, "audit", path, "--json")
    report = json.loads(out)
    assert report["format"] == "openai-responses"
    assert (report["unpaired_calls"], report["unpaired_results"]) == (0, 0)
    assert report["violations"] == []
    assert [w["kind"] for w in report["warnings"]] == ["misplaced_result"]
    assert code == 0
    code, _, _ = run(capsys, "audit", path, "--strict")
    assert code == 1


# --- detection that never guesses silently ------------------------------------------

STARRED = [
    {"role": "user", "content": "Star the repo"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_9",
                "type": "function",
                "function": {"name": "star_repo", "arguments": '{"repo":"a/b"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_9", "content": "ok"},
    {"role": "assistant", "content": "Successfully starred the repository"},
]


def test_a_top_level_system_with_chat_messages_is_read_as_chat(capsys, tmp_path):
    """Message evidence wins over the `system` key: the tool call is counted."""
    path = write(tmp_path, "agent.json", {"system": SYSTEM, "messages": STARRED})
    code, out, _ = run(capsys, "audit", path, "--json")
    report = json.loads(out)
    assert report["format"] == "openai-chat"
    assert (report["tool_calls"], report["tool_results"]) == (1, 1)
    assert code == 0
    db = str(tmp_path / "l.db")
    assert run(capsys, "--db", db, "import", path, "--session", "s")[0] == 0
    _, out, _ = run(capsys, "--db", db, "history", "s", "--json")
    history = json.loads(out)
    assert history[0]["text"] == SYSTEM
    assert [c["name"] for m in history for c in m["tool_calls"]] == ["star_repo"]


CLI_RECORDING = {
    "version": 2,
    "messages": [
        {"type": "prompt", "text": "Star the repo"},
        {"type": "tool", "tool": "star_repo", "input": {"repo": "a/b"}},
        {"type": "tool_output", "output": "ok"},
        {"type": "reply", "text": "Successfully starred the repository"},
    ],
}
SESSION_ID_JSONL = [
    {"sessionId": "s-1", "type": "session_start", "cwd": "/w"},
    {"type": "message", "role": "user", "content": "Star the repo"},
    {"type": "function_call", "name": "star_repo", "arguments": "{}", "id": "c1"},
    {"type": "function_result", "id": "c1", "output": "ok"},
    {"type": "message", "role": "assistant", "content": "Successfully starred"},
]


def test_a_plain_json_cli_recording_is_refused(capsys, tmp_path):
    """Unrecognised messages are no openai-chat: exit 2, nothing written."""
    path = write(tmp_path, "cli.json", CLI_RECORDING)
    code, out, err = run(capsys, "audit", path, "--json")
    assert (code, out) == (2, "")
    assert "unrecognised" in err
    assert err.count("\n") == 1
    db = str(tmp_path / "l.db")
    code, _, err = run(capsys, "--db", db, "import", path)
    assert code == 2
    code, out, _ = run(capsys, "--db", db, "stats", "--json")
    assert code != 0 or json.loads(out)["events"] == 0


def test_a_jsonl_with_a_session_id_header_is_not_taken_for_claude_code(
    capsys, tmp_path
):
    """One `sessionId` line does not make a Claude Code file: refused, naming it."""
    path = tmp_path / "other.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in SESSION_ID_JSONL))
    code, out, err = run(capsys, "audit", str(path), "--json")
    assert (code, out) == (2, "")
    assert err.count("\n") == 1
    # Each reader considered names the first record that did not fit it.
    assert "formats considered: codex (line 2 (message) holds" in err
    assert "; claude-code (line 2 (message) holds a message-shaped object" in err
    db = str(tmp_path / "l.db")
    assert run(capsys, "--db", db, "import", str(path))[0] == 2
    # Forced, it is refused too: its messages and its call are in no schema
    # the reader has, so a clean verdict would lose them.
    for command in ("audit", "import"):
        code, out, err = run(
            capsys, "--db", db, command, str(path), "--format", "claude-code"
        )
        assert (code, out) == (2, "")
        assert "readable as claude-code" in err
        assert "line 2 (message) holds a message-shaped object with `role`" in err
    code, out, _ = run(capsys, "--db", db, "stats", "--json")
    assert code != 0 or json.loads(out)["events"] == 0


def test_a_claude_code_file_with_a_few_foreign_lines_still_reads(tmp_path):
    """The refusal is for most items unrecognised, not for one odd line."""
    lines = [
        {
            "type": "user",
            "sessionId": "s",
            "uuid": "u1",
            "message": {"role": "user", "content": "hi"},
        },
        {
            "type": "assistant",
            "sessionId": "s",
            "uuid": "u2",
            "message": {"role": "assistant", "content": "yo"},
        },
        {"type": "mystery", "x": 1},
    ]
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    parsed = parse_transcript(data, path="s.jsonl")
    assert parsed.format == "claude-code"
    assert (parsed.items, parsed.unread) == (3, 1)
    assert parsed.skipped == {"mystery": 1}


# --- the engine records the system prompt it uses ------------------------------------


async def test_the_engine_records_its_system_prompt_when_it_changes(tmp_path, capsys):
    """One event per change; replay checks the prompts' system digest against it."""
    from tests.pipeline.test_engine import EchoTool, FakeProvider, answer
    from turnledger.ledger.events import PromptAssembled
    from turnledger.pipeline.bootstrap import bootstrap
    from turnledger.pipeline.config import parse_config
    from turnledger.pipeline.timetravel.replay import replay_session

    config = parse_config(f'data_dir = "{tmp_path / "data"}"\n')
    path = str(tmp_path / "l.db")
    store = open_store(path)
    try:
        for prompt, steps in (
            ("Prompt A", [answer("one")]),
            ("Prompt A", [answer("two")]),
            ("Prompt B", [answer("three")]),
        ):
            async with bootstrap(
                config,
                provider=FakeProvider(steps),
                store=store,
                ledger_url=path,
                tools={"echo": EchoTool()},
                system_prompt=prompt,
            ) as runtime:
                assert (await runtime.engine.run_turn("ops", "s1", "hello")).completed
        stream = session_stream_id("ops", "s1")
        events = [r.event for r in store.read_stream(stream)]
        prompts = [e for e in events if isinstance(e, SystemPromptSet)]
        assert [p.text for p in prompts] == ["Prompt A", "Prompt B"]
        first = events.index(prompts[0])
        assert isinstance(events[first + 1], PromptAssembled)
        system = next(s for s in events[first + 1].sections if s.name == "system")
        assert system.digest == prompts[0].digest
        report = replay_session(store, stream)
        checks = [c for c in report.checks if c.kind == "prompt.system"]
        assert len(checks) == 3
        assert all(c.ok for c in checks)
        assert report.system_digest == text_digest("Prompt B")
        history = provider_messages(load_history(store, stream))
        assert [m.text for m in history if m.role == "system"] == [
            "Prompt A",
            "Prompt B",
        ]
    finally:
        store.close()
