"""Fixtures of the MCP server tests: a ledger on each backend, the server spawned.

Every test runs the real ``turnledger mcp`` command in a subprocess and talks
to it with the official SDK's client (stdio or streamable HTTP).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.conftest import drop_schema, fresh_schema_url, require_postgres

PYTHON = sys.executable


class Ledger(NamedTuple):
    """A ledger the server is started on: its URL, configuration and folder."""

    url: str
    config: Path
    folder: Path

    def cli(self, *args: str) -> list[str]:
        """The command line of ``turnledger`` on this ledger."""
        return [
            PYTHON,
            "-m",
            "turnledger.pipeline.cli",
            "--db",
            self.url,
            "--config",
            str(self.config),
            *args,
        ]

    def run_json(self, *args: str) -> object:
        """Run a reading command with --json; return what it printed."""
        done = subprocess.run(
            [*self.cli(*args), "--json"],
            capture_output=True,
            text=True,
            check=False,
            cwd=self.folder,
            env=env(),
            timeout=120,
        )
        assert done.returncode in (0, 1), done.stderr
        return json.loads(done.stdout)


def env() -> dict[str, str]:
    """The environment the server runs in (no token, no configuration leaking in)."""
    kept = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("TURNLEDGER_") or k == "TURNLEDGER_TEST_POSTGRES_URL"
    }
    return {**kept, "PYTHONUNBUFFERED": "1"}


@pytest.fixture(params=["sqlite", "postgres"], name="ledger")
def _ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Ledger]:
    """A ledger on SQLite and on PostgreSQL, with its data folder in tmp_path."""
    config = tmp_path / "turnledger.toml"
    config.write_text(f'data_dir = "{tmp_path / "data"}"\n', encoding="utf-8")
    if request.param == "sqlite":
        yield Ledger(str(tmp_path / "ledger.db"), config, tmp_path)
        return
    url = fresh_schema_url(require_postgres())
    try:
        yield Ledger(url, config, tmp_path)
    finally:
        drop_schema(url)
