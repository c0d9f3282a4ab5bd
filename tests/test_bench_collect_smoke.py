"""bench_collect.py runs tiny (--quick): its tables, its two goal lines, its JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1] / "benchmarks"


def test_bench_collect_quick_prints_both_goals_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "collect.json"
    done = subprocess.run(
        [sys.executable, str(HERE / "bench_collect.py"), "--quick", "--json", str(out)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    goals = [
        line for line in done.stdout.splitlines() if line.startswith(("PASS", "MISS"))
    ]
    assert len(goals) == 2
    assert "collect spans/s vs discarding receiver" in goals[0]
    assert "acknowledgement p95" in goals[1]
    assert "client side, the exporter's HTTP round trip" in done.stdout
    assert "ceiling with the mapping left out" in done.stdout
    # The MCP section: its table and its two ratios (reported, no goal).
    mcp = [line for line in done.stdout.splitlines() if "/ direct:" in line]
    assert [line.split(":")[0] for line in mcp] == [
        "info  mcp recall / direct",
        "info  mcp store / direct",
    ]
    figures = json.loads(out.read_text())
    assert set(figures["series"]) == {
        "collect",
        "discard",
        "ack",
        "trip",
        "export",
        "commit",
        "decode",
        "direct recall",
        "mcp recall",
        "direct store",
        "mcp store",
    }
    assert set(figures["ratios"]) == {
        "collect spans/s vs discarding receiver",
        "mcp recall / direct",
        "mcp store / direct",
    }
    for name in ("mcp recall", "mcp store"):
        assert figures["series"][name]["n"] == 10  # the quick size
    # One sample of each kind per timed batch: the warm-up's are left out.
    timed = 2 * 64 // 16
    for name in ("ack", "trip", "export", "commit", "decode"):
        assert len(figures["series"][name]["seconds"]) == timed
