"""Hand-written examples per transcript format: shapes, pairing, skips, problems."""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from turnledger.pipeline.formats import (
    PairingCounts,
    ParsedTranscript,
    Problem,
    TranscriptError,
    count_messages,
    count_pairing,
    detect_format,
    parse_transcript,
    read_transcript,
)
from turnledger.policies.messages import Message, ToolCall, ToolResult, make_message


def _json(value: object) -> bytes:
    return json.dumps(value).encode()


def _jsonl(*lines: object) -> bytes:
    return b"\n".join(
        line if isinstance(line, bytes) else _json(line) for line in lines
    )


def _counts(parsed: ParsedTranscript) -> tuple[int, int, int, int, int]:
    counts = count_pairing(parsed)
    return (
        counts.conversations,
        counts.tool_calls,
        counts.tool_results,
        counts.unpaired_calls,
        counts.unpaired_results,
    )


def _only(parsed: ParsedTranscript) -> tuple[Message, ...]:
    assert len(parsed.conversations) == 1
    return parsed.conversations[0].messages


# --- OpenAI Chat Completions -------------------------------------------------

CHAT = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris and Rome?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"city":"Paris"}'},
            },
            {
                "id": "call_2",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"city":"Rome"}'},
            },
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "Sunny"},
    {"role": "tool", "tool_call_id": "call_2", "content": "Rain"},
    {"role": "tool", "tool_call_id": "call_9", "content": "orphan"},
    {"role": "assistant", "content": "Paris sunny, Rome rainy."},
]


def test_chat_array_parallel_calls_and_an_orphan_result():
    """Parallel calls sit on one assistant message; an unknown id is unpaired."""
    parsed = parse_transcript(_json(CHAT), path="chat.json")
    assert parsed.format == "openai-chat"
    messages = _only(parsed)
    assert [m.role for m in messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "tool",
        "assistant",
    ]
    assert messages[2].tool_calls == (
        ToolCall(id="call_1", name="weather", arguments='{"city":"Paris"}'),
        ToolCall(id="call_2", name="weather", arguments='{"city":"Rome"}'),
    )
    assert messages[3].tool_results == (ToolResult(call_id="call_1", content="Sunny"),)
    assert _counts(parsed) == (1, 2, 3, 0, 1)
    assert parsed.conversations[0].origins[2] == "[2]"


def test_chat_object_with_messages_and_system():
    """An object with `messages` and a `system` string is read with the system first."""
    document = {"system": "Be kind.", "messages": CHAT[1:5]}
    parsed = parse_transcript(_json(document), format="openai-chat")
    messages = _only(parsed)
    assert messages[0] == make_message("system", "Be kind.")
    assert parsed.conversations[0].origins[:2] == ("system", "messages[0]")
    assert _counts(parsed) == (1, 2, 2, 0, 0)


def test_chat_object_with_messages_is_detected_as_chat():
    """`{"messages": [...]}` of chat messages is detected as openai-chat."""
    assert detect_format(None, _json({"messages": CHAT})) == "openai-chat"


def test_chat_legacy_function_messages_pair_by_name():
    """A legacy function_call is answered by the next role=function message."""
    document = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "function_call": {"name": "f", "arguments": "{}"}},
        {"role": "function", "name": "f", "content": "ok"},
    ]
    parsed = parse_transcript(_json(document), format="openai-chat")
    assert _counts(parsed) == (1, 1, 1, 0, 0)


def test_chat_result_before_its_call_is_unpaired():
    """A result that comes before its call pairs with nothing."""
    document = [CHAT[3], CHAT[2]]
    parsed = parse_transcript(_json(document), format="openai-chat")
    assert _counts(parsed) == (1, 2, 1, 2, 1)


# --- OpenAI Responses ---------------------------------------------------------

RESPONSES = [
    {"role": "user", "content": "Weather in Paris and Rome?"},
    {"type": "reasoning", "id": "rs_1", "summary": []},
    {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_a",
        "name": "weather",
        "arguments": "{}",
    },
    {
        "type": "function_call",
        "id": "fc_2",
        "call_id": "call_b",
        "name": "weather",
        "arguments": "{}",
    },
    {"type": "function_call_output", "call_id": "call_a", "output": "Sunny"},
    {"type": "web_search_call", "id": "ws_1", "status": "completed"},
    {"type": "future_item", "x": 1},
]


