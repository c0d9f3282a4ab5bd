"""Issue #11 item 4: more formats in, on real public files and real framework code.

Every ``tests/fixtures/transcripts/<format>/EXPECTED.tsv`` row is a public file
(``PROVENANCE.md`` beside it names repository, commit, path and licence) whose
counts under the documented pairing rules ``turnledger audit FILE --json``
must reproduce, with exit 0 exactly when nothing is unpaired. Negative controls
(a recording with no model conversation) are refused with exit 2 naming the
formats considered, and a Hypothesis fuzz of each reader, fed mutations of the
real files, sees only typed errors.
"""

from __future__ import annotations

import base64
import csv
import io
import json
import sqlite3
import struct
import zipfile
from contextlib import closing
from pathlib import Path

import pytest
import yaml
from agents import (
    Agent,
    ModelResponse,
    RunConfig,
    Runner,
    SQLiteSession,
    Usage,
    function_tool,
)
from agents.models.interface import Model
from google.adk.events import Event
from google.adk.sessions.sqlite_session_service import SqliteSessionService
from google.genai import types
from hypothesis import given
from hypothesis import strategies as st
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from tests.conftest import CORPUS, IN_CI
from tests.pipeline.test_formats_fuzz import FUZZ, _mutate, json_values, paths
from turnledger.pipeline.cli import main
from turnledger.pipeline.cli.transcripts import cmd_import
from turnledger.pipeline.formats import (
    FORMAT_NAMES,
    ParsedTranscript,
    TranscriptError,
    count_pairing,
    parse_transcript,
    read_transcript,
)
from turnledger.pipeline.formats.inspect_ai import MAX_SAMPLES, MAX_UNPACKED_BYTES

TRANSCRIPTS = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts"
COUNTS = (
    "conversations",
    "tool_calls",
    "tool_results",
    "unpaired_calls",
    "unpaired_results",
)


def _rows() -> list[dict[str, str]]:
    rows: list[dict[str, str]] = []
    for table in sorted(TRANSCRIPTS.glob("*/EXPECTED.tsv")):
        with table.open(newline="", encoding="utf-8") as handle:
            rows += list(csv.DictReader(handle, delimiter="\t"))
    return rows


ROWS = _rows()


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_every_format_folder_has_its_files_provenance_and_rows():
    """Each folder: a PROVENANCE.md, a licence file, and a row per listed file."""
    folders = sorted(p for p in TRANSCRIPTS.iterdir() if p.is_dir())
    assert folders
    for folder in folders:
        assert (folder / "PROVENANCE.md").is_file(), folder
        assert any(folder.glob("LICENSE*")), folder
        provenance = (folder / "PROVENANCE.md").read_text(encoding="utf-8")
        listed = [row["path"] for row in ROWS if row["path"].startswith(folder.name)]
        assert listed, folder
        for path in listed:
            assert (TRANSCRIPTS / path).is_file(), path
            assert f"`{Path(path).name}`" in provenance, path


@pytest.mark.parametrize("row", ROWS, ids=[row["path"] for row in ROWS])
def test_audit_json_reproduces_expected(capsys, row):
    """`turnledger audit FILE --json` gives the row's counts, format and exit code."""
    code, out, err = run(capsys, "audit", str(TRANSCRIPTS / row["path"]), "--json")
    assert err == ""
    report = json.loads(out)
    assert report["format"] == row["format"]
    assert [report[key] for key in COUNTS] == [int(row[key]) for key in COUNTS]
    unpaired = int(row["unpaired_calls"]) + int(row["unpaired_results"])
    assert code == (1 if unpaired else 0)
    assert len(report["violations"]) == unpaired


# --- HAR ---------------------------------------------------------------------

HAR = TRANSCRIPTS / "har"
LIST_FILES = HAR / "can-list-files-in-a-directory-using-tool-calls_2539538540.har"
OLLAMA = (
    HAR / "ollamaChatAdapterProvider-successfully-performs-a-request_2351809292.har"
)


