"""Run every benchmark, collect their figures, chart them, update the published table.

Each benchmark script is run as its own process with ``--json``; its ratios (ours
vs a raw baseline measured in the same run, with the goal and PASS/MISS) are
collected into ``benchmarks/results.json``, drawn in ``benchmarks/results.png``
(when matplotlib is installed: ``pip install -e '.[bench]'``), and written as the
performance table of docs/benchmarks.md between ``<!-- perf:start -->`` and
``<!-- perf:end -->``, with the machine described.

Run: python benchmarks/run_all.py [--quick] [--only NAME ...] [--no-table]
``--quick`` runs the policy benchmark only, with tiny sizes, into a temporary
folder (never the repository): the test suite uses it to keep this script working,
and runs every other script with ``--quick`` on its own.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BENCHMARKS = (
    "bench_append",
    "bench_policies",
    "bench_memory",
    "bench_encryption",
    "bench_erasure",
    "bench_recall_quality",
    "bench_vector_index",
    "bench_replay",
    "bench_turn",
    "bench_session_open",
    "bench_engine_sessions",
    "bench_timetravel",
    "bench_scale",
    "bench_adapters",
    "bench_scrub",
    "bench_serve",
    "bench_collect",
    "bench_peers_langgraph",
    "bench_peers_openai",
    "bench_cli_start",
    "bench_recall_public",
)
START = "<!-- perf:start -->"
END = "<!-- perf:end -->"


def machine() -> dict[str, Any]:
    """Describe the machine the figures come from."""
    load = os.getloadavg()
    return {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "loadavg": [round(x, 2) for x in load],
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


def summarise(stdout: str) -> dict[str, Any]:
    """A script's output tail, and every goal line of the whole output.

    The tail is for reading; the goal lines are kept apart because a script that
    prints diagnostics after its goals would push them out of any tail.
    """
    return {
        "output": stdout[-3000:],
        "goals": [line for line in stdout.splitlines() if judged(line)],
    }


def run_one(name: str, out: Path, *, quick: bool, timeout: float) -> dict[str, Any]:
    """Run one benchmark script; return its status, figures and output tail."""
    script = HERE / f"{name}.py"
    if not script.exists():
        return {"status": "missing"}
    target = out / f"{name}.json"
    command = [sys.executable, str(script)]
    if re.search(r'add_argument\(\s*"--json"', script.read_text()):  # not all do
        command += ["--json", str(target)]
    if quick:
        command.append("--quick")
    started = time.perf_counter()
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            cwd=out,
        )
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "seconds": timeout}
    result: dict[str, Any] = {
        "status": "ok" if done.returncode == 0 else f"exit {done.returncode}",
        "seconds": round(time.perf_counter() - started, 1),
        **summarise(done.stdout),
    }
    if done.returncode != 0:
        result["stderr"] = done.stderr[-2000:]
    if target.exists():
        result["figures"] = kept(json.loads(target.read_text()))
    return result


SAMPLES_KEPT = 200
"""A series keeps its samples in ``results.json`` up to this many."""


def kept(figures: dict[str, Any]) -> dict[str, Any]:
    """A script's figures as ``results.json`` keeps them.

    A series of more than :data:`SAMPLES_KEPT` samples (one per question or per
    stored entry, in the recall benchmarks: hundreds of kilobytes) keeps its
    count and its median and p95 instead of them; the script's own ``--json``
    keeps every sample.
    """
    # Run as a script, benchmarks/ is on the path; the tests load this file alone.
    from _harness import percentile  # noqa: PLC0415

    series = figures.get("series")
    if not isinstance(series, dict):
        return figures
    trimmed = {}
    for name, one in series.items():
        samples = one.get("seconds") if isinstance(one, dict) else None
        if not isinstance(samples, list) or len(samples) <= SAMPLES_KEPT:
            trimmed[name] = one
            continue
        summary = {k: v for k, v in one.items() if k != "seconds"}
        summary["samples"] = len(samples)
        summary["p50_seconds"] = percentile(samples, 50)
        summary["p95_seconds"] = percentile(samples, 95)
        trimmed[name] = summary
    return {**figures, "series": trimmed}


def ratios_of(results: dict[str, Any]) -> list[tuple[str, str, float, Any, str]]:
    """Every judged or reported ratio: (benchmark, name, ratio, goal, verdict)."""
    rows = []
    for bench, result in results.items():
        figures = result.get("figures") or {}
        for name, r in (figures.get("ratios") or {}).items():
            if isinstance(r, dict) and "ratio" in r:
                rows.append(
                    (
                        bench,
                        name,
                        float(r["ratio"]),
                        r.get("goal"),
                        r.get("verdict", ""),
                    )
                )
    return rows


def judged(line: str) -> tuple[str, str] | None:
    """A goal line's (verdict, text), or None for any other line."""
    verdict, _, text = line.strip().partition(" ")
    if verdict in ("PASS", "MISS", "CEILING"):
        return verdict, text.strip()
    # Some scripts end a goal line with the verdict: "...; goal < 5 ms: PASS"
    # or "goal: ... -> MISS".
    words = line.strip().rsplit(" ", 1)
    if len(words) == 2 and words[1] in ("PASS", "MISS"):
        return words[1], words[0].rstrip(":->").strip()
    return None