def test_responses_items_group_parallel_calls_and_count_skips():
    """Consecutive calls are one message; reasoning and unknown items are counted."""
    parsed = parse_transcript(_json(RESPONSES), path="r.json")
    assert parsed.format == "openai-responses"
    messages = _only(parsed)
    assert [m.role for m in messages] == ["user", "assistant", "tool"]
    assert [call.id for call in messages[1].tool_calls] == ["call_a", "call_b"]
    assert parsed.skipped == {"future_item": 1, "reasoning": 1, "web_search_call": 1}
    assert _counts(parsed) == (1, 2, 1, 1, 0)


def test_responses_object_with_string_input():
    """`{"input": "..."}` is one user message, with `instructions` as system."""
    document = {"instructions": "Be brief.", "input": "hello"}
    parsed = parse_transcript(_json(document))
    assert parsed.format == "openai-responses"
    assert [(m.role, m.text) for m in _only(parsed)] == [
        ("system", "Be brief."),
        ("user", "hello"),
    ]


def test_responses_custom_and_shell_calls_pair_by_call_id():
    """custom_tool_call / local_shell_call pair with their `_output` items."""
    document = [
        {"type": "custom_tool_call", "call_id": "c1", "name": "patch", "input": "x"},
        {"type": "custom_tool_call_output", "call_id": "c1", "output": "done"},
        {"type": "local_shell_call", "call_id": "c2", "action": {"cmd": ["ls"]}},
        {"type": "local_shell_call_output", "call_id": "c2", "output": "a b"},
    ]
    parsed = parse_transcript(_json(document), format="openai-responses")
    messages = _only(parsed)
    assert messages[0].tool_calls == (ToolCall(id="c1", name="patch", arguments="x"),)
    assert messages[2].tool_calls[0].name == "local_shell"
    assert _counts(parsed) == (1, 2, 2, 0, 0)


# --- Anthropic Messages ---------------------------------------------------------

ANTHROPIC = {
    "system": [{"type": "text", "text": "Be brief."}],
    "messages": [
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "...", "signature": "s"},
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_1", "name": "w", "input": {"c": 1}},
                {"type": "tool_use", "id": "toolu_2", "name": "w", "input": {"c": 2}},
                {"type": "server_tool_use", "id": "srv_1", "name": "web_search"},
                {"type": "web_search_tool_result", "tool_use_id": "srv_1"},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "Sunny"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": [{"type": "text", "text": "Rain"}],
                    "is_error": True,
                },
            ],
        },
    ],
}


def test_anthropic_carrier_holds_parallel_results():
    """tool_result blocks become one carrier; server tools and thinking are skipped."""
    parsed = parse_transcript(_json(ANTHROPIC))
    assert parsed.format == "anthropic"
    messages = _only(parsed)
    assert [(m.role, m.kind) for m in messages] == [
        ("system", "normal"),
        ("user", "normal"),
        ("assistant", "normal"),
        ("user", "tool_results"),
    ]
    assert messages[2].text == "Checking."
    assert messages[2].tool_calls[0].arguments == '{"c":1}'
    assert messages[3].tool_results[1] == ToolResult(
        call_id="toolu_2", content="Rain", is_error=True
    )
    assert parsed.skipped == {
        "server_tool_use": 1,
        "thinking": 1,
        "web_search_tool_result": 1,
    }
    assert _counts(parsed) == (1, 2, 2, 0, 0)


# --- Gemini ----------------------------------------------------------------------

GEMINI = {
    "systemInstruction": {"parts": [{"text": "Be brief."}]},
    "contents": [
        {"role": "user", "parts": [{"text": "Capital of France?"}]},
        {
            "role": "model",
            "parts": [{"functionCall": {"name": "capital", "args": {"c": "FR"}}}],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "capital", "response": {"v": "Paris"}}},
                {"functionResponse": {"name": "other", "response": {}}},
            ],
        },
        {"role": "model", "parts": [{"functionCall": {"id": "x1", "name": "f"}}]},
    ],
}


def test_gemini_pairs_by_name_in_the_next_content():
    """Calls without ids pair by name with the next content's responses."""
    parsed = parse_transcript(_json(GEMINI))
    assert parsed.format == "gemini"
    messages = _only(parsed)
    call = messages[2].tool_calls[0]
    assert messages[3].tool_results[0].call_id == call.id
    assert messages[4].tool_calls[0].id == "x1"
    assert _counts(parsed) == (1, 2, 2, 1, 1)


