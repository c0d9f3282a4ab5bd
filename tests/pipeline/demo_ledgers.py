"""The CLI as the time-travel tests call it, on a demo ledger of each backend.

``run`` calls the CLI in-process and returns its exit code and output; ``db`` (a
fixture, imported by the test modules that use it) is a ledger URL, SQLite and
PostgreSQL in turn, that already holds the demo's session.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from turnledger.pipeline.cli import main


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run the CLI with ``args``; return its exit code, stdout and stderr."""
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(name="db", params=["sqlite", "postgres"])
def demo_db(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> str:
    """A ledger URL holding the demo session (the demo's memory files sit in cwd)."""
    monkeypatch.chdir(tmp_path)
    if request.param == "sqlite":
        url = str(tmp_path / "turnledger.db")
    else:
        url = str(request.getfixturevalue("postgres_url"))
    code, _, err = run(capsys, "--db", url, "demo")
    assert code == 0, err
    return url
