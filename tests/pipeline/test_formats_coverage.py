"""Coverage accounting: every record of a file is mapped or accounted for.

A reader's records (lines, items, interactions, entries, rows) each end mapped
or accounted for with a reason, and a record that is model traffic no reader
understands (a request to a model API no shape knows, a message or tool call
of an unknown schema) makes the file refused (exit 2, one line naming it),
never a clean verdict. Checked on every corpus and fixture file, on public
cassettes of APIs no reader knows (``fixtures/transcripts/openllmetry``), and
by a Hypothesis property that mutates records of known files.
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import NamedTuple

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from turnledger.pipeline.audit import audit_parsed
from turnledger.pipeline.cli import main
from turnledger.pipeline.formats import (
    ParsedTranscript,
    TranscriptError,
    parse_transcript,
    read_transcript,
)

ROOT = Path(__file__).resolve().parents[2]
TRANSCRIPTS = ROOT / "tests" / "fixtures" / "transcripts"
CORPUS = ROOT.parent / "shared" / "corpus"
PUBLIC = TRANSCRIPTS / "openllmetry"
IN_CI = os.environ.get("CI", "").lower() == "true"


class Known(NamedTuple):
    path: Path
    tool_calls: int


def _known() -> list[Known]:
    """Every file of the corpus and of the fixtures with its expected calls."""
    tables = [(CORPUS / "EXPECTED.tsv", CORPUS)] if CORPUS.exists() else []
    tables += [(t, TRANSCRIPTS) for t in sorted(TRANSCRIPTS.glob("*/EXPECTED.tsv"))]
    found: list[Known] = []
    for table, base in tables:
        with table.open(newline="", encoding="utf-8") as handle:
            found += [
                Known(base / row["path"], int(row["tool_calls"]))
                for row in csv.DictReader(handle, delimiter="\t")
            ]
    return found


KNOWN = _known()


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_corpus_is_there_in_ci():
    """Without the corpus only the fixtures are checked; in CI it must be there."""
    if IN_CI:
        assert CORPUS.exists()
    assert len(KNOWN) >= 10


@pytest.mark.parametrize("known", KNOWN, ids=lambda k: k.path.name)
def test_every_record_ends_mapped_or_accounted_for(known: Known):
    """read == mapped + accounted, per kind and in total; no known file is refused."""
    parsed = read_transcript(known.path)
    coverage = parsed.coverage
    assert coverage.refused == ""
    assert coverage.read == coverage.mapped + coverage.accounted
    assert coverage.read == sum(k["read"] for k in coverage.kinds.values())
    assert coverage.mapped == sum(k["mapped"] for k in coverage.kinds.values())
    assert coverage.accounted == sum(coverage.reasons.values())
    assert bool(coverage.first) == bool(coverage.accounted)
    # Every item a reader examined is a record; malformed lines are records too.
    malformed_lines = sum(
        n for reason, n in coverage.reasons.items() if "<not a JSON object>" in reason
    )
    assert coverage.read == parsed.items + malformed_lines
    assert coverage.read > 0


class Outcome(NamedTuple):
    path: Path
    names: str
    held_calls: int
    held_results: int


def _outcomes() -> list[Outcome]:
    with (PUBLIC / "OUTCOMES.tsv").open(newline="", encoding="utf-8") as handle:
        return [
            Outcome(
                TRANSCRIPTS / row["path"],
                row["names"],
                int(row["held_calls"]),
                int(row["held_results"]),
            )
            for row in csv.DictReader(handle, delimiter="\t")
        ]


OUTCOMES = _outcomes()


@pytest.mark.parametrize("case", OUTCOMES, ids=lambda c: c.path.name)
def test_public_cassettes_of_unknown_apis_are_exact_or_refused(capsys, tmp_path, case):
    """Model traffic: refused (exit 2, naming host and path, nothing imported),
    or, once a request shape reads the API, exactly the calls the file holds.
    """
    assert case.path.stat().st_size < 200_000
    code, out, err = run(capsys, "audit", str(case.path), "--json")
    if code != 2:  # a shape reads this API now: the counts are exact
        report = json.loads(out)
        assert report["tool_calls"] == case.held_calls
        assert report["tool_results"] == case.held_results
        assert report["conversations"] >= 1
        return
    db = str(tmp_path / "l.db")
    for args in (
        ("audit", str(case.path), "--json"),
        ("audit", str(case.path), "--format", "cassette"),
        ("audit", str(case.path), "--strict"),
        ("--db", db, "import", str(case.path), "--json"),
    ):
        code, out, err = run(capsys, *args)
        assert (code, out) == (2, "")
        assert err.count("\n") == 1
        assert case.names in err
    code, out, _ = run(capsys, "--db", db, "stats", "--json")
    assert code != 0 or json.loads(out)["events"] == 0


def test_a_cassette_without_a_conversation_is_read_and_accounted_for(capsys):
    """Ollama embeddings: no conversation, so a clean read; --strict refuses it."""
    path = PUBLIC / "test_ollama_embeddings_legacy.yaml"
    code, out, _ = run(capsys, "audit", str(path), "--json")
    report = json.loads(out)
    assert (code, report["tool_calls"], report["conversations"]) == (0, 0, 0)
    assert report["coverage"]["reasons"] == {
        "interaction POST request: not a model request": 1
    }
    code, out, _ = run(capsys, "audit", str(path))
    assert code == 0
    assert out.splitlines()[-1] == (
        "  1 of 1 records not mapped, first interactions[0] (POST request):"
        " not a model request"
    )
    code, out, err = run(capsys, "audit", str(path), "--strict")
    assert (code, out) == (2, "")
    assert "not mapped, first interactions[0] (POST request)" in err


def _cassette(tmp_path: Path, *interactions: dict[str, object]) -> Path:
    path = tmp_path / "cassette.yaml"
    path.write_text(yaml.safe_dump({"interactions": list(interactions)}))
    return path


def _exchange(method: str, uri: str, body: object, answer: object) -> dict[str, object]:
    return {
        "request": {"method": method, "uri": uri, "body": json.dumps(body)},
        "response": {"status": {"code": 200}, "body": {"string": json.dumps(answer)}},
    }


CHAT = _exchange(
    "POST",
    "https://api.openai.com/v1/chat/completions",
    {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
    {"choices": [{"message": {"role": "assistant", "content": "hello"}}]},
)


def test_a_request_to_an_unknown_model_api_refuses_the_file(capsys, tmp_path):
    """One POST no shape reads, among known ones: refused, one line naming it."""
    unknown = _exchange(
        "POST",
        "https://llm.example.test/v3/converse?x=1",
        {"inputs": [{"speaker": "user", "text": "call the tool"}]},
        {"output": {"toolUse": {"name": "f", "input": {}}}},
    )
    path = _cassette(tmp_path, CHAT, unknown)
    code, out, err = run(capsys, "audit", str(path))
    assert (code, out) == (2, "")
    assert err.count("\n") == 1
    assert "interactions[1] POST llm.example.test/v3/converse" in err
    assert "`inputs`" in err


def test_requests_without_a_conversation_are_accounted_not_refused(capsys, tmp_path):
    """Embeddings, an empty conversation create and a GET: read, each accounted for."""
    path = _cassette(
        tmp_path,
        _exchange("POST", "https://api.openai.com/v1/embeddings", {"input": "x"}, {}),
        _exchange("POST", "https://api.openai.com/v1/conversations", {}, {"id": "c"}),
        {"request": {"method": "GET", "uri": "https://api.openai.com/v1/models"}},
        CHAT,
    )
    code, out, _ = run(capsys, "audit", str(path), "--json")
    report = json.loads(out)
    assert (code, report["conversations"]) == (0, 1)
    coverage = report["coverage"]
    assert coverage["kinds"]["interaction"] == {"read": 4, "mapped": 1, "accounted": 3}
    assert coverage["reasons"] == {
        "interaction GET request: not a model request": 1,
        "interaction POST request: not a model request": 2,
    }
    assert coverage["first"] == "interactions[0] (POST request): not a model request"
    assert coverage["refused"] == ""
    code, out, err = run(capsys, "audit", str(path), "--strict")
    assert (code, out) == (2, "")
    assert "found 3 of" in err
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    "uri",
    [
        "https://bedrock-runtime.us-east-1.amazonaws.com/model/m/count-tokens",
        "https://api.anthropic.com/v1/messages/count_tokens",
        "https://generativelanguage.googleapis.com/v1beta/models/g:countTokens",
        "https://api.openai.com/v1/responses/input_tokens",
        "https://api.openai.com/v1/responses/compact",
    ],
)
def test_token_counting_and_compaction_requests_are_not_refused(capsys, tmp_path, uri):
    """Endpoints that count or compact a history produce no turn: accounted, not refused."""
    body = {"messages": [{"role": "user", "content": "hi"}], "input": "hi"}
    path = _cassette(tmp_path, _exchange("POST", uri, body, {"input_tokens": 3}), CHAT)
    code, out, _ = run(capsys, "audit", str(path), "--json")
    assert code == 0
    assert json.loads(out)["coverage"]["refused"] == ""


PI_SESSION = [
    {"type": "session", "id": "s1", "cwd": "/w"},
    {"type": "user", "message": {"role": "user", "content": "list files"}},
    {
        "type": "assistant",
        "message": {
            "role": "assistant",
            "content": [
                {"type": "toolCall", "id": "c1", "name": "bash", "arguments": {}},
            ],
        },
    },
    {
        "type": "message",
        "message": {"role": "toolResult", "toolCallId": "c1", "content": "a b"},
    },
    {"type": "assistant", "message": {"role": "assistant", "content": "done"}},
]
"""Another coding agent's JSON Lines session: Claude Code line types, other blocks."""


