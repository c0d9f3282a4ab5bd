"""Issue #25 item 2: more model APIs inside cassettes and HAR files.

Real VCR cassettes of Cohere v2 chat, Mistral, AWS Bedrock Converse (and its
binary event stream), Ollama's own ``/api/chat`` and OpenAI compatible hosts
(Groq, Hugging Face, OpenRouter) are read with the counts that an independent
counter (``tests/cassette_counter.py``, which never imports turnledger) gives.
``test_formats_more.py`` runs ``audit --json`` and ``import`` on every row of
``tests/fixtures/transcripts/cassettes/EXPECTED.tsv``; this file checks that
those rows are the counter's output, that the readers agree with it, and the
pieces each API needed (stream assembly, event stream frames, pairing).
"""

from __future__ import annotations

import base64
import csv
import json
import struct
import zlib
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from tests.cassette_counter import count_file
from tests.pipeline.test_formats_fuzz import FUZZ, _mutate, json_values, paths
from turnledger.pipeline.formats import (
    ParsedTranscript,
    TranscriptError,
    count_pairing,
    parse_transcript,
    read_transcript,
)
from turnledger.pipeline.formats._http import (
    BodyError,
    decode_body,
    parse_aws_event_stream,
)
from turnledger.pipeline.formats._shapes import shape_for

CASSETTES = Path(__file__).resolve().parents[1] / "fixtures/transcripts/cassettes"
COUNTS = (
    "conversations",
    "tool_calls",
    "tool_results",
    "unpaired_calls",
    "unpaired_results",
)
with (CASSETTES / "EXPECTED.tsv").open(newline="", encoding="utf-8") as handle:
    ROWS = list(csv.DictReader(handle, delimiter="\t"))
FOLDERS = {
    "cohere",
    "mistral",
    "bedrock",
    "ollama",
    "groq",
    "huggingface",
    "openrouter",
}


def _path(row: dict[str, str]) -> Path:
    return CASSETTES.parent / row["path"]


def test_every_provider_folder_has_rows_with_tool_calls():
    """Each folder is listed and has a file with tool calls; every file < 200 KB."""
    with_calls = {row["path"].split("/")[1] for row in ROWS if int(row["tool_calls"])}
    assert with_calls == FOLDERS
    assert all(_path(row).stat().st_size < 200_000 for row in ROWS)


@pytest.mark.parametrize("row", ROWS, ids=[row["path"] for row in ROWS])
def test_expected_rows_are_the_independent_counters_output(row):
    """The counter, run on the file, prints exactly the row's counts."""
    assert count_file(_path(row)) == tuple(int(row[key]) for key in COUNTS)


@pytest.mark.parametrize("row", ROWS, ids=[row["path"] for row in ROWS])
def test_the_reader_agrees_with_the_counter_and_names_the_api(row):
    """Detection reads a cassette; each conversation has the API shape the row names."""
    parsed = read_transcript(_path(row))
    counts = count_pairing(parsed)
    assert parsed.format == "cassette"
    assert parsed.problems == ()
    assert parsed.coverage.refused == ""
    assert tuple(getattr(counts, key) for key in COUNTS) == count_file(_path(row))
    api = row["notes"].split()[0]
    assert {conversation.api for conversation in parsed.conversations} == {api}


def test_shapes_are_chosen_by_path_and_host():
    """Bedrock needs `/model/{id}/`; `/chat/completions` is Mistral's on mistral.ai."""
    cases = {
        "https://bedrock-runtime.us-east-1.amazonaws.com/model/a.b%3A0/converse": (
            "bedrock-converse"
        ),
        "https://bedrock-runtime.eu-west-1.amazonaws.com/model/x/converse-stream": (
            "bedrock-converse"
        ),
        "https://example.com/converse": None,
        "https://bedrock-runtime.us-east-1.amazonaws.com/model/us.anthropic.c-4/invoke": (
            "anthropic"
        ),
        "https://x/model/anthropic.c/invoke-with-response-stream": "anthropic",
        "https://bedrock-runtime.us-east-1.amazonaws.com/model/meta.llama3/invoke": None,
        "https://example.com/model/converse": None,
        "https://api.cohere.com/v2/chat": "cohere",
        "https://api.cohere.com/v1/chat": None,
        "http://127.0.0.1:11434/api/chat": "ollama",
        "https://api.mistral.ai/v1/chat/completions": "mistral",
        "https://api.groq.com/openai/v1/chat/completions": "openai-chat",
        "https://openrouter.ai/api/v1/chat/completions": "openai-chat",
        "http://[::1/api/chat": None,
    }
    for uri, name in cases.items():
        shape = shape_for(uri)
        assert (shape.name if shape else None) == name, uri