# --- LangChain -------------------------------------------------------------------

LANGCHAIN: list[dict[str, Any]] = [
    {"type": "system", "data": {"content": "Be brief.", "type": "system"}},
    {"type": "human", "data": {"content": "2+2?", "type": "human"}},
    {
        "type": "ai",
        "data": {
            "content": "",
            "type": "ai",
            "tool_calls": [
                {"name": "add", "args": {"a": 2}, "id": "c1", "type": "tool_call"}
            ],
        },
    },
    {
        "type": "tool",
        "data": {"content": "boom", "tool_call_id": "c1", "status": "error"},
    },
    {"type": "remove", "data": {"id": "m1"}},
]


def test_langchain_messages_to_dict_form():
    """messages_to_dict output: tool_calls pair with ToolMessages; remove is skipped."""
    parsed = parse_transcript(_json(LANGCHAIN))
    assert parsed.format == "langchain"
    messages = _only(parsed)
    assert messages[2].tool_calls == (
        ToolCall(id="c1", name="add", arguments='{"a":2}'),
    )
    assert messages[3].tool_results[0].is_error
    assert parsed.skipped == {"remove": 1}
    assert _counts(parsed) == (1, 1, 1, 0, 0)


def test_langchain_model_dump_form_in_a_messages_object():
    """Flat model_dump dicts inside `{"messages": [...]}` are read too."""
    flat = [entry["data"] | {"type": entry["type"]} for entry in LANGCHAIN[:4]]
    parsed = parse_transcript(_json({"messages": flat}))
    assert parsed.format == "langchain"
    assert _counts(parsed) == (1, 1, 1, 0, 0)


# --- Pydantic AI -----------------------------------------------------------------

PYDANTIC_AI = [
    {
        "kind": "request",
        "parts": [
            {"part_kind": "system-prompt", "content": "Be brief."},
            {"part_kind": "user-prompt", "content": "Weather?"},
        ],
    },
    {
        "kind": "response",
        "parts": [
            {"part_kind": "thinking", "content": "..."},
            {
                "part_kind": "tool-call",
                "tool_name": "w",
                "args": {"c": 1},
                "tool_call_id": "t1",
            },
            {
                "part_kind": "tool-call",
                "tool_name": "w",
                "args": None,
                "tool_call_id": "t2",
            },
        ],
    },
    {
        "kind": "request",
        "parts": [
            {
                "part_kind": "tool-return",
                "tool_name": "w",
                "content": "Sunny",
                "tool_call_id": "t1",
            },
            {
                "part_kind": "retry-prompt",
                "tool_name": "w",
                "content": "bad",
                "tool_call_id": "t2",
            },
        ],
    },
    {
        "kind": "response",
        "parts": [
            {
                "part_kind": "tool-call",
                "tool_name": "final_result",
                "args": "{}",
                "tool_call_id": "t3",
            }
        ],
    },
]


def test_pydantic_ai_results_share_one_carrier():
    """tool-return and tool retry-prompt parts are results in one carrier."""
    parsed = parse_transcript(_json(PYDANTIC_AI))
    assert parsed.format == "pydantic-ai"
    messages = _only(parsed)
    assert [(m.role, m.kind) for m in messages] == [
        ("system", "normal"),
        ("user", "normal"),
        ("assistant", "normal"),
        ("user", "tool_results"),
        ("assistant", "normal"),
    ]
    assert messages[2].tool_calls[1].arguments == "{}"
    assert [r.is_error for r in messages[3].tool_results] == [False, True]
    assert parsed.skipped == {"thinking": 1}
    assert _counts(parsed) == (1, 3, 2, 1, 0)


# --- Claude Code -----------------------------------------------------------------


def _cc(kind: str, uuid: str, content: object, **extra: object) -> dict[str, object]:
    line: dict[str, object] = {
        "type": kind,
        "uuid": uuid,
        "sessionId": "s1",
        "isSidechain": False,
        "message": {"role": kind, "content": content},
    }
    line.update(extra)
    return line


