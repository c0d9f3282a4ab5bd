"""Each benchmark script runs with tiny sizes (--quick), so none of them rots."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = sorted(
    p
    for p in (Path(__file__).resolve().parents[1] / "benchmarks").glob("*.py")
    if not p.name.startswith("_")
)


def test_there_are_benchmarks():
    """The benchmarks folder is not empty."""
    assert BENCHMARKS


@pytest.mark.parametrize("script", BENCHMARKS, ids=lambda p: p.name)
def test_benchmark_runs_quick(script: Path, tmp_path: Path):
    """The script finishes with --quick and exits 0."""
    done = subprocess.run(
        [sys.executable, str(script), "--quick"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stdout.strip()
