"""Issue #24: the light commands load only what they run; library use prints nothing.

Each command runs in a child interpreter, which then reports the modules it
loaded: ``--help``, ``sessions`` and ``audit FILE`` must start without the
engine, the memory service, numpy, HTTP, the web stack or structlog. A turn run
from Python (the guide's ``bootstrap`` script) must leave stdout to the
application, while ``turnledger -v`` still logs the turn's steps on stderr.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.pipeline.cli_child import child_report
from turnledger.ledger import SessionOpened, session_stream_id
from turnledger.ledger.store import open_store
from turnledger.pipeline.cli import STRUCTLOG_FREE

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = (
    ROOT
    / "tests/fixtures/transcripts/har"
    / "can-list-files-in-a-directory-using-tool-calls_2539538540.har"
)

# Runs main(argv), then writes its exit code and every loaded module's name to
# the file named by $REPORT_OUT.
CHILD = """
import json, os, sys
from turnledger.pipeline.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exit:
    code = exit.code
with open(os.environ["REPORT_OUT"], "w") as out:
    json.dump({"code": code, "modules": sorted(sys.modules)}, out)
"""

HEAVY = (
    "turnledger.pipeline.engine",
    "turnledger.pipeline.bootstrap",
    "turnledger.pipeline.memory",
    "numpy",
    "httpx",
    "starlette",
    "uvicorn",
    "jinja2",
    "structlog",
    "structlog.dev",
)
"""Never loaded by --help, sessions or audit FILE."""


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    """A ledger holding one session, ``ops/s1``."""
    path = tmp_path / "light.db"
    stream = session_stream_id("ops", "s1")
    with open_store(str(path)) as store:
        opened = SessionOpened(agent="ops", session_key="s1", channel="cli")
        store.append(stream, [opened], expected_version=0)
    return path


def run_child(argv: list[str], ledger: Path, tmp_path: Path) -> tuple[int, set[str]]:
    """Run the command line in a fresh interpreter; its exit code and modules."""
    report = child_report(CHILD, argv, tmp_path, {"TURNLEDGER_DB": str(ledger)})
    return report["code"], set(report["modules"])


@pytest.mark.parametrize(
    ("argv", "also_absent"),
    [
        (
            ["--help"],
            (
                "msgspec",
                "turnledger.ledger.store",
                "turnledger.pipeline.config",
                "turnledger.pipeline.formats",
                "turnledger.projections",
                "yaml",
            ),
        ),
        (
            ["sessions"],
            ("turnledger.pipeline.formats", "turnledger.projections", "yaml"),
        ),
        (["audit", str(FIXTURE)], ("turnledger.projections",)),
    ],
    ids=["help", "sessions", "audit"],
)
def test_light_commands_load_nothing_heavy(argv, also_absent, ledger, tmp_path):
    code, modules = run_child(argv, ledger, tmp_path)
    assert code == 0
    assert sorted(modules.intersection(HEAVY + also_absent)) == []


STRUCTLOG_FREE_ARGS = {
    "audit": ["audit"],
    "costs": ["costs", "--json"],
    "history": ["history", "s1"],
    "init": ["init"],
    "lifecycle": ["lifecycle"],
    "seal": ["seal", "--json"],
    "sessions": ["sessions", "s1"],
    "stats": ["stats", "--json"],
    "tail": ["tail", "--json"],
    "verify": ["verify", "--json"],
}


def test_every_structlog_free_command_is_checked():
    assert set(STRUCTLOG_FREE_ARGS) == STRUCTLOG_FREE


@pytest.mark.parametrize("name", sorted(STRUCTLOG_FREE))
def test_structlog_free_commands_never_load_structlog(name, ledger, tmp_path):
    """The CLI leaves structlog unconfigured for these: they must not log through it."""
    code, modules = run_child(STRUCTLOG_FREE_ARGS[name], ledger, tmp_path)
    assert code == 0
    assert "structlog" not in modules


def test_the_configurations_place_is_the_configs():
    from turnledger.pipeline import config
    from turnledger.pipeline.cli import common

    assert (common.CONFIG_ENV, common.CONFIG_NAME) == (
        config.CONFIG_ENV,
        config.CONFIG_NAME,
    )


def test_a_clear_ledger_opens_without_the_cipher(tmp_path):
    """AES-GCM is loaded only for a ledger with a cipher key."""
    code = (
        "import sys\n"
        "from turnledger.ledger.store import open_store\n"
        f"open_store({str(tmp_path / 'l.db')!r}).close()\n"
        "print('eventsourcing.cryptography' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TURNLEDGER_CIPHER_KEY"}
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    assert done.stdout.strip() == "False"


GUIDE_TURN = """
import asyncio

from turnledger.pipeline.bootstrap import bootstrap
from turnledger.pipeline.config import Config
from turnledger.pipeline.providers.base import ChatResponse
from turnledger.pipeline.providers.scripted import ScriptedProvider


async def main() -> None:
    provider = ScriptedProvider([ChatResponse(text="Hello! How can I help?")])
    async with bootstrap(Config(ledger="example.db"), provider=provider) as runtime:
        outcome = await runtime.engine.run_turn("ops", "telegram_7", "hi there")
    assert outcome.completed, outcome.failure


asyncio.run(main())
"""


def run_python(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ}
    env.pop("TURNLEDGER_CONFIG", None)
    env.pop("TURNLEDGER_DB", None)
    return subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
        stdin=subprocess.DEVNULL,
    )


def test_a_turn_from_python_prints_nothing_on_stdout(tmp_path):
    done = run_python(GUIDE_TURN, tmp_path)
    assert done.stdout == ""


LIBRARY_LOGS = """
from turnledger.pipeline.logs import library_logger

log = library_logger("turnledger.appending")
log.debug("append.conflict", stream="s", attempt=1)
log.info("quiet.info", n=1)
log.warning("loud.warning", n=2)
"""


def test_library_logger_leaves_stdout_to_the_application(tmp_path):
    """Unconfigured: stdlib logging decides (its last resort: warnings on stderr)."""
    done = run_python(LIBRARY_LOGS, tmp_path)
    assert done.stdout == ""
    assert done.stderr.splitlines() == ["event='loud.warning' n=2"]


def test_library_logger_follows_a_configured_structlog(tmp_path):
    configured = (
        "import sys, structlog\n"
        "structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))\n"
    )
    done = run_python(configured + LIBRARY_LOGS, tmp_path)
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    events = ("append.conflict", "quiet.info", "loud.warning")
    assert len(lines) == len(events)
    assert all(event in line for event, line in zip(events, lines, strict=True))


def test_verbose_cli_logs_the_turn_on_stderr(tmp_path):
    env = {**os.environ}
    env.pop("TURNLEDGER_CONFIG", None)
    script = str(ROOT / "examples/script.toml")
    cli = [shutil.which("turnledger") or f"{sys.prefix}/bin/turnledger"]
    turn = ["run", script, "--turn", "When is it due?"]
    runs = {
        flag: subprocess.run(
            [*cli, "--db", f"{tmp_path}/v{len(flag)}.db", *flag, *turn],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=True,
            stdin=subprocess.DEVNULL,
        )
        for flag in ((), ("-v",))
    }
    quiet, verbose = runs[()], runs["-v",]
    assert quiet.stdout == verbose.stdout == "Noted: the report is due on Friday.\n"
    assert quiet.stderr == ""
    events = [json.loads(line) for line in verbose.stderr.splitlines()]
    assert events[0]["event"] == "turn.started"
    assert events[-1]["event"] == "turn.completed"
    assert {e["level"] for e in events} == {"info"}