def test_a_har_of_an_unknown_model_api_is_refused_naming_host_and_path(
    capsys, tmp_path
):
    """An API no shape knows (Writer's chat): exit 2, one line naming the request.

    The real Ollama recording (Ollama's `/api/chat` is a known shape, read in
    `EXPECTED.tsv`) sent to `api.writer.com/v1/chat` instead: its chat request
    is model traffic, so even a forced `har` read refuses it rather than
    reporting no conversation.
    """
    document = json.loads(OLLAMA.read_bytes())
    document["log"]["entries"][0]["request"]["url"] = "https://api.writer.com/v1/chat"
    unknown = tmp_path / "writer.har"
    unknown.write_text(json.dumps(document), encoding="utf-8")
    code, out, err = run(capsys, "audit", str(unknown), "--json")
    assert (code, out) == (2, "")
    assert err.count("\n") == 1
    assert "readable as har" in err
    assert "POST api.writer.com/v1/chat" in err
    with pytest.raises(TranscriptError, match=r"POST api\.writer\.com/v1/chat"):
        read_transcript(unknown, format="har")
    (conversation,) = read_transcript(OLLAMA).conversations
    assert conversation.api == "ollama"


def test_har_conversation_is_the_last_request_plus_its_response():
    """The later request supersedes the first; the answer comes from the response."""
    parsed = read_transcript(LIST_FILES)
    (conversation,) = parsed.conversations
    assert conversation.api == "openai-chat"
    assert [m.role for m in conversation.messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert conversation.messages[1].tool_calls[0].name == "ls"
    assert conversation.messages[3].text.startswith("The files in your root directory")
    assert conversation.origins[-1] == "log.entries[1].response[0]"


def _as_base64_har(source: Path) -> bytes:
    """The same recording with every body stored as HAR's base64 `encoding`."""
    document = json.loads(source.read_bytes())
    for entry in document["log"]["entries"]:
        for holder in (entry["request"]["postData"], entry["response"]["content"]):
            holder["text"] = base64.b64encode(holder["text"].encode()).decode()
            holder["encoding"] = "base64"
    return json.dumps(document).encode()


def test_base64_bodies_read_the_same_as_text_bodies():
    """`encoding: base64` bodies give the same messages; a bad one is a problem."""
    plain = read_transcript(LIST_FILES)
    encoded = parse_transcript(_as_base64_har(LIST_FILES), path="x.har")
    assert encoded.format == "har"
    assert encoded.conversations[0].messages == plain.conversations[0].messages
    document = json.loads(_as_base64_har(LIST_FILES))
    document["log"]["entries"][1]["response"]["content"]["text"] = "%%%"
    damaged = parse_transcript(json.dumps(document).encode(), format="har")
    assert [p.message.split(":")[0] for p in damaged.problems] == [
        "log.entries[1].response.content.text"
    ]
    assert count_pairing(damaged).tool_results == 1  # the request still counts


# --- Inspect AI: bounded reads of the zipped `.eval` -------------------------


def _eval_archive(write_samples) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("header.json", "{}")
        write_samples(archive)
    return buffer.getvalue()


def test_a_zip_bomb_eval_is_refused_before_it_is_inflated():
    """Samples declaring more than the input bound unpacked: one typed error."""

    def bomb(archive: zipfile.ZipFile) -> None:
        with archive.open("samples/1.json", "w", force_zip64=True) as member:
            member.write(b'{"messages": []}')  # valid JSON, padded with spaces
            chunk = b" " * (1 << 20)
            for _ in range(MAX_UNPACKED_BYTES // len(chunk) + 1):
                member.write(chunk)

    data = _eval_archive(bomb)
    assert len(data) < 2 * 1024 * 1024  # a quarter of a megabyte per 256 MiB
    with pytest.raises(TranscriptError, match="whose samples unpack to at most"):
        parse_transcript(data, path="bomb.eval")


def test_an_eval_with_too_many_samples_is_refused():
    """More than MAX_SAMPLES members under samples/: refused, nothing read."""

    def many(archive: zipfile.ZipFile) -> None:
        for index in range(MAX_SAMPLES + 1):
            archive.writestr(f"samples/{index}.json", "", zipfile.ZIP_STORED)

    with pytest.raises(TranscriptError, match=f"at most {MAX_SAMPLES} samples"):
        parse_transcript(_eval_archive(many), format="inspect-ai")


def test_a_member_that_inflates_past_its_declared_size_is_refused():
    """A lying size header fails the CRC check: refused as unreadable."""

    def small(archive: zipfile.ZipFile) -> None:
        archive.writestr("samples/1.json", '{"messages": []}' + " " * 5000)

    data = bytearray(_eval_archive(small))
    name = b"samples/1.json"
    headers = ((b"PK\x01\x02", 24, 28, 46), (b"PK\x03\x04", 22, 26, 30))
    for header, size_at, length_at, name_at in headers:  # central, then local
        start = 0
        while (found := data.find(header, start)) >= 0:
            (length,) = struct.unpack_from("<H", data, found + length_at)
            if data[found + name_at : found + name_at + length] == name:
                struct.pack_into("<I", data, found + size_at, 20)  # declared: 20
            start = found + 4
    with pytest.raises(TranscriptError, match="cannot be read"):
        parse_transcript(bytes(data), format="inspect-ai")


# --- Google ADK: sessions as its session services store them -----------------


def _adk_events() -> list[Event]:
    def content(role: str, part: types.Part) -> types.Content:
        return types.Content(role=role, parts=[part])

    call = types.FunctionCall(id="adk-1", name="get_weather", args={"city": "Paris"})
    answer = types.FunctionResponse(
        id="adk-1", name="get_weather", response={"result": "sunny"}
    )
    return [
        Event(
            author="user",
            invocation_id="i1",
            content=content("user", types.Part(text="Weather in Paris?")),
        ),
        Event(
            author="agent",
            invocation_id="i1",
            content=content("model", types.Part(function_call=call)),
        ),
        Event(
            author="agent",
            invocation_id="i1",
            content=content("user", types.Part(function_response=answer)),
        ),
        Event(
            author="agent",
            invocation_id="i1",
            content=content("model", types.Part(text="Sunny.")),
        ),
    ]


async def test_adk_sqlite_session_service_rows_and_session_json_read_alike(tmp_path):
    """google-adk's own stores: event_data rows (snake) and Session JSON (camel)."""
    service = SqliteSessionService(str(tmp_path / "adk.db"))
    session = await service.create_session(app_name="app", user_id="u1")
    for event in _adk_events():
        await service.append_event(session, event)
    with sqlite3.connect(tmp_path / "adk.db") as connection:
        rows = [
            json.loads(data)
            for (data,) in connection.execute(
                "SELECT event_data FROM events ORDER BY timestamp"
            )
        ]
    assert "function_call" in rows[1]["content"]["parts"][0]
    stored = await service.get_session(
        app_name="app", user_id="u1", session_id=session.id
    )
    assert stored is not None
    camel = stored.model_dump_json(by_alias=True, exclude_none=True).encode()
    assert b'"functionCall"' in camel
    from_rows = parse_transcript(json.dumps(rows).encode(), path="rows.json")
    from_session = parse_transcript(camel, path="session.json")
    for parsed in (from_rows, from_session):
        assert parsed.format == "adk"
        assert _counts(parsed) == (1, 1, 1, 0, 0)
    messages = from_rows.conversations[0].messages
    assert messages == from_session.conversations[0].messages
    assert [m.text for m in messages if m.text] == ["Weather in Paris?", "Sunny."]
    assert messages[1].tool_calls[0].arguments == '{"city":"Paris"}'
    assert from_session.conversations[0].id == session.id


def test_an_events_object_of_something_else_is_refused(capsys, tmp_path):
    """`events` that are no ADK events: exit 2, naming the formats considered."""
    path = tmp_path / "events.json"
    path.write_text(json.dumps({"events": [{"kind": "click", "x": 1}] * 3}))
    code, out, err = run(capsys, "audit", str(path), "--json")
    assert (code, out) == (2, "")
    assert "formats considered: adk (3 of 3 items unrecognised" in err


# --- OpenAI Agents SDK: session items as SQLiteSession stores them ------------


@function_tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


class _AddThenAnswer(Model):
    """The SDK's Model interface: a call to `add`, then the answer."""

    def __init__(self) -> None:
        self.calls = 0

    async def get_response(self, *_args: object, **_kwargs: object) -> ModelResponse:
        self.calls += 1
        if self.calls == 1:
            output: list[object] = [
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
        return ModelResponse(
            output=output,
            usage=Usage(),
            response_id=f"r{self.calls}",
        )

    def stream_response(self, *_args: object, **_kwargs: object):
        raise NotImplementedError


async def test_sqlite_session_items_read_as_responses_items(tmp_path):
    """Rows of SQLiteSession's message table, and get_items(): one paired exchange."""
    database = tmp_path / "agents.db"
    session = SQLiteSession("s1", database)
    agent = Agent(name="calc", instructions="Add.", model=_AddThenAnswer(), tools=[add])
    result = await Runner.run(
        agent,
        "What is 1+2?",
        session=session,
        run_config=RunConfig(tracing_disabled=True),
    )
    assert result.final_output == "3"
    with sqlite3.connect(database) as connection:
        rows = [
            json.loads(data)
            for (data,) in connection.execute(
                "SELECT message_data FROM agent_messages ORDER BY id"
            )
        ]
    items = await session.get_items()
    assert rows == items
    parsed = parse_transcript(json.dumps(rows).encode(), path="items.json")
    assert parsed.format == "openai-responses"
    assert _counts(parsed) == (1, 1, 1, 0, 0)
    assert [m.text for m in parsed.conversations[0].messages if m.text] == [
        "What is 1+2?",
        "3",
    ]
    assert parsed.skipped == {}


def _counts(parsed: ParsedTranscript) -> tuple[int, ...]:
    counts = count_pairing(parsed)
    return tuple(getattr(counts, key) for key in COUNTS)


# --- Fuzz: each new reader, fed mutations of the real files -------------------

FIXTURES = TRANSCRIPTS.parent
NEW_READERS = ("har", "openhands", "adk", "inspect-ai", "openai-agents")
_FOLDERS = {
    "har": ["transcripts/har"],
    "openhands": ["transcripts/openhands", "openhands"],
    "adk": ["transcripts/adk"],
    "inspect-ai": ["transcripts/inspect-ai", "inspect_ai"],
    "openai-agents": ["transcripts/openai-agents", "openai_agents"],
}


def _documents(fmt: str) -> list[object]:
    return [
        json.loads(path.read_bytes())
        for folder in _FOLDERS[fmt]
        for path in sorted((FIXTURES / folder).glob("*"))
        if path.suffix in {".json", ".har"}
    ]


DOCUMENTS = {fmt: _documents(fmt) for fmt in NEW_READERS}


def _only_typed_errors(data: bytes, fmt: str) -> None:
    for chosen in (fmt, "auto"):
        try:
            parsed = parse_transcript(data, format=chosen, path="fuzzed")
        except TranscriptError:
            continue
        assert isinstance(parsed, ParsedTranscript)
        count_pairing(parsed)


def test_every_new_reader_has_real_documents_to_mutate():
    """The fuzz below draws on the real files of every new reader."""
    assert all(DOCUMENTS[fmt] for fmt in NEW_READERS), DOCUMENTS.keys()


@pytest.mark.parametrize("fmt", NEW_READERS)
@FUZZ
@given(data=st.data(), where=paths, replacement=json_values, again=paths)
def test_mutated_real_documents_give_only_typed_errors(
    fmt: str,
    data: st.DataObject,
    where: list[int],
    replacement: object,
    again: list[int],
):
    """One or two nodes of a real file replaced: a transcript or a TranscriptError."""
    document = data.draw(st.sampled_from(DOCUMENTS[fmt]))
    mutated = _mutate(_mutate(document, where, replacement), again, replacement)
    _only_typed_errors(json.dumps(mutated).encode(), fmt)


OPENHANDS_EVENTS = json.loads(
    (TRANSCRIPTS / "openhands/wrong_initial_state.json").read_bytes()
)


@FUZZ
@given(
    where=paths,
    replacement=json_values,
    cut=st.integers(0, 50_000),
    noise=st.binary(max_size=6),
)
def test_mutated_openhands_json_lines_give_only_typed_errors(
    where: list[int], replacement: object, cut: int, noise: bytes
):
    """A real trajectory as JSON Lines, one node replaced and bytes spliced in."""
    events = _mutate(OPENHANDS_EVENTS, where, replacement)
    values = events if isinstance(events, list) else [events]
    lines = [json.dumps(event).encode() for event in values]
    text = b"\n".join(lines)
    at = cut % (len(text) + 1)
    _only_typed_errors(text[:at] + noise + text[at + len(noise) :], "openhands")


EVAL_LOG = (TRANSCRIPTS / "inspect-ai/log_message_deduplication.eval").read_bytes()


def _rezipped(replace: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with (
        zipfile.ZipFile(io.BytesIO(EVAL_LOG)) as source,
        zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as target,
    ):
        for name in source.namelist():
            target.writestr(name, replace.get(name, source.read(name)))
    return buffer.getvalue()


@FUZZ
@given(where=paths, replacement=json_values)
def test_mutated_eval_samples_give_only_typed_errors(
    where: list[int], replacement: object
):
    """A real `.eval` whose sample has a node replaced, zipped again."""
    with zipfile.ZipFile(io.BytesIO(EVAL_LOG)) as archive:
        name = next(n for n in archive.namelist() if n.startswith("samples/"))
        sample = json.loads(archive.read(name))
    mutated = json.dumps(_mutate(sample, where, replacement)).encode()
    _only_typed_errors(_rezipped({name: mutated}), "inspect-ai")


@FUZZ
@given(cut=st.integers(0, len(EVAL_LOG)), noise=st.binary(min_size=1, max_size=8))
def test_byte_mutated_eval_archives_give_only_typed_errors(cut: int, noise: bytes):
    """A real `.eval` with bytes overwritten anywhere (headers, data, directory)."""
    data = EVAL_LOG[:cut] + noise + EVAL_LOG[cut + len(noise) :]
    _only_typed_errors(data, "inspect-ai")


# --- HAR reads bodies as cassettes do; import and export ----------------------

CORPUS_CASSETTES = sorted((CORPUS / "pydantic-ai").glob("*.yaml"))


def _har_text(body: object) -> dict[str, str]:
    """A cassette body as HAR `text` (bytes as base64, objects as JSON)."""
    if isinstance(body, dict) and "string" in body:
        body = body["string"]
    if isinstance(body, bytes):
        return {"text": base64.b64encode(body).decode(), "encoding": "base64"}
    if isinstance(body, str):
        return {"text": body}
    return {"text": json.dumps(body)}


def _har_headers(headers: object) -> list[dict[str, str]]:
    return [
        {"name": str(name), "value": str(one)}
        for name, value in (headers or {}).items()  # type: ignore[attr-defined]
        for one in (value if isinstance(value, list) else [value])
    ]


def _cassette_as_har(cassette: dict[str, object]) -> bytes:
    entries = []
    for interaction in cassette["interactions"]:  # type: ignore[attr-defined]
        request, response = interaction["request"], interaction["response"]
        body = request.get("parsed_body", request.get("body"))
        content = response.get("parsed_body", response.get("body"))
        entries.append(
            {
                "request": {
                    "method": request.get("method", ""),
                    "url": request.get("uri", ""),
                    "headers": _har_headers(request.get("headers")),
                    "postData": _har_text(body) if body is not None else {},
                },
                "response": {
                    "status": (response.get("status") or {}).get("code", 200),
                    "headers": _har_headers(response.get("headers")),
                    "content": _har_text(content) if content is not None else {},
                },
            }
        )
    return json.dumps({"log": {"version": "1.2", "entries": entries}}).encode()


@pytest.mark.skipif(not CORPUS_CASSETTES and not IN_CI, reason="no corpus")
def test_har_reads_every_corpus_cassette_as_the_cassette_reader_does():
    """The 45 real cassettes as HAR (gzip as base64, SSE as text): same messages."""
    assert len(CORPUS_CASSETTES) == 45
    for path in CORPUS_CASSETTES:
        cassette = yaml.safe_load(path.read_bytes())
        har = parse_transcript(_cassette_as_har(cassette), path="recording.har")
        assert har.format == "har", path.name
        direct = read_transcript(path, format="cassette")
        assert [c.messages for c in har.conversations] == [
            c.messages for c in direct.conversations
        ], path.name
        assert count_pairing(har) == count_pairing(direct), path.name
        assert [c.api for c in har.conversations] == [
            c.api for c in direct.conversations
        ]


def test_import_a_har_then_export_keeps_the_call_and_its_result(capsys, tmp_path):
    """import writes one session; its openai-chat export has the call and result."""
    db = str(tmp_path / "ledger.db")
    code, out, err = run(capsys, "--db", db, "import", str(LIST_FILES), "--json")
    assert (code, err) == (0, "")
    report = json.loads(out)
    assert report["format"] == "har"
    (session,) = report["sessions"]
    code, out, _ = run(
        capsys, "--db", db, "export", session["session"], "--format", "openai-chat"
    )
    assert code == 0
    messages = json.loads(out)["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[1]["tool_calls"][0]["id"] == "call_QGrPTwIBYpTYdRJWISkx7Njt"
    assert messages[2]["tool_call_id"] == "call_QGrPTwIBYpTYdRJWISkx7Njt"
    code, out, _ = run(capsys, "--db", db, "audit", session["session"], "--json")
    assert code == 0
    assert json.loads(out)["unpaired_calls"] == 0


def test_import_help_names_every_format():
    """`turnledger import --help`'s text (not only the choices) names each reader."""
    text = " ".join((cmd_import.__doc__ or "").split())
    for name in FORMAT_NAMES:
        assert f" {name}" in text, name


@pytest.mark.parametrize("shape", ["json lines", "history record"])
def test_openhands_json_lines_and_history_records_are_detected(shape):
    """The real trajectory as JSON Lines, or as an evaluation record's `history`."""
    if shape == "json lines":
        data = b"\n".join(json.dumps(event).encode() for event in OPENHANDS_EVENTS)
    else:
        data = json.dumps({"instance_id": "x", "history": OPENHANDS_EVENTS}).encode()
    parsed = parse_transcript(data, path="trajectory")
    direct = read_transcript(TRANSCRIPTS / "openhands/wrong_initial_state.json")
    assert parsed.format == "openhands"
    assert parsed.conversations[0].messages == direct.conversations[0].messages
    assert _counts(parsed) == (1, 4, 3, 1, 0)


def test_openhands_calls_of_one_model_response_are_one_assistant_message():
    """Two actions of one response, each run and observed: one message, text once."""
    events = json.loads(json.dumps(OPENHANDS_EVENTS))
    first, second = [e for e in events if e.get("action") in {"read", "run"}][:2]
    second["tool_call_metadata"]["model_response"]["id"] = first["tool_call_metadata"][
        "model_response"
    ]["id"]
    events[0]["args"]["image_urls"] = ["data:image/png;base64,AAAA"]
    parsed = parse_transcript(json.dumps(events).encode(), format="openhands")
    messages = parsed.conversations[0].messages
    assert [m.role for m in messages][:4] == ["user", "assistant", "tool", "tool"]
    calls = messages[1].tool_calls
    assert [c.name for c in calls] == ["str_replace_editor", "execute_bash"]
    texts = [m.text for m in messages if m.role == "assistant" and m.text]
    assert len(texts) == len(set(texts))
    assert parsed.skipped == {"image_url": 1}
    assert _counts(parsed) == (1, 4, 3, 1, 0)


@pytest.mark.parametrize("row", ROWS, ids=[row["path"] for row in ROWS])
def test_import_keeps_every_call_and_result(capsys, tmp_path, row):
    """import writes a session per conversation; the ledger audit counts the same items."""
    db = str(tmp_path / "ledger.db")
    code, out, err = run(
        capsys, "--db", db, "import", str(TRANSCRIPTS / row["path"]), "--json"
    )
    assert (code, err) == (0, "")
    report = json.loads(out)
    assert report["format"] == row["format"]
    assert len(report["sessions"]) == int(row["conversations"])
    code, out, _ = run(capsys, "--db", db, "audit", "--json")
    ledger = json.loads(out)
    assert ledger["conversations"] == int(row["conversations"])
    assert (ledger["tool_calls"], ledger["tool_results"]) == (
        int(row["tool_calls"]),
        int(row["tool_results"]),
    )


# --- Session databases: the SQLite files the frameworks keep -----------------


async def _adk_database(path: Path, sessions: int) -> None:
    service = SqliteSessionService(str(path))
    for number in range(sessions):
        session = await service.create_session(app_name="app", user_id=f"u{number}")
        for event in _adk_events():
            await service.append_event(session, event)


async def _agents_database(path: Path) -> list[SQLiteSession]:
    sessions = [SQLiteSession(key, path) for key in ("s1", "s2")]
    for session in sessions:
        agent = Agent(name="calc", model=_AddThenAnswer(), tools=[add])
        await Runner.run(
            agent,
            "What is 1+2?",
            session=session,
            run_config=RunConfig(tracing_disabled=True),
        )
    return sessions  # still open: SQLiteSession's WAL holds the writes


async def test_session_databases_are_read_whole(capsys, tmp_path):
    """ADK's SqliteSessionService file and SQLiteSession's file: a session each."""
    adk_db, agents_db = tmp_path / "adk.db", tmp_path / "agents.db"
    await _adk_database(adk_db, 2)
    open_sessions = await _agents_database(agents_db)
    code, out, err = run(capsys, "audit", str(agents_db), "--json")
    assert (code, out) == (2, "")
    assert "not yet checkpointed in agents.db-wal" in err
    for session in open_sessions:
        session.close()  # the last close checkpoints the WAL into the file
    for path, fmt in ((adk_db, "adk"), (agents_db, "openai-agents")):
        code, out, err = run(capsys, "audit", str(path), "--json")
        assert (code, err) == (0, "")
        report = json.loads(out)
        assert report["format"] == fmt
        assert [report[key] for key in COUNTS] == [2, 2, 2, 0, 0]
    parsed = read_transcript(agents_db)
    assert [c.id for c in parsed.conversations] == ["s1", "s2"]
    assert [m.text for m in parsed.conversations[0].messages if m.text] == [
        "What is 1+2?",
        "3",
    ]


def test_a_database_of_something_else_or_a_view_is_refused(capsys, tmp_path):
    """No session table: exit 2; a view posing as the table (a CPU bomb): refused."""
    other = tmp_path / "other.db"
    with closing(sqlite3.connect(other)) as connection:
        connection.execute("CREATE TABLE notes (body TEXT)")
    code, out, err = run(capsys, "audit", str(other), "--json")
    assert (code, out) == (2, "")
    assert "found an SQLite file without them" in err
    bomb = tmp_path / "bomb.db"
    with closing(sqlite3.connect(bomb)) as connection:
        connection.execute(
            "CREATE VIEW agent_messages AS WITH RECURSIVE n(i) AS "
            "(SELECT 1 UNION ALL SELECT i + 1 FROM n) "
            "SELECT i AS id, 's' AS session_id, '{}' AS message_data FROM n"
        )
    with pytest.raises(TranscriptError, match="without a `agent_messages` table"):
        read_transcript(bomb, format="openai-agents")


async def test_byte_mutated_session_databases_give_only_typed_errors(tmp_path):
    """Bytes overwritten all over a real ADK database: a transcript or a TranscriptError."""
    await _adk_database(tmp_path / "adk.db", 1)
    data = (tmp_path / "adk.db").read_bytes()

    @FUZZ
    @given(cut=st.integers(0, len(data)), noise=st.binary(min_size=1, max_size=16))
    def mutated(cut: int, noise: bytes) -> None:
        _only_typed_errors(data[:cut] + noise + data[cut + len(noise) :], "adk")

    mutated()