CLAUDE_LINES = [
    {"type": "summary", "summary": "A session", "leafUuid": "u9"},
    _cc("user", "u1", "List files"),
    _cc(
        "assistant",
        "a1",
        [{"type": "tool_use", "id": "tu1", "name": "Bash", "input": {}}],
        message={
            "id": "msg_1",
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "tu1", "name": "Bash", "input": {}}],
        },
    ),
    _cc(
        "assistant",
        "a2",
        [],
        message={
            "id": "msg_1",
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "tu2", "name": "Read", "input": {}}],
        },
    ),
    b"{not json",
    _cc("user", "r1", [{"type": "tool_result", "tool_use_id": "tu1", "content": "a"}]),
    _cc("user", "r1", [{"type": "tool_result", "tool_use_id": "tu2", "content": "b"}]),
    _cc("user", "r2", [{"type": "tool_result", "tool_use_id": "tu2", "content": "b"}]),
    "a string line",
]


def test_claude_code_lines_merge_dedup_and_report_bad_lines():
    """Split assistant lines merge, repeated uuids are dropped, bad lines reported."""
    parsed = parse_transcript(_jsonl(*CLAUDE_LINES), path="s1.jsonl")
    assert parsed.format == "claude-code"
    messages = _only(parsed)
    assert [m.role for m in messages] == ["user", "assistant", "user"]
    assert [call.id for call in messages[1].tool_calls] == ["tu1", "tu2"]
    assert [r.call_id for r in messages[2].tool_results] == ["tu1", "tu2"]
    assert parsed.conversations[0].origins == ("line 2", "line 3", "line 6")
    assert parsed.skipped == {"<repeated uuid>": 1, "summary": 1}
    assert parsed.problems == (
        Problem(
            5,
            "Expected valid JSON, found malformed JSON: "
            "object keys must be strings (byte 1)",
        ),
        Problem(9, "Expected a JSON object, found a string"),
    )
    assert _counts(parsed) == (1, 2, 2, 0, 0)


def test_claude_code_sessions_and_sidechain_files():
    """One conversation per sessionId; an all-sidechain file is marked sidechain."""
    lines = [
        _cc("user", "u1", "hi", isSidechain=True),
        _cc("user", "u2", "hi", sessionId="s2", isSidechain=True),
    ]
    parsed = parse_transcript(_jsonl(*lines), format="claude-code")
    assert [c.id for c in parsed.conversations] == ["s1", "s2"]
    assert all(c.sidechain for c in parsed.conversations)


def test_claude_code_loglines_document():
    """`{"loglines": [...]}` holds the same lines, without uuids."""
    lines = [
        {"type": "user", "message": {"role": "user", "content": "hi"}},
        {
            "type": "assistant",
            "message": {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t", "name": "X", "input": {}}],
            },
        },
    ]
    parsed = parse_transcript(_json({"loglines": lines}), path="log.json")
    assert parsed.format == "claude-code"
    assert parsed.conversations[0].id == "log.json"
    assert parsed.conversations[0].origins == ("loglines[0]", "loglines[1]")
    assert _counts(parsed) == (1, 1, 0, 1, 0)


def test_claude_code_file_without_conversation_lines_has_none():
    """A file of snapshots only holds no conversation."""
    lines = [{"type": "file-history-snapshot", "messageId": "m", "snapshot": {}}]
    parsed = parse_transcript(_jsonl(*lines))
    assert parsed.format == "claude-code"
    assert parsed.conversations == ()
    assert parsed.skipped == {"file-history-snapshot": 1}


# --- Codex -----------------------------------------------------------------------

CODEX = [
    {"timestamp": "t", "type": "session_meta", "payload": {"id": "sess-1"}},
    {"timestamp": "t", "type": "turn_context", "payload": {"cwd": "/"}},
    {"timestamp": "t", "type": "event_msg", "payload": {"type": "user_message"}},
    {
        "timestamp": "t",
        "type": "response_item",
        "payload": {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "ls"}],
        },
    },
    {
        "timestamp": "t",
        "type": "response_item",
        "payload": {
            "type": "function_call",
            "name": "shell",
            "arguments": "{}",
            "call_id": "c1",
        },
    },
    b"{broken",
    {
        "timestamp": "t",
        "type": "response_item",
        "payload": {"type": "function_call_output", "call_id": "c1", "output": "a b"},
    },
    {"timestamp": "t", "type": "world_state", "payload": {}},
]


