"""``replay SESSION --rerun [--check]``: the real engine re-run offline over a recorded session."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests.pipeline.demo_ledgers import demo_db, run  # noqa: F401 - demo_db is the db fixture
from turnledger.ledger.events import ToolResultRecorded
from turnledger.ledger.store import open_store
from turnledger.ledger.verify import verify
from turnledger.pipeline.bootstrap import bootstrap
from turnledger.pipeline.config import Config
from turnledger.pipeline.demo import demo_config
from turnledger.pipeline.providers.base import (
    ChatResponse,
    ProviderError,
    ToolSpec,
    Usage,
)
from turnledger.pipeline.providers.scripted import ScriptedProvider
from turnledger.pipeline.sessions import resolve_session
from turnledger.pipeline.timetravel.rerun import rerun_session
from turnledger.pipeline.tools.base import ToolContext, ToolOutcome
from turnledger.policies.messages import ToolCall

# The demo records its session under these limits (pipeline/demo.py).
RECORDED = ("--budget-tokens", "450", "--max-tool-result-chars", "600")


def test_rerun_under_the_recorded_policies_is_identical(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(
        capsys, "--db", db, "replay", "demo-1", "--rerun", *RECORDED, "--check"
    )
    assert (code, err) == (0, "")
    assert out.splitlines()[-1] == "identical to the recorded session"
    code, out, _ = run(
        capsys, "--db", db, "replay", "demo-1", "--rerun", *RECORDED, "--json"
    )
    report = json.loads(out)
    assert (code, report["identical"], report["turns"]) == (0, True, 4)
    assert all(t["pairing_valid"] and not t["differences"] for t in report["diff"])
    # The demo's third turn recalls what the first stored: memory as it was then.
    third = report["diff"][2]
    assert third["recorded"]["recall"]["keys"]
    assert third["rerun"]["recall"] == third["recorded"]["recall"]
    # The demo's build.log result was bounded when recorded; the re-run agrees.
    second = report["diff"][1]
    assert second["rerun"]["bounding"] == second["recorded"]["bounding"]
    assert any(
        b["original_chars"] > b["kept_chars"] for b in second["recorded"]["bounding"]
    )


def test_a_smaller_budget_fails_the_check_and_names_the_trim(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(
        capsys,
        "--db",
        db,
        "replay",
        "demo-1",
        "--rerun",
        "--budget-tokens",
        "200",
        "--max-tool-result-chars",
        "600",
        "--check",
    )
    assert code == 1
    assert "turn 2 " in out
    assert "DIFFERS" in out
    trims = [
        line.strip() for line in out.splitlines() if line.strip().startswith("trim:")
    ]
    assert trims
    assert "re-run context token budget exceeded: dropped 1 turns" in trims[0]
    assert out.splitlines()[-1].endswith("turns differ")
    # Without --check the same diff is a report: exit 0.
    code, out, _ = run(
        capsys,
        "--db",
        db,
        "replay",
        "demo-1",
        "--rerun",
        "--budget-tokens",
        "200",
        "--max-tool-result-chars",
        "600",
        "--json",
    )
    report = json.loads(out)
    assert (code, report["identical"], report["budget_tokens"]) == (0, False, 200)
    changed = [
        t for t in report["diff"] if t["recorded"]["trims"] != t["rerun"]["trims"]
    ]
    assert changed


def test_a_smaller_result_bound_shows_in_the_bounding(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    db = str(tmp_path / "turnledger.db")
    assert run(capsys, "--db", db, "demo")[0] == 0
    code, out, _ = run(
        capsys,
        "--db",
        db,
        "replay",
        "demo-1",
        "--rerun",
        "--budget-tokens",
        "450",
        "--max-tool-result-chars",
        "100",
        "--json",
    )
    report = json.loads(out)
    second = report["diff"][1]
    kept = {b["call_id"]: b["kept_chars"] for b in second["rerun"]["bounding"]}
    assert code == 0
    assert max(kept.values()) <= 100
    assert any(line.startswith("bounding:") for line in second["differences"])


def test_the_recorded_ledger_is_never_written(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with open_store(db) as store:
        before = store.max_position()
        ref = resolve_session(store, "demo-1")
        events = [r.event for r in store.read_stream(ref.stream_id)]
    for budget in ("450", "200"):
        run(
            capsys, "--db", db, "replay", "demo-1", "--rerun", "--budget-tokens", budget
        )
    with open_store(db) as store:
        assert store.max_position() == before
        assert [r.event for r in store.read_stream(ref.stream_id)] == events
        assert verify(store).ok


def test_rerun_from_python(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    db = str(tmp_path / "turnledger.db")
    assert run(capsys, "--db", db, "demo")[0] == 0
    with open_store(db) as store:
        ref = resolve_session(store, "demo-1")
        report = rerun_session(store, ref, demo_config(tmp_path / "unused"))
    assert report.identical
    assert [t.turn for t in report.diff] == [1, 2, 3, 4]
    assert not (tmp_path / "unused").exists()  # the re-run's files are scratch


def test_rerun_with_at_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    db = str(tmp_path / "turnledger.db")
    assert run(capsys, "--db", db, "demo")[0] == 0
    code, out, err = run(capsys, "--db", db, "replay", "demo-1", "--rerun", "--at", "3")
    assert (code, out) == (2, "")
    assert err.count("\n") == 1
    assert "expected --rerun or --at" in err


def test_rerun_options_without_rerun_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    db = str(tmp_path / "turnledger.db")
    assert run(capsys, "--db", db, "demo")[0] == 0
    code, out, err = run(capsys, "--db", db, "replay", "demo-1", "--budget-tokens", "9")
    assert (code, out) == (2, "")
    assert err.count("\n") == 1
    assert "expected --rerun with --budget-tokens" in err


async def _record_overflow_and_custom_tool(db: str) -> None:
    class Echo:
        spec = ToolSpec(name="echo", description="say it back")

        async def run(
            self, arguments: dict[str, Any], context: ToolContext
        ) -> ToolOutcome:
            del context
            return ToolOutcome(output=f"echo {arguments['text']}")

    steps: list[Any] = [
        ProviderError("context_overflow", "prompt too long"),
        ChatResponse(
            tool_calls=(ToolCall(id="e1", name="echo", arguments='{"text": "hi"}'),),
            usage=Usage(input_tokens=50, output_tokens=5),
        ),
        ChatResponse(text="it said hi", usage=Usage(input_tokens=60, output_tokens=4)),
    ]
    config = Config(data_dir=str(Path(db).parent / "data"))
    async with bootstrap(
        config, provider=ScriptedProvider(steps), ledger_url=db, tools={"echo": Echo()}
    ) as runtime:
        await runtime.engine.run_turn("ops", "s1", "warm up " * 30)
        await runtime.engine.run_turn("ops", "s1", "echo hi please")


def test_a_recorded_overflow_and_a_custom_tool_replay_identically(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "ledger.db")
    asyncio.run(_record_overflow_and_custom_tool(db))
    capsys.readouterr()  # the recording's own log lines
    with open_store(db) as store:
        first = [
            r.event for r in store.read_stream(resolve_session(store, "s1").stream_id)
        ]
    assert any(
        isinstance(e, ToolResultRecorded) and e.output == "echo hi" for e in first
    )
    code, out, _ = run(capsys, "--db", db, "replay", "s1", "--rerun", "--json")
    report = json.loads(out)
    assert (code, report["identical"]) == (0, True), report
    # The first call overflowed and the engine retried: replayed as an overflow,
    # the re-run retries too and completes with the custom tool's recorded result.
    first_turn, second_turn = report["diff"]
    assert first_turn["rerun"]["outcome"] == "completed"
    bounding = first_turn["rerun"]["bounding"]
    assert [(b["call_id"], b["tool"]) for b in bounding] == [("e1", "echo")]
    # The script ran out on the second turn; that recorded failure is replayed too.
    assert second_turn["rerun"]["outcome"] == "failed: provider_error"


def test_the_policies_of_a_config_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    db = str(tmp_path / "turnledger.db")
    assert run(capsys, "--db", db, "demo")[0] == 0
    same = tmp_path / "same.toml"
    same.write_text(
        "[runtime]\ncontext_budget_tokens = 450\nmax_tool_result_chars = 600\n"
    )
    smaller = tmp_path / "smaller.toml"
    smaller.write_text(
        "[runtime]\ncontext_budget_tokens = 200\nmax_tool_result_chars = 600\n"
    )
    args = ("--db", db, "replay", "demo-1", "--rerun", "--check", "--config")
    assert run(capsys, *args, str(same))[0] == 0
    code, out, _ = run(capsys, *args, str(smaller))
    assert code == 1
    assert "budget 200 tokens" in out.splitlines()[0]