def test_cohere_conversation_keeps_the_tool_plan_and_document_results():
    """The plan is the assistant's text; a document result becomes JSON text."""
    parsed = read_transcript(
        CASSETTES / "cohere/test_langchain_tool_calling_agent.yaml"
    )
    (conversation,) = parsed.conversations
    assert [m.role for m in conversation.messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    call = conversation.messages[2].tool_calls[0]
    assert (call.id, call.name, json.loads(call.arguments)) == (
        "magic_function_avre629p2czn",
        "magic_function",
        {"input": 3},
    )
    assert conversation.messages[2].text.startswith("I will use the magic_function")
    result = conversation.messages[3].tool_results[0]
    assert (result.call_id, json.loads(result.content)) == (call.id, {"output": "5"})


def test_cohere_stream_assembles_the_call_from_its_pieces():
    """tool-call-start gives id and name, tool-call-delta the arguments in pieces."""
    parsed = read_transcript(CASSETTES / "cohere/test_streaming_tool_call.yaml")
    (conversation,) = parsed.conversations
    call = conversation.messages[-1].tool_calls[0]
    assert (call.id, call.name) == ("Person_2fnrphbsnr66", "Person")
    assert json.loads(call.arguments) == {"name": "Erick", "age": 27}
    assert conversation.origins[-1] == "interactions[0].response[0]"


def test_bedrock_event_stream_is_decoded_into_the_call_and_its_result():
    """The binary converse-stream body: text and a toolUse assembled from frames."""
    parsed = read_transcript(CASSETTES / "bedrock/test_bedrock_model_iter_stream.yaml")
    (conversation,) = parsed.conversations
    roles = [m.role for m in conversation.messages]
    assert roles == ["system", "user", "assistant", "user", "assistant"]
    call = conversation.messages[2].tool_calls[0]
    assert (call.name, json.loads(call.arguments)) == (
        "get_temperature",
        {"city": "Paris"},
    )
    assert conversation.messages[3].tool_results[0].call_id == call.id
    assert conversation.messages[4].text.startswith("The current temperature in Paris")


def test_bedrock_error_results_and_provider_run_tools():
    """status: error marks the result; server_tool_use blocks are skipped, counted."""
    retry = read_transcript(CASSETTES / "bedrock/test_bedrock_model_retry.yaml")
    (result,) = retry.conversations[0].messages[3].tool_results
    assert result.is_error
    code = read_transcript(
        CASSETTES / "bedrock/test_bedrock_model_with_code_execution_tool.yaml"
    )
    assert code.skipped == {
        "toolResult:nova_code_interpreter_result": 2,
        "toolUse:server_tool_use": 2,
    }


def _frame(event_type: str, payload: bytes, message_type: str = "event") -> bytes:
    headers = b""
    for name, value in ((":event-type", event_type), (":message-type", message_type)):
        encoded = value.encode()
        headers += bytes([len(name)]) + name.encode() + b"\x07"
        headers += struct.pack(">H", len(encoded)) + encoded
    total = 12 + len(headers) + len(payload) + 4
    prelude = struct.pack(">II", total, len(headers))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    body = prelude + headers + payload
    return body + struct.pack(">I", zlib.crc32(body))


def test_aws_event_stream_frames_are_checked():
    """Events become {type: payload}; a flipped byte or a cut frame is a BodyError."""
    data = _frame("messageStart", b'{"role":"assistant"}') + _frame(
        "throttlingException", b'{"message":"slow down"}', "exception"
    )
    stream = parse_aws_event_stream(data)
    assert stream.events == [{"messageStart": {"role": "assistant"}}]
    assert stream.problems == [
        "Expected an event, found an exception frame (throttlingException)"
    ]
    damaged = bytearray(data)
    damaged[30] ^= 1
    with pytest.raises(BodyError, match="bad CRC"):
        parse_aws_event_stream(bytes(damaged))
    with pytest.raises(BodyError, match="AWS event stream frame"):
        parse_aws_event_stream(data[:-3])
    response = {
        "headers": {"content-type": ["application/vnd.amazon.eventstream"]},
        "body": {"string": data[:5]},
    }
    with pytest.raises(BodyError):
        decode_body(response)


def test_a_damaged_event_stream_in_a_cassette_is_a_problem_not_a_silent_gap():
    """A frame cut short: the reader reports a problem naming the body and why."""
    path = CASSETTES / "bedrock/test_bedrock_model_iter_stream.yaml"
    document = yaml.safe_load(path.read_bytes())
    body = document["interactions"][0]["response"]["body"]
    body["string"] = body["string"][:-1]
    parsed = parse_transcript(yaml.safe_dump(document).encode(), path="x.yaml")
    (problem,) = parsed.problems
    assert problem.message.startswith("interactions[0].response.body: expected an AWS")


def _sse(events: list[dict[str, object]]) -> str:
    return (
        "".join(f"data: {json.dumps(event)}\n\n" for event in events)
        + "data: [DONE]\n\n"
    )


def _cassette(uri: str, request: object, response: str, content_type: str) -> bytes:
    interaction = {
        "request": {"method": "POST", "uri": uri, "body": json.dumps(request)},
        "response": {
            "status": {"code": 200},
            "headers": {"content-type": [content_type]},
            "body": {"string": response},
        },
    }
    return yaml.safe_dump({"interactions": [interaction]}).encode()


def test_mistral_stream_calls_with_the_same_index_stay_separate():
    """Mistral may send two whole calls at index 0: two calls, not one merged."""
    calls = [
        {"id": f"call{n}", "index": 0, "function": {"name": "f", "arguments": {"n": n}}}
        for n in (1, 2)
    ]
    events = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": calls}}]},
    ]
    request = {"messages": [{"role": "user", "content": "go"}]}
    data = _cassette(
        "https://api.mistral.ai/v1/chat/completions",
        request,
        _sse(events),
        "text/event-stream",
    )
    (conversation,) = parse_transcript(data, format="cassette").conversations
    assert conversation.api == "mistral"
    found = [
        (c.id, json.loads(c.arguments)) for c in conversation.messages[-1].tool_calls
    ]
    assert found == [("call1", {"n": 1}), ("call2", {"n": 2})]