def test_codex_rollout_reads_response_items_only():
    """response_item payloads are the conversation; other records are counted."""
    parsed = parse_transcript(_jsonl(*CODEX), path="rollout.jsonl")
    assert parsed.format == "codex"
    assert parsed.conversations[0].id == "sess-1"
    assert parsed.conversations[0].origins == ("line 4", "line 5", "line 7")
    assert parsed.skipped == {"event_msg": 1, "turn_context": 1, "world_state": 1}
    assert [problem.line for problem in parsed.problems] == [6]
    assert _counts(parsed) == (1, 1, 1, 0, 0)


def test_codex_legacy_layout_has_bare_items():
    """The legacy layout: an `{id, timestamp}` header, then bare items."""
    lines = [
        {"id": "legacy-1", "timestamp": "t"},
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "hi"}],
        },
        {"type": "function_call", "name": "f", "arguments": "{}", "call_id": "c"},
    ]
    parsed = parse_transcript(_jsonl(*lines))
    assert parsed.format == "codex"
    assert parsed.conversations[0].id == "legacy-1"
    assert _counts(parsed) == (1, 1, 0, 1, 0)


# --- Cassettes ---------------------------------------------------------------------


def _interaction(
    uri: str,
    request: object,
    response: object,
    *,
    method: str = "POST",
    code: int = 200,
    headers: dict[str, list[str]] | None = None,
) -> dict[str, object]:
    recorded: dict[str, object] = {"status": {"code": code}, "headers": headers or {}}
    if isinstance(response, str):
        recorded["body"] = {"string": response}
    else:
        recorded["parsed_body"] = response
    return {
        "request": {"method": method, "uri": uri, "parsed_body": request},
        "response": recorded,
    }


CHAT_URI = "https://api.openai.com/v1/chat/completions"
CALL: dict[str, Any] = {
    "role": "assistant",
    "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    ],
}


def _chat_response(message: dict[str, Any]) -> dict[str, Any]:
    return {"choices": [{"index": 0, "message": message}]}


def _cassette(*interactions: dict[str, object]) -> bytes:
    return yaml.safe_dump({"interactions": list(interactions), "version": 1}).encode()


def test_cassette_counts_the_last_request_of_a_chain_and_its_response():
    """Earlier requests are superseded; the final response's call is unpaired."""
    first = [{"role": "user", "content": "hi"}]
    second = [*first, CALL, {"role": "tool", "tool_call_id": "c1", "content": "ok"}]
    final_call = CALL | {"tool_calls": [CALL["tool_calls"][0] | {"id": "c2"}]}
    data = _cassette(
        _interaction(CHAT_URI, {"messages": first}, _chat_response(CALL)),
        _interaction(CHAT_URI, {"messages": second}, _chat_response(final_call)),
    )
    parsed = parse_transcript(data, path="c.yaml")
    assert parsed.format == "cassette"
    assert [c.id for c in parsed.conversations] == ["interactions[1]"]
    assert parsed.conversations[0].origins[-1] == "interactions[1].response[0]"
    assert _counts(parsed) == (1, 2, 1, 1, 0)


def test_cassette_streamed_chat_tool_call_fragments_are_assembled():
    """SSE `tool_calls` deltas merge by index into whole calls."""
    chunks = [
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "c1",
                                "function": {"name": "f", "arguments": ""},
                            }
                        ]
                    },
                }
            ]
        },
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [{"index": 0, "function": {"arguments": '{"a":'}}]
                    },
                }
            ]
        },
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]
                    },
                }
            ]
        },
    ]
    sse = (
        "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks)
        + "data: [DONE]\n\n"
    )
    data = _cassette(
        _interaction(
            CHAT_URI,
            {"messages": [{"role": "user", "content": "hi"}]},
            sse,
            headers={"Content-Type": ["text/event-stream"]},
        )
    )
    messages = _only(parse_transcript(data, format="cassette"))
    assert messages[-1].tool_calls == (
        ToolCall(id="c1", name="f", arguments='{"a":1}'),
    )


def test_cassette_gzip_base64_body_is_decoded(tmp_path: Path):
    """A `!!binary` gzip body (Content-Encoding: gzip) is inflated and read."""
    body = gzip.compress(_json(_chat_response(CALL)))
    text = (
        "interactions:\n"
        "- request:\n"
        "    method: POST\n"
        f"    uri: {CHAT_URI}\n"
        '    body: \'{"messages": [{"role": "user", "content": "hi"}]}\'\n'
        "  response:\n"
        "    status: {code: 200, message: OK}\n"
        "    headers: {Content-Encoding: [gzip]}\n"
        "    body:\n"
        f"      string: !!binary |\n        {base64.b64encode(body).decode()}\n"
    )
    path = tmp_path / "gz.yaml"
    path.write_text(text)
    parsed = read_transcript(path)
    assert parsed.problems == ()
    assert _counts(parsed) == (1, 1, 0, 1, 0)


