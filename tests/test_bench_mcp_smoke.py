"""The MCP overhead benchmark runs tiny, alone and through :func:`measure`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1] / "benchmarks"


def test_mcp_overhead_runs_quick(tmp_path: Path):
    """``_mcp_overhead.py --quick`` prints its four cases and two ratios."""
    done = subprocess.run(
        [sys.executable, str(HERE / "_mcp_overhead.py"), "--quick"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    for case in ("direct recall", "mcp recall", "direct store", "mcp store"):
        assert f"\n{case} " in done.stdout
    assert "info  mcp recall / direct:" in done.stdout
    assert "info  mcp store / direct:" in done.stdout


def test_measure_returns_harness_rows():
    """:func:`measure` gives four series with their timings and two ratios."""
    sys.path.insert(0, str(HERE))
    try:
        from _mcp_overhead import measure

        series, ratios = measure(calls=3, entries=5, repeat=1, warmup=0)
    finally:
        sys.path.remove(str(HERE))
    assert [s.name for s in series] == [
        "direct recall",
        "mcp recall",
        "direct store",
        "mcp store",
    ]
    assert all(len(s.seconds) == 1 and s.seconds[0] > 0 for s in series)
    assert [r.name for r in ratios] == ["mcp recall / direct", "mcp store / direct"]
    assert all(r.median > 0 for r in ratios)
