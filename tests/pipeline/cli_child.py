"""Run a small program in a fresh interpreter and read the JSON it reports.

The CLI tests that watch what one command loads or opens run it in a child
interpreter (nothing the test process imported counts), with ``$REPORT_OUT``
naming the file the program writes its JSON report to.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def child_report(
    program: str, argv: list[str], cwd: Path, env: dict[str, str]
) -> dict[str, Any]:
    """Run ``program`` with ``argv`` in ``cwd``; return the report it wrote.

    ``env`` is added to this process's environment, without
    ``TURNLEDGER_CONFIG`` (the command reads the config of ``cwd``).
    """
    out = cwd / "report.json"
    full = {**os.environ, **env, "REPORT_OUT": str(out)}
    full.pop("TURNLEDGER_CONFIG", None)
    subprocess.run(
        [sys.executable, "-c", program, *argv],
        env=full,
        cwd=cwd,
        capture_output=True,
        check=True,
        stdin=subprocess.DEVNULL,
    )
    report: dict[str, Any] = json.loads(out.read_text())
    return report