def test_ollama_json_lines_stream_and_calls_without_ids_pair_in_order():
    """An x-ndjson stream is assembled; id-less results answer id-less calls."""
    lines = [
        {"message": {"role": "assistant", "content": "Che"}, "done": False},
        {"message": {"role": "assistant", "content": "cking"}, "done": False},
        {
            "message": {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"function": {"name": "a", "arguments": {"x": 1}}}],
            },
            "done": True,
        },
    ]
    history = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"function": {"name": "a", "arguments": {}}},
                {"function": {"name": "b", "arguments": {}}},
            ],
        },
        {"role": "tool", "content": "B", "tool_name": "b"},
        {"role": "tool", "content": "A"},
    ]
    data = _cassette(
        "http://localhost:11434/api/chat",
        {"messages": history},
        "\n".join(json.dumps(line) for line in lines),
        "application/x-ndjson",
    )
    parsed = parse_transcript(data, format="cassette")
    (conversation,) = parsed.conversations
    first, second = conversation.messages[1].tool_calls
    results = [m.tool_results[0] for m in conversation.messages[2:4]]
    assert [r.call_id for r in results] == [second.id, first.id]
    last = conversation.messages[-1]
    assert last.text == "Checking"
    assert [c.name for c in last.tool_calls] == ["a"]
    counts = count_pairing(parsed)
    assert (counts.tool_calls, counts.tool_results, counts.unpaired_calls) == (3, 2, 1)


def test_an_unknown_api_is_still_refused():
    """Cohere's v1 chat is no known shape: its request is refused, not skipped."""
    data = _cassette(
        "https://api.cohere.com/v1/chat",
        {"message": "hi", "chat_history": []},
        "{}",
        "application/json",
    )
    with pytest.raises(TranscriptError, match=r"POST api\.cohere\.com/v1/chat"):
        parse_transcript(data, format="cassette")


def _with_parsed_bodies(path: Path) -> object:
    """The cassette with its JSON bodies decoded, so mutations reach inside them."""
    document = yaml.safe_load(path.read_bytes())
    for interaction in document["interactions"]:
        for side in ("request", "response"):
            message = interaction[side]
            try:
                body = decode_body(message)
            except BodyError:
                continue
            if isinstance(body, (dict, list)):
                message.pop("body", None)
                message["parsed_body"] = body
    return json.loads(json.dumps(document, default=str))


DOCUMENTS = [_with_parsed_bodies(_path(row)) for row in ROWS]


