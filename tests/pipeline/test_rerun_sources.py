"""``replay --rerun`` on sessions the engine did not record (issue #25 item 5).

An imported transcript or a framework adapter's session holds assistant
messages and tool results but no ``model.called`` or ``prompt.assembled``
events: there is nothing to answer the re-run's model calls with and nothing
to compare its prompts to. The re-run refuses in one line, exit 2, saying what
is missing, instead of reporting differences it never observed.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from turnledger.adapters.openai_agents import TurnledgerSession
from turnledger.ledger.store import open_store
from turnledger.pipeline.cli import main
from turnledger.pipeline.config import Config
from turnledger.pipeline.formats.read import read_transcript
from turnledger.pipeline.importer import import_transcript
from turnledger.pipeline.sessions import resolve_session
from turnledger.pipeline.timetravel.rerun import NotRerunnableError, rerun_session

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts"


def cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def one_line_refusal(code: int, out: str, err: str, *needles: str) -> None:
    assert code == 2, (out, err)
    assert out == ""
    assert err.count("\n") == 1, err
    assert err.startswith("turnledger: ")
    assert "differ" not in err
    for needle in needles:
        assert needle in err, err


def test_an_imported_corpus_session_is_refused_in_one_line(capsys, tmp_path):
    db = str(tmp_path / "i.db")
    with open_store(db) as store:
        parsed = read_transcript(FIXTURES / "openhands" / "basic_gui_mode.json")
        report = import_transcript(store, parsed, agent="imp")
        session = report.sessions[0].session
        ref = resolve_session(store, session, agent="imp")
        with pytest.raises(NotRerunnableError, match="imported from a transcript"):
            rerun_session(store, ref, Config())
        before = store.max_position()
    code, out, err = cli(
        capsys, "--db", db, "replay", session, "--agent", "imp", "--rerun", "--check"
    )
    one_line_refusal(
        code,
        out,
        err,
        f"session imp/{session} was imported from a transcript",
        "it has no recorded model calls to re-run",
    )
    with open_store(db) as store:
        assert store.max_position() == before  # the recorded ledger is only read


def test_an_adapter_session_is_refused_in_one_line(capsys, tmp_path):
    db = str(tmp_path / "a.db")

    async def record() -> None:
        session = TurnledgerSession("oa-1", db, agent="ops")
        await session.add_items(
            [
                {"role": "user", "content": "weather in Paris?"},
                {
                    "type": "function_call",
                    "call_id": "c1",
                    "name": "get_weather",
                    "arguments": '{"city": "Paris"}',
                },
                {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
                {"role": "assistant", "content": "It is sunny."},
            ]
        )
        session.close()

    asyncio.run(record())
    code, out, err = cli(
        capsys, "--db", db, "replay", "oa-1", "--agent", "ops", "--rerun", "--check"
    )
    one_line_refusal(
        code,
        out,
        err,
        "session ops/oa-1 was written through 'openai-agents'",
        "it has no recorded model calls to re-run",
        "turn 1",
    )
    code, out, err = cli(
        capsys, "--db", db, "replay", "oa-1", "--agent", "ops", "--rerun", "--json"
    )
    one_line_refusal(code, out, err, "no recorded model calls")
