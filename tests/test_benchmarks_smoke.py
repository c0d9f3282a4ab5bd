"""Each benchmark script runs with tiny sizes (--quick), so none of them rots."""

from __future__ import annotations

import os
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


def test_recall_quality_runs_quick_with_the_static_model(tmp_path: Path):
    """``--model all-MiniLM-L6-v2-static`` (distilled into a temporary cache)."""
    script = Path(__file__).resolve().parents[1] / "benchmarks"
    done = subprocess.run(
        [
            sys.executable,
            str(script / "bench_recall_quality.py"),
            "--quick",
            "--model",
            "all-MiniLM-L6-v2-static",
        ],
        cwd=tmp_path,
        env={**os.environ, "TURNLEDGER_CACHE_DIR": str(tmp_path / "cache")},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "rows embedded by all-MiniLM-L6-v2-static" in done.stdout
    assert list((tmp_path / "cache").glob("*.table"))


def _run_all():
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "run_all.py"
    spec = importlib.util.spec_from_file_location("run_all", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_run_all_runs_every_bench_script():
    """run_all covers every bench_*.py, so a new benchmark cannot be left out."""
    scripts = {p.stem for p in BENCHMARKS if p.stem.startswith("bench_")}
    assert set(_run_all().BENCHMARKS) == scripts


def test_run_all_reads_each_verdict_style():
    """Leading, trailing and arrow verdicts all reach the README table."""
    output = (
        "PASS  import: ours 661 vs raw 613 -> ratio 0.86; goal >= 0.50\n"
        "2 history --at: ours 190k vs raw 511k -> ratio 0.30; goal >= 0.5: MISS\n"
        "goal: hybrid >= keyword + 10 points -> PASS\n"
        "info  no verdict on this line\n"
        "CEILING no persistence / SqliteSaver 3.77; below the goal of 5x\n"
    )
    rows = _run_all().verdict_lines({"b": {"output": output}})
    verdicts = [v for _, v, _ in rows]
    assert verdicts == ["PASS", "MISS", "PASS", "CEILING"]
    assert rows[1][2].endswith("goal >= 0.5")
    assert rows[2][2] == "goal: hybrid >= keyword + 10 points"


def test_run_all_keeps_goal_lines_a_long_output_scrolls_past():
    """A goal printed before pages of diagnostics still reaches the README table."""
    run_all = _run_all()
    stdout = "PASS early goal: 2.0 vs 1.0 -> ratio 2.00; goal >= 1.5\n" + (
        "info a diagnostic line that is long enough to fill the tail quickly\n" * 200
    )
    summary = run_all.summarise(stdout)
    assert "early goal" not in summary["output"]
    rows = run_all.verdict_lines({"b": summary})
    assert rows == [("b", "PASS", "early goal: 2.0 vs 1.0 -> ratio 2.00; goal >= 1.5")]