def test_another_agents_jsonl_is_not_read_as_claude_code(capsys, tmp_path):
    """Its call is in no block Claude Code has: refused, auto and forced, naming it."""
    path = tmp_path / "session.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in PI_SESSION))
    db = str(tmp_path / "l.db")
    for args in (
        ("audit", str(path)),
        ("audit", str(path), "--format", "claude-code"),
        ("--db", db, "import", str(path)),
    ):
        code, out, err = run(capsys, *args)
        assert (code, out) == (2, "")
        assert err.count("\n") == 1
        assert "claude" in err
        assert "holds a tool call of type 'toolCall'" in err
    with pytest.raises(TranscriptError, match="line 3: a part of type 'toolCall'"):
        parse_transcript(path.read_bytes(), format="claude-code")


def test_audit_and_import_json_report_coverage_and_keep_their_fields(capsys, tmp_path):
    """`coverage` is added; every field the JSON had before is still there."""
    path = _cassette(tmp_path, CHAT)
    code, out, _ = run(capsys, "audit", str(path), "--json")
    report = json.loads(out)
    assert code == 0
    assert set(report) >= {
        "format",
        "conversations",
        "tool_calls",
        "tool_results",
        "unpaired_calls",
        "unpaired_results",
        "violations",
        "warnings",
        "skipped",
        "problems",
    }
    assert report["coverage"]["read"] == report["coverage"]["mapped"] == 3
    db = str(tmp_path / "l.db")
    code, out, _ = run(capsys, "--db", db, "import", str(path), "--json")
    imported = json.loads(out)
    assert code == 0
    assert set(imported) >= {"format", "sessions", "skipped", "problems", "written"}
    assert imported["coverage"]["read"] == 3
    assert imported["files"][0]["coverage"]["mapped"] == 3
    code, out, _ = run(capsys, "--db", db, "audit", "--json")
    assert json.loads(out)["coverage"] is None  # ledger sessions have no records


