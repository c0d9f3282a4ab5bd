"""bench_collect.py runs tiny (--quick): its tables, its two goal lines, its JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

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
    assert "the mapping's budget at 0.5x" in done.stdout
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


def test_the_budget_line_says_how_much_faster_the_mapping_must_be(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At 0.5x a batch may take twice the floor's export(): 40 ms for a 20 ms
    floor; less the floor, a 3 ms decoding and a 10 ms commit, 7 ms are left,
    against 35 - 3 - 10 = 22 ms taken now; a floor too low leaves nothing."""
    monkeypatch.syspath_prepend(str(HERE))
    bench = pytest.importorskip("bench_collect")
    line = bench._budget_line([0.020] * 3, [0.003] * 3, [0.010] * 3, [0.035] * 3)
    assert "a batch may take 40.0 ms" in line
    assert "7.0 ms are left for mapping a batch" in line
    assert "decoding and commit is 22.0 ms" in line
    assert line.endswith("the mapping would have to be 3.1x faster")
    none = bench._budget_line([0.005], [0.003], [0.010], [0.035])
    assert none.endswith("the floor, one decoding and one commit already take more")
