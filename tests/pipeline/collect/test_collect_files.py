"""OTLP JSON span files are a transcript format like the others.

``audit`` reads them through the import's own mapping, ``import --json`` gives
them the shape every import has (files, written, outcome, coverage), their
coverage counts spans, a span of no known shape holding model traffic refuses
the file, and the ledger audit says the same through the CLI and the MCP tool.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from tests.pipeline.collect.conftest import Ledger, audit_json, said_in
from tests.pipeline.collect.receiver import running
from tests.pipeline.collect.spans import (
    ANSWER,
    CALL,
    RESULT,
    USER,
    chat_attributes,
    json_request,
    json_span,
    post_json,
)
from turnledger.ledger.events import ModelCalled, SystemPromptSet
from turnledger.pipeline.cli import main
from turnledger.pipeline.collect.coverage import NOT_RECORDED
from turnledger.pipeline.config import Config
from turnledger.pipeline.mcp import McpRecorder, ToolServices, build_server
from turnledger.pipeline.memory import MemoryService
from turnledger.pipeline.sessions import list_sessions

TRACE = "5b8efff798038103d269b633813fc60c"
OTHER = "6b8efff798038103d269b633813fc60c"
HTTP = {"http.request.method": "GET", "url.path": "/weather"}


def _conversation() -> list[dict[str, object]]:
    """A tool call and its result in one trace, a usage-only call in another."""
    return [
        json_span(
            TRACE,
            "00f067aa0ba902b7",
            chat_attributes(inputs=[USER], outputs=[CALL]),
            start=1,
        ),
        json_span(
            TRACE,
            "00f067aa0ba902b8",
            chat_attributes(inputs=[USER, CALL, RESULT], outputs=[ANSWER]),
            start=2,
        ),
        json_span(OTHER, "10f067aa0ba902b7", chat_attributes(usage=(5, 1)), start=3),
    ]


def _write(path: Path, spans: list[dict[str, object]]) -> Path:
    path.write_text(json.dumps(json_request(spans)))
    return path


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, Any, str]:
    code = main(argv)
    captured = capsys.readouterr()
    out = json.loads(captured.out) if captured.out.startswith("{") else captured.out
    return code, out, captured.err


def test_audit_reads_an_otlp_file_through_the_import_mapping(
    ledger: Ledger, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path / "spans.json", _conversation())
    code, audit, _ = _run(["--db", ledger.url, "audit", str(path), "--json"], capsys)
    assert code == 0
    assert audit["format"] == "otlp"
    assert (audit["conversations"], audit["tool_calls"], audit["tool_results"]) == (
        2,
        1,
        1,
    )
    assert audit["violations"] == []
    assert audit["skipped"] == {"span without content (usage only)": 1}
    coverage = audit["coverage"]
    assert (coverage["read"], coverage["mapped"], coverage["accounted"]) == (3, 3, 0)
    assert coverage["kinds"] == {"span": {"read": 3, "mapped": 3, "accounted": 0}}
    assert ledger.store.max_position() == 0  # an audit writes nothing
    # The same spans one request per line, named by --format otlp; and an
    # unanswered call is unpaired (exit 1) as in any other format.
    first, _second, other = _conversation()
    lines = tmp_path / "collector.jsonl"
    lines.write_text(
        "\n".join(json.dumps(json_request([s])) for s in (first, other)) + "\n"
    )
    argv = ["--db", ledger.url, "audit", str(lines), "--format", "otlp", "--json"]
    code, audit, _ = _run(argv, capsys)
    assert code == 1
    assert (audit["unpaired_calls"], audit["unpaired_results"]) == (1, 0)
    assert [(v["kind"], v["id"], v["conversation"]) for v in audit["violations"]] == [
        ("orphan_call", "call_1", TRACE)
    ]
    assert ledger.store.max_position() == 0


def test_spans_not_mapped_are_accounted_and_strict_refuses_them(
    ledger: Ledger, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second, _other = _conversation()
    agent = json_span(
        TRACE, "20f067aa0ba902b7", {"gen_ai.operation.name": "invoke_agent"}, start=0
    )
    server = json_span(TRACE, "30f067aa0ba902b7", HTTP, start=4, name="GET /weather")
    path = _write(tmp_path / "mixed.json", [agent, first, second, first, server])
    code, audit, _ = _run(["--db", ledger.url, "audit", str(path), "--json"], capsys)
    assert code == 0
    coverage = audit["coverage"]
    assert (coverage["read"], coverage["mapped"], coverage["accounted"]) == (5, 2, 3)
    assert coverage["reasons"] == {
        "span chat: already in the ledger": 1,
        "span invoke_agent: GenAI operation without messages of its own": 1,
        "span no gen_ai.operation.name: no known shape (counted, not guessed)": 1,
    }
    assert coverage["first"] == (
        "span 1 (20f067aa0ba902b7, invoke_agent): GenAI operation without"
        " messages of its own"
    )
    assert coverage["refused"] == ""
    code, out, err = _run(["--db", ledger.url, "audit", str(path), "--strict"], capsys)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert "found 3 of 5 not mapped, first span 1 (20f067aa0ba902b7" in err
    # The import counts the same spans the same way.
    code, report, _ = _run(["--db", ledger.url, "import", str(path), "--json"], capsys)
    assert code == 0
    assert report["coverage"] == coverage


@pytest.mark.parametrize(
    ("attrs", "held"),
    [
        (
            {"gen_ai.operation.name": "summarize", "gen_ai.input.messages": "[]"},
            (
                "span 2 (40f067aa0ba902b7, operation summarize) holds the attribute"
                " gen_ai.input.messages"
            ),
        ),
        (
            # OpenInference's attributes without its span kind: not its span.
            {"llm.token_count.prompt": 12},
            (
                "span 2 (40f067aa0ba902b7, no gen_ai.operation.name) holds the"
                " attribute llm.token_count.prompt"
            ),
        ),
    ],
    ids=["unknown-operation", "llm-attributes-without-a-kind"],
)
def test_model_traffic_no_reader_understands_refuses_the_file(
    ledger: Ledger,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    attrs: dict[str, object],
    held: str,
) -> None:
    first, _second, _other = _conversation()
    unread = json_span(TRACE, "40f067aa0ba902b7", attrs, start=5, name="llm")
    path = _write(tmp_path / "unread.json", [first, unread])
    for command in ("audit", "import"):
        code, out, err = _run(["--db", ledger.url, command, str(path)], capsys)
        assert code == 2
        assert out == ""
        assert err.count("\n") == 1
        assert "model traffic no reader understands" in err
        assert held in err
    assert ledger.store.max_position() == 0
    # Among several files, it is the one not imported; the others are.
    good = _write(tmp_path / "good.json", _conversation())
    argv = ["--db", ledger.url, "import", str(good), str(path), "--json"]
    code, report, _ = _run(argv, capsys)
    assert code == 2
    outcomes = {Path(f["file"]).name: f["outcome"] for f in report["files"]}
    assert outcomes == {"good.json": "imported", "unread.json": "failed"}


def test_import_json_of_one_otlp_file_has_the_shape_of_every_import(
    ledger: Ledger, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    transcript = tmp_path / "chat.json"
    transcript.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}))
    code, other, _ = _run(
        ["--db", ledger.url, "import", str(transcript), "--json"], capsys
    )
    assert code == 0
    before = ledger.store.max_position()
    path = _write(tmp_path / "spans.json", _conversation())
    code, report, _ = _run(["--db", ledger.url, "import", str(path), "--json"], capsys)
    assert code == 0
    assert set(report) == set(other)
    (done,) = report["files"]
    assert set(done) == set(other["files"][0])
    assert (done["outcome"], done["format"], done["error"]) == (
        "imported",
        "otlp",
        None,
    )
    assert report["written"] == done["written"] == ledger.store.max_position() - before
    assert {s["outcome"] for s in report["sessions"]} == {"imported"}
    assert done["coverage"]["mapped"] == 3
    assert report["skipped"] == {"span without content (usage only)": 1}
    head = ledger.store.max_position()
    code, again, _ = _run(["--db", ledger.url, "import", str(path), "--json"], capsys)
    assert code == 0
    assert again["files"][0]["outcome"] == "already_imported"
    assert again["written"] == 0
    assert again["coverage"]["reasons"] == {"span chat: already in the ledger": 3}
    assert ledger.store.max_position() == head


def _mcp_audit(ledger: Ledger, tmp_path: Path) -> dict[str, Any]:
    """The ledger_audit tool's answer, through the SDK's in-process client."""
    config = Config(data_dir=str(tmp_path / "data"))
    memory = MemoryService(ledger.store, config, ledger_url=ledger.url)
    try:
        services = ToolServices(
            store=ledger.store, memory=memory, config=config, agent="support-bot"
        )
        recorder = McpRecorder(
            ledger.store, agent="support-bot", max_result_chars=0, shredding=False
        )
        server = build_server(services, recorder, allow_writes=False)

        async def scenario() -> str:
            async with Client(server, mode="legacy") as client:
                answer = await client.call_tool("ledger_audit", {"session": OTHER})
                (text,) = answer.content
                assert isinstance(text, types.TextContent)
                return text.text

        return json.loads(anyio.run(scenario))  # type: ignore[no-any-return]
    finally:
        memory.close()


def test_the_cli_and_the_mcp_tool_both_say_the_conversation_is_not_recorded(
    ledger: Ledger, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path / "spans.json", _conversation())
    assert main(["--db", ledger.url, "import", str(path)]) == 0
    capsys.readouterr()
    code, cli, _ = _run(["--db", ledger.url, "audit", OTHER, "--json"], capsys)
    assert code == 0
    assert cli["skipped"] == {NOT_RECORDED: 1}
    tool = _mcp_audit(ledger, tmp_path)
    assert tool == cli
    code, whole, _ = _run(["--db", ledger.url, "audit", TRACE, "--json"], capsys)
    assert whole["skipped"] == {}  # its content was recorded


AI_SDK_RUN = Path(__file__).parents[2] / "fixtures" / "otlp" / "vercel-ai-sdk-6.json"


@pytest.mark.parametrize("via", ["import", "collect"])
def test_a_vercel_ai_sdk_run_records_its_conversations(
    ledger: Ledger, via: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The Vercel AI SDK's own telemetry of a real run (TypeScript; see the
    fixture's PROVENANCE.md), imported as a file or posted to collect: its
    provider calls and tool calls are the conversation, each ``generateText``
    a trace and so a session; its ``ai.generateText`` spans are counted. Sent
    again, nothing is written twice."""
    body = AI_SDK_RUN.read_bytes()
    with running(ledger.store) as (url, _app):
        if via == "import":
            argv = ["--db", ledger.url, "import", str(AI_SDK_RUN), "--json"]
            code, report, _ = _run(argv, capsys)
            assert code == 0
            assert report["skipped"] == {"span of operation ai.generateText": 2}
            assert report["coverage"]["mapped"] == 4
        else:
            answer = post_json(url, body)
            assert answer.status_code == 200
            assert "rejected_spans" not in answer.json().get("partialSuccess", {})
        round_trip = [
            ("user", "Weather in Paris?", (), ()),
            ("assistant", "", (("call_w1", "get_weather", {"city": "Paris"}),), ()),
            ("tool", "", (), (("call_w1", "18C", False),)),
            ("assistant", "18C in Paris.", (), ()),
        ]
        sessions = {s.key: s for s in list_sessions(ledger.store)}
        histories = sorted((said_in(ledger, key) for key in sessions), key=len)
        thanks = [
            ("user", "Thanks!", (), ()),
            ("assistant", "You are welcome.", (), ()),
        ]
        assert histories == [round_trip, [*round_trip, *thanks]]
        for key, session in sessions.items():
            events = [r.event for r in ledger.store.read_stream(session.stream_id)]
            system = [e.text for e in events if isinstance(e, SystemPromptSet)]
            assert system == ["You answer weather questions."]
            calls = [e for e in events if isinstance(e, ModelCalled)]
            assert {(c.model, c.provider) for c in calls} == {("gpt-4o", "openai.chat")}
            audit = audit_json(ledger, key, capsys)
            assert (audit["violations"], audit["skipped"]) == ([], {})
        usage = sorted(
            (e.input_tokens, e.output_tokens)
            for s in sessions.values()
            for e in (r.event for r in ledger.store.read_stream(s.stream_id))
            if isinstance(e, ModelCalled)
        )
        assert usage == [(50, 10), (70, 6), (90, 4)]
        before = ledger.store.max_position()
        assert post_json(url, body).status_code == 200
        assert ledger.store.max_position() == before