# The mutation property: a record of a known file changed into an unknown
# shape never yields a clean verdict with fewer calls than the file holds.

MUTATED = [
    (TRANSCRIPTS / "adk" / "flow_complex_spark__sample.session.json", 2),
    (TRANSCRIPTS / "openhands" / "basic_gui_mode.json", 4),
    (TRANSCRIPTS / "openai-agents" / "v1_13_pending_tool_approval.json", 1),
]
if CORPUS.exists():
    MUTATED += [
        (CORPUS / "claude-code-log" / "artifact_tool.jsonl", 5),
        (CORPUS / "claude-code-log" / "cron_tools.jsonl", 4),
        (
            CORPUS
            / "claude-code-log"
            / "codex"
            / "rollout-2026-01-02T03-04-05-11111111-1111-4111-8111-111111111111.jsonl",
            3,
        ),
        (CORPUS / "pydantic-ai" / "test_anthropic__test_anthropic_tool_output.yaml", 2),
        (CORPUS / "pydantic-ai" / "test_google__test_google_tool_output.yaml", 2),
        (
            CORPUS
            / "pydantic-ai"
            / "test_tool_choice_matrix__test_tool_choice_matrix[required-openai].yaml",
            1,
        ),
        (
            CORPUS
            / "pydantic-ai"
            / "test_deepseek_responses__test_deepseek_responses_replay_interleaved"
            "_settled_function_calls.yaml",
            2,
        ),
    ]


def _load(path: Path) -> tuple[bool, object]:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".yaml":
        return False, yaml.safe_load(text)
    if path.suffix == ".jsonl":
        return True, [json.loads(line) for line in text.splitlines() if line.strip()]
    return False, json.loads(text)


def _dump(lines: bool, document: object) -> bytes:
    if lines:
        assert isinstance(document, list)
        return "".join(json.dumps(line) + "\n" for line in document).encode()
    return json.dumps(document).encode()