@FUZZ
@given(data=st.data(), where=paths, replacement=json_values, again=paths)
def test_mutated_real_cassettes_give_only_typed_errors(
    data: st.DataObject, where: list[int], replacement: object, again: list[int]
):
    """One or two nodes of a real cassette replaced: a transcript or a TranscriptError."""
    document = data.draw(st.sampled_from(DOCUMENTS))
    mutated = _mutate(_mutate(document, where, replacement), again, replacement)
    encoded = json.dumps(mutated).encode()
    for chosen in ("cassette", "auto"):
        try:
            parsed = parse_transcript(encoded, format=chosen, path="fuzzed.yaml")
        except TranscriptError:
            continue
        assert isinstance(parsed, ParsedTranscript)
        count_pairing(parsed)


def _as_har(path: Path) -> bytes:
    """A cassette's exchanges as HAR entries (bodies base64, headers as pairs)."""
    entries = []
    for interaction in yaml.safe_load(path.read_bytes())["interactions"]:
        request, response = interaction["request"], interaction["response"]
        raw = response["body"]["string"]
        data = raw if isinstance(raw, bytes) else raw.encode()
        headers = [
            {"name": name, "value": value if isinstance(value, str) else value.decode()}
            for name, values in response["headers"].items()
            for value in values
        ]
        entries.append(
            {
                "request": {
                    "method": request["method"],
                    "url": request["uri"],
                    "headers": [],
                    "postData": {
                        "mimeType": "application/json",
                        "text": request["body"],
                    },
                },
                "response": {
                    "status": response["status"]["code"],
                    "headers": headers,
                    "content": {
                        "mimeType": "application/vnd.amazon.eventstream",
                        "text": base64.b64encode(data).decode(),
                        "encoding": "base64",
                    },
                },
            }
        )
    return json.dumps({"log": {"version": "1.2", "entries": entries}}).encode()


def test_a_har_of_a_bedrock_event_stream_reads_as_the_cassette_does():
    """The same exchanges recorded as HAR: detected, decoded, the same counts."""
    path = CASSETTES / "bedrock/test_bedrock_model_iter_stream.yaml"
    parsed = parse_transcript(_as_har(path), path="stream.har")
    cassette = read_transcript(path)
    assert parsed.format == "har"
    assert parsed.problems == ()
    assert count_pairing(parsed) == count_pairing(cassette)
    (conversation,) = parsed.conversations
    assert conversation.api == "bedrock-converse"
    assert conversation.messages == cassette.conversations[0].messages


def test_bedrock_invoke_stream_chunks_are_the_models_own_events():
    """InvokeModelWithResponseStream: each chunk's base64 bytes are an Anthropic event."""
    events = [
        {"type": "message_start", "message": {"role": "assistant", "content": []}},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "f",
                "input": {},
            },
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '{"a": 1}'},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "message_stop"},
    ]
    body = b"".join(
        _frame(
            "chunk",
            json.dumps(
                {"bytes": base64.b64encode(json.dumps(e).encode()).decode()}
            ).encode(),
        )
        for e in events
    )
    stream = parse_aws_event_stream(body)
    assert stream.events == events
    interaction = {
        "request": {
            "method": "POST",
            "uri": "https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.c/invoke-with-response-stream",
            "body": json.dumps(
                {
                    "anthropic_version": "bedrock-2023-05-31",
                    "messages": [{"role": "user", "content": "go"}],
                }
            ),
        },
        "response": {
            "status": {"code": 200},
            "headers": {"content-type": ["application/vnd.amazon.eventstream"]},
            "body": {"string": body},
        },
    }
    data = yaml.safe_dump({"interactions": [interaction]}).encode()
    (conversation,) = parse_transcript(data, format="cassette").conversations
    assert conversation.api == "anthropic"
    (call,) = conversation.messages[-1].tool_calls
    assert (call.id, call.name, json.loads(call.arguments)) == (
        "toolu_1",
        "f",
        {"a": 1},
    )
    damaged = _frame("chunk", b'{"bytes": "not base64!"}')
    assert (
        parse_aws_event_stream(damaged)
        .problems[0]
        .startswith("Expected a base64 JSON chunk")
    )


def test_a_body_stored_as_a_yaml_mapping_is_the_body():
    """`body: {messages: ...}` (no `string` key) is the decoded body, not an empty one."""
    body = {"messages": [{"role": "user", "content": "hi"}]}
    assert decode_body({"body": body}) == body
    assert decode_body({"body": [1, 2]}) == [1, 2]
    assert decode_body({"body": {"string": '{"a": 1}'}}) == {"a": 1}
    assert decode_body({"body": {"string": ""}}) is None
