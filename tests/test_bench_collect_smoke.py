"""bench_collect.py runs tiny (--quick): its table, its two goal lines, its JSON."""

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
    figures = json.loads(out.read_text())
    assert set(figures["series"]) == {"collect", "discard", "ack", "export", "commit"}
    assert len(figures["series"]["ack"]["seconds"]) == len(
        figures["series"]["commit"]["seconds"]
    )