def _objects(document: object) -> list[tuple[object, object]]:
    """Every ``(container, key)`` holding an object, in a stable order."""
    found: list[tuple[object, object]] = []
    stack: list[object] = [document]
    while stack:
        value = stack.pop()
        pairs = (
            list(value.items())
            if isinstance(value, dict)
            else list(enumerate(value))
            if isinstance(value, list)
            else []
        )
        for key, child in pairs:
            if isinstance(child, dict):
                found.append((value, key))
            if isinstance(child, (dict, list)):
                stack.append(child)
    return found


def _mutate(target: dict[str, object], how: str) -> dict[str, object] | None:
    """The mutated object, or ``None`` when this mutation does not apply."""
    if how == "envelope":
        return {"x_envelope": target}
    key = next((k for k in ("type", "role", "kind") if k in target), None)
    if key is None:
        return None
    if how == "rename":
        return {(f"x_{k}" if k == key else k): v for k, v in target.items()}
    value = target[key]
    return {**target, key: f"{value}_x"} if isinstance(value, str) else None


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    case=st.sampled_from(MUTATED),
    how=st.sampled_from(["envelope", "rename", "retype"]),
    data=st.data(),
)
def test_a_mutated_record_is_never_a_clean_verdict_with_fewer_calls(case, how, data):
    """Mutate one object of a known file: refused, or unpaired, or every call read."""
    path, calls = case
    lines, document = _load(path)
    holders = _objects(document)
    container, key = holders[data.draw(st.integers(0, len(holders) - 1))]
    target = container[key]  # type: ignore[index]
    mutated = _mutate(target, how)
    if mutated is None:
        return
    container[key] = mutated  # type: ignore[index]
    try:
        parsed: ParsedTranscript = parse_transcript(
            _dump(lines, document), path=path.name
        )
    except TranscriptError:
        return  # refused: exit 2
    report = audit_parsed(parsed)
    assert report.exit_code() != 0 or report.tool_calls >= calls, (
        f"{path.name}: {how} at {key!r} gave a clean verdict with "
        f"{report.tool_calls} of {calls} calls"
    )


@pytest.mark.parametrize(
    ("document", "named"),
    [
        (  # a Chat Completions call of a type the reader does not read
            {
                "messages": [
                    {"role": "user", "content": "hi"},
                    {
                        "role": "assistant",
                        "tool_calls": [
                            {"id": "c1", "type": "plugin", "plugin": {"name": "f"}}
                        ],
                    },
                    {"role": "tool", "tool_call_id": "c1", "content": "ok"},
                ]
            },
            "an element of a tool-call list",
        ),
        (  # a Gemini part holding a call under a key the reader does not know
            {
                "contents": [
                    {"role": "user", "parts": [{"text": "hi"}]},
                    {
                        "role": "model",
                        "parts": [{"toolCall": {"name": "f", "args": {}}}],
                    },
                ]
            },
            "holds a tool-call-shaped object with `name`, `args`",
        ),
        (  # a message of a role no reader has
            {
                "messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": "ok"},
                    {"role": "planner", "content": "call f next"},
                ]
            },
            "messages[2] (role:planner) holds a message-shaped object",
        ),
    ],
    ids=["chat-call-type", "gemini-part", "unknown-role"],
)
def test_unknown_calls_and_messages_in_json_documents_are_refused(
    capsys, tmp_path, document, named
):
    """Never a clean verdict on a document whose call or message went unread."""
    path = tmp_path / "doc.json"
    path.write_text(json.dumps(document))
    code, out, err = run(capsys, "audit", str(path), "--json")
    assert (code, out) == (2, "")
    assert err.count("\n") == 1
    assert named in err


def test_an_unrecognised_record_too_large_to_examine_is_refused(tmp_path):
    """What it holds cannot be vouched for: refused rather than skipped."""
    lines = [
        {
            "type": "user",
            "sessionId": "s",
            "message": {"role": "user", "content": "hi"},
        },
        {"type": "x-blob", "sessionId": "s", "values": list(range(20_000))},
        {
            "type": "user",
            "sessionId": "s",
            "message": {"role": "user", "content": "ok"},
        },
    ]
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    with pytest.raises(TranscriptError, match=r"line 2 .* too many to examine"):
        parse_transcript(data, format="claude-code")
    small = data.replace(json.dumps(list(range(20_000))).encode(), b"[1, 2]")
    parsed = parse_transcript(small, format="claude-code")
    assert parsed.coverage.reasons == {"line x-blob: unrecognised": 1}