def test_cassette_error_response_has_no_output():
    """A non-2xx response adds nothing; its request's history still counts."""
    history = [{"role": "user", "content": "hi"}, CALL]
    data = _cassette(
        _interaction(CHAT_URI, {"messages": history}, {"error": "bad"}, code=400)
    )
    assert _counts(parse_transcript(data)) == (1, 1, 0, 1, 0)


def test_cassette_anthropic_stream_assembles_tool_use():
    """content_block_start + input_json_delta events give a whole tool_use."""
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"content": []}},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "tu", "name": "f", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '{"x":'},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": "2}"},
        },
        {"type": "message_stop"},
    ]
    sse = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    data = _cassette(
        _interaction(
            "https://api.anthropic.com/v1/messages",
            {"messages": [{"role": "user", "content": "hi"}], "system": "S"},
            sse,
        )
    )
    parsed = parse_transcript(data)
    messages = _only(parsed)
    assert messages[0] == make_message("system", "S")
    assert messages[-1].tool_calls == (
        ToolCall(id="tu", name="f", arguments='{"x":2}'),
    )


def test_cassette_previous_response_id_chains_history():
    """A Responses request with previous_response_id extends the referenced one."""
    uri = "https://api.openai.com/v1/responses"
    call = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
    data = _cassette(
        _interaction(uri, {"input": "hi"}, {"id": "resp_1", "output": [call]}),
        _interaction(
            uri,
            {
                "previous_response_id": "resp_1",
                "input": [
                    {"type": "function_call_output", "call_id": "c1", "output": "ok"}
                ],
            },
            {"id": "resp_2", "output": []},
        ),
        _interaction(f"{uri}/resp_2", None, {"id": "resp_2"}, method="GET"),
    )
    parsed = parse_transcript(data)
    assert [c.id for c in parsed.conversations] == ["interactions[1]"]
    assert parsed.skipped == {"interaction:GET": 1}
    assert _counts(parsed) == (1, 1, 1, 0, 0)


def test_cassette_background_response_output_comes_from_polling():
    """A queued response's output is taken from a later GET poll."""
    uri = "https://api.openai.com/v1/responses"
    call = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
    data = _cassette(
        _interaction(
            uri,
            {"input": "hi", "background": True},
            {"id": "r1", "status": "queued", "output": []},
        ),
        _interaction(
            f"{uri}/r1",
            None,
            {"id": "r1", "status": "completed", "output": [call]},
            method="GET",
        ),
    )
    assert _counts(parse_transcript(data)) == (1, 1, 0, 1, 0)