def verdict_lines(results: dict[str, Any]) -> list[tuple[str, str, str]]:
    """Every judged goal, as each script printed it: (benchmark, verdict, text)."""
    rows = []
    for bench, result in results.items():
        lines = result.get("goals") or str(result.get("output", "")).splitlines()
        for line in lines:
            found = judged(line)
            if found is not None:
                rows.append((bench, *found))
    return rows


def readme_table(results: dict[str, Any], meta: dict[str, Any]) -> str:
    """The Markdown table of ratios, with the machine described."""
    described = (
        f"Machine: {meta['cpus']} CPUs, {meta['platform']}, Python {meta['python']}, "
        f"SQLite {meta['sqlite']}, load average {meta['loadavg'][0]} "
        f"at {meta['date']}. Each row is a goal line as its script printed it, "
        "against a baseline measured in the same run."
    )
    lines = [
        described,
        "",
        "| benchmark | goal, as measured | verdict |",
        "|---|---|---|",
    ]
    for bench, verdict, text in verdict_lines(results):
        cell = text.replace("|", "/")
        lines.append(f"| {bench} | {cell} | {verdict} |")
    skipped = [
        f"{b} ({r['status']})" for b, r in results.items() if r["status"] != "ok"
    ]
    if skipped:
        lines.append("")
        lines.append("Not measured: " + ", ".join(skipped) + ".")
    return "\n".join(lines)


def update_table(path: Path, table: str) -> bool:
    """Replace the table between the markers; return whether the file changed."""
    text = path.read_text()
    if START not in text or END not in text:
        return False
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    new = f"{head}{START}\n{table}\n{END}{tail}"
    if new == text:
        return False
    path.write_text(new)
    return True


def chart(results: dict[str, Any], path: Path) -> str:
    """Draw every ratio against its goal as a PNG; return what happened."""
    try:
        import matplotlib as mpl  # noqa: PLC0415 - an optional extra

        mpl.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        return "chart skipped: matplotlib not installed (pip install -e '.[bench]')"
    rows = ratios_of(results)
    if not rows:
        return "chart skipped: no ratios"
    fig, ax = plt.subplots(figsize=(10, 0.45 * len(rows) + 1.5))
    labels = [f"{b}: {n}"[:70] for b, n, *_ in rows]
    colors = [
        "#2e7d32" if v == "PASS" else "#c62828" if v == "MISS" else "#607d8b"
        for *_, v in rows
    ]
    ax.barh(range(len(rows)), [r for _, _, r, _, _ in rows], color=colors)
    for i, (_, _, _, goal, _) in enumerate(rows):
        if goal is not None:
            ax.plot([goal, goal], [i - 0.4, i + 0.4], color="black", linewidth=2)
    ax.set_yticks(range(len(rows)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("ours / raw baseline (same run); black mark = goal")
    ax.set_title("turnledger benchmarks")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return f"chart written to {path}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument(
        "--out", default=None, help="folder for results (default benchmarks/)"
    )
    parser.add_argument("--no-table", action="store_true")
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args()
    out = (
        Path(args.out)
        if args.out
        else (Path(tempfile.mkdtemp()) if args.quick else HERE)
    )
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="turnledger-bench-"))
    meta = machine()
    results: dict[str, Any] = {}
    names = args.only or (["bench_policies"] if args.quick else list(BENCHMARKS))
    for name in names:
        print(f"== {name}", flush=True)
        results[name] = run_one(name, work, quick=args.quick, timeout=args.timeout)
        print(
            f"   {results[name]['status']} ({results[name].get('seconds', 0)} s)",
            flush=True,
        )
    doc = {"machine": meta, "quick": args.quick, "benchmarks": results}
    (out / "results.json").write_text(json.dumps(doc, indent=2) + "\n")
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
    print(chart(results, out / "results.png"))
    table = readme_table(results, meta)
    print(table)
    if not args.quick and not args.no_table:
        changed = update_table(ROOT / "docs" / "benchmarks.md", table)
        print("table updated" if changed else "table unchanged")


if __name__ == "__main__":
    main()