def test_cassette_with_two_api_shapes_has_two_conversations():
    """Each API shape's chain is its own conversation."""
    gemini_uri = (
        "https://generativelanguage.googleapis.com/v1beta/models/m:generateContent"
    )
    data = _cassette(
        _interaction(
            gemini_uri,
            {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
            {"candidates": [{"content": {"role": "model", "parts": [{"text": "yo"}]}}]},
        ),
        _interaction(
            CHAT_URI,
            {"messages": [{"role": "user", "content": "hi"}]},
            _chat_response({"role": "assistant", "content": "yo"}),
        ),
    )
    parsed = parse_transcript(data)
    assert [c.api for c in parsed.conversations] == ["gemini", "openai-chat"]


def test_cassette_bad_request_body_is_a_problem():
    """A request body that is not JSON is reported and its interaction skipped."""
    data = _cassette(
        {
            "request": {"method": "POST", "uri": CHAT_URI, "body": "{nope"},
            "response": {"status": {"code": 200}},
        }
    )
    parsed = parse_transcript(data)
    assert parsed.conversations == ()
    assert parsed.problems == (
        Problem(
            0,
            "interactions[0].request.body: expected valid JSON, found malformed "
            "JSON: object keys must be strings (byte 1)",
        ),
    )


# --- Detection and errors -----------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (_json(CHAT), "openai-chat"),
        (_json(RESPONSES), "openai-responses"),
        (_json(ANTHROPIC), "anthropic"),
        (_json(GEMINI), "gemini"),
        (_json(LANGCHAIN), "langchain"),
        (_json(PYDANTIC_AI), "pydantic-ai"),
        (_jsonl(*CLAUDE_LINES), "claude-code"),
        (_jsonl(*CODEX), "codex"),
        (_cassette(), "cassette"),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_detect_format_names_each_format(data: bytes, expected: str):
    """Each format is recognised from its content."""
    assert detect_format(None, data) == expected


def test_detect_format_uses_the_yaml_suffix():
    """A YAML file without a top-level `interactions:` line is tried as a cassette."""
    assert detect_format("x.yml", b"version: 1\n") == "cassette"
    with pytest.raises(TranscriptError) as raised:
        parse_transcript(b"version: 1\n", path="x.yml")
    assert str(raised.value) == (
        "Expected a VCR cassette (a mapping with an `interactions` list), "
        "found an object with keys `version`"
    )


def test_undetectable_content_names_what_was_found():
    """Content of no known format raises a TranscriptError saying what it found."""
    with pytest.raises(TranscriptError) as raised:
        detect_format(None, b"hello world")
    assert str(raised.value) == (
        "Expected a transcript (JSON, JSON Lines or a VCR cassette), "
        "found content starting 'hello world'"
    )
    with pytest.raises(TranscriptError, match="found an empty file"):
        detect_format(None, b"  \n")
    with pytest.raises(TranscriptError) as raised:
        detect_format(None, b'{"foo": 1}')
    assert str(raised.value) == (
        "Expected a known transcript shape, found an object with keys `foo`"
    )


def test_unknown_format_name_is_rejected():
    """An unknown --format value lists the accepted names."""
    with pytest.raises(TranscriptError) as raised:
        parse_transcript(b"[]", format="xml")
    assert str(raised.value) == (
        "Expected a format name (auto, openai-chat, openai-responses, anthropic, "
        "gemini, langchain, pydantic-ai, claude-code, codex, cassette, adk, "
        "openai-agents, inspect-ai, openhands, har), found 'xml'"
    )


def test_invalid_json_document_is_an_error():
    """A JSON document that does not parse raises, naming the expected shape."""
    with pytest.raises(TranscriptError) as raised:
        parse_transcript(b"[1, 2", format="openai-chat")
    assert str(raised.value) == (
        "Expected a JSON array of chat messages or an object with a `messages` "
        "array; expected valid JSON, found truncated JSON"
    )


def test_jsonl_with_no_readable_line_is_an_error():
    """A JSONL file none of whose lines is an object raises."""
    with pytest.raises(TranscriptError) as raised:
        parse_transcript(b"{x\n42\n", format="codex")
    assert str(raised.value) == (
        "Expected Codex rollout records (JSON Lines), found no readable line "
        "(line 1: Expected valid JSON, found malformed JSON: object keys must be "
        "strings (byte 1))"
    )


def test_wrong_document_shape_is_an_error():
    """A document of the wrong shape for the chosen format raises."""
    with pytest.raises(TranscriptError) as raised:
        parse_transcript(b'{"a": 1}', format="anthropic")
    assert str(raised.value) == (
        "Expected an object with a `messages` array (Anthropic Messages) or a "
        "JSON array, found an object with keys `a`"
    )


# --- Counting semantics ---------------------------------------------------------------


def _call(call_id: str) -> Message:
    return make_message("assistant", tool_calls=(ToolCall(id=call_id, name="f"),))


def _result(call_id: str) -> Message:
    return make_message("tool", tool_results=(ToolResult(call_id=call_id, content=""),))


def test_a_second_result_for_an_answered_call_is_unpaired():
    """Matching is one-to-one: a duplicate result counts as unpaired."""
    counts = count_messages([_call("x"), _result("x"), _result("x")])
    assert counts == PairingCounts(
        conversations=1,
        tool_calls=1,
        tool_results=2,
        unpaired_calls=0,
        unpaired_results=1,
    )


def test_a_reused_call_id_needs_its_own_result():
    """Two calls with one id need two results after them."""
    one = count_messages([_call("x"), _call("x"), _result("x")])
    two = count_messages([_call("x"), _result("x"), _call("x"), _result("x")])
    assert (one.unpaired_calls, one.unpaired_results) == (1, 0)
    assert (two.unpaired_calls, two.unpaired_results) == (0, 0)
