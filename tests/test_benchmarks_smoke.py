"""Each benchmark script runs with tiny sizes (--quick), so none of them rots.

So do the ``--diagnose`` modes (the diagnostics folded into the benchmarks they
explain), and bench_cli_start's goal lines are ones run_all collects.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import psycopg
import pytest

from tests.conftest import require_postgres

HERE = Path(__file__).resolve().parents[1] / "benchmarks"
BENCHMARKS = sorted(p for p in HERE.glob("*.py") if not p.name.startswith("_"))
DIAGNOSED = ("bench_append", "bench_adapters", "bench_scale")


def _quick(tmp_path: Path, script: str, *extra: str) -> subprocess.CompletedProcess:
    """Run a benchmark script with ``--quick`` in ``tmp_path``."""
    return subprocess.run(
        [sys.executable, str(HERE / f"{script}.py"), "--quick", *extra],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_there_are_benchmarks():
    """The benchmarks folder is not empty."""
    assert BENCHMARKS


@pytest.mark.parametrize("script", BENCHMARKS, ids=lambda p: p.name)
def test_benchmark_runs_quick(script: Path, tmp_path: Path):
    """The script finishes with --quick and exits 0."""
    done = _quick(tmp_path, script.stem)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stdout.strip()


@pytest.mark.parametrize("script", DIAGNOSED)
def test_diagnose_runs_quick(script: str, tmp_path: Path):
    """``--diagnose`` finishes with --quick, exits 0 and prints no goal line."""
    done = _quick(tmp_path, script, "--diagnose")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stdout.strip()
    run_all = _run_all()
    assert run_all.verdict_lines({script: {"output": done.stdout}}) == []


def test_cli_start_prints_a_goal_line_per_command(tmp_path: Path):
    """Three ratios to ``python -c pass`` and two memory commands' wall times.

    Each is a goal line run_all collects.
    """
    done = _quick(tmp_path, "bench_cli_start", "--json", str(tmp_path / "o.json"))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = _run_all().verdict_lines({"bench_cli_start": {"output": done.stdout}})
    names = [text.split(":")[0] for _, _, text in rows]
    light = ["turnledger --help", "turnledger sessions", "turnledger audit"]
    assert names == [
        *light,
        "turnledger memory store (static, the default)",
        "turnledger memory recall (static, the default)",
    ]
    assert all(text.endswith("goal <= 2.5x python -c pass") for *_, text in rows[:3])
    assert all(text.endswith("goal <= 2 s") for *_, text in rows[3:])
    figures = json.loads((tmp_path / "o.json").read_text())
    assert set(figures["ratios"]) == set(light)
    assert {r["goal"] for r in figures["ratios"].values()} == {2.5}


def test_recall_quality_runs_quick_with_the_static_model(tmp_path: Path):
    """``--model all-MiniLM-L6-v2-static`` (the table shipped in the package)."""
    done = subprocess.run(
        [
            sys.executable,
            str(HERE / "bench_recall_quality.py"),
            "--quick",
            "--model",
            "all-MiniLM-L6-v2-static",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "rows embedded by all-MiniLM-L6-v2-static" in done.stdout
    assert not list(tmp_path.rglob("*.table"))  # nothing distilled at run time


def _run_all():
    import importlib.util

    path = HERE / "run_all.py"
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


def test_recall_public_skips_without_data_and_runs_synthetic(tmp_path: Path):
    """No data: one skip line, exit 0; --synthetic: the tables, goals and JSON."""
    script = str(HERE / "bench_recall_public.py")
    env = {**os.environ, "TURNLEDGER_BENCH_DATA": str(tmp_path / "absent")}
    run = {"cwd": tmp_path, "env": env, "capture_output": True, "text": True}
    skipped = subprocess.run([sys.executable, script], **run, timeout=300, check=False)
    assert skipped.returncode == 0, skipped.stderr[-2000:]
    assert skipped.stdout.startswith("skip:")
    assert len(skipped.stdout.splitlines()) == 1
    out = tmp_path / "o.json"
    done = subprocess.run(
        [sys.executable, script, "--synthetic", "--ceiling", "--json", str(out)],
        **run,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    figures = json.loads(out.read_text())
    modes = figures["recall"]["synthetic"]
    assert set(modes) == {"default", "raw-fts5"}
    assert modes["default"]["answerable"] == 5
    assert modes["default"]["updates"] == 1
    assert figures["goals"]
    assert figures["ceiling"]["synthetic"]["default"] == {
        "keyword@10": 1.0,
        "vector@10": 1.0,
        "either@10": 1.0,
        "either@20": 1.0,
    }
    assert "info  synthetic default ceiling (5 questions)" in done.stdout
    rows = _run_all().verdict_lines({"bench_recall_public": {"output": done.stdout}})
    assert len(rows) == len(figures["goals"])
    core = subprocess.run(  # the messages as session-less core facts
        [
            sys.executable,
            script,
            "--synthetic",
            "--category",
            "core",
            "--json",
            str(out),
        ],
        **run,
        timeout=300,
        check=False,
    )
    assert core.returncode == 0, core.stdout[-2000:] + core.stderr[-2000:]
    assert (
        json.loads(out.read_text())["recall"]["synthetic"]["default"]["answerable"] == 5
    )


def test_recall_public_porter_mode_merges_word_forms(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The stemming mode finds a message by another form of the question's
    words, which the same search over the engine's tokenizer does not."""
    monkeypatch.syspath_prepend(str(HERE))
    bench = pytest.importorskip("bench_recall_public")
    harness = pytest.importorskip("_harness")
    messages = [("m0", "user: I adopted a grey cat"), ("m1", "user: hello there")]
    question = bench.Question("who adopts cats", "single", ("m0",))
    conversations = [bench.Conversation("c", messages, [question])]
    found = {}
    with harness.Scratch("porter", parent=tmp_path) as scratch:
        for mode in ("raw-fts5-content", "raw-fts5-porter"):
            found[mode] = bench.run_raw(scratch, conversations, mode).any10["single"]
    assert found == {"raw-fts5-content": 0, "raw-fts5-porter": 1}


def test_recall_public_first_messages_keeps_the_questions_they_answer(
    monkeypatch: pytest.MonkeyPatch,
):
    """``--first N``: each conversation's first N messages, the questions whose
    evidence all lies in them, and the unanswerable ones."""
    monkeypatch.syspath_prepend(str(HERE))
    bench = pytest.importorskip("bench_recall_public")
    (conversation,) = bench.first_messages(bench.synthetic(), 3)["synthetic"]
    assert [key for key, _ in conversation.messages] == ["m0", "m1", "m2"]
    assert [(q.text, q.abstain) for q in conversation.questions] == [
        ("what is my cat called", False),
        ("when do deploys run", False),
        ("what did the florist charge for the tulips", True),
    ]


def test_recall_public_judges_the_transformer_by_its_own_goals(
    monkeypatch: pytest.MonkeyPatch,
):
    """Issue #28 asks more of the transformer (LoCoMo 0.85, BEAM 0.80 any@10)
    than of the default configuration (0.80, 0.75): each mode's line says its own."""
    monkeypatch.syspath_prepend(str(HERE))
    bench = pytest.importorskip("bench_recall_public")
    goals = {
        (dataset, mode): bench.any10_goal(dataset, mode)
        for dataset in ("locomo", "beam")
        for mode in ("default", "static", "transformer")
    }
    assert goals == {
        ("locomo", "default"): 0.80,
        ("locomo", "static"): 0.80,
        ("locomo", "transformer"): 0.85,
        ("beam", "default"): 0.75,
        ("beam", "static"): 0.75,
        ("beam", "transformer"): 0.80,
    }


def test_fuzz_collect_reaches_both_the_decoder_and_the_recorder(tmp_path: Path):
    """The OTLP fuzzer's quick run: from every seed request some bodies are
    recorded and some refused at decoding, some imported as files, and nothing
    crashed."""
    out = tmp_path / "fuzz.json"
    done = _quick(tmp_path, "fuzz_collect", "--json", str(out))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    figures = json.loads(out.read_text())
    seeds = {key.rsplit(":", 1)[0] for key in figures["outcomes"]}
    assert len(seeds) >= 10  # the fixtures' requests and the SDK's own
    for seed in seeds:
        assert figures["outcomes"].get(f"{seed}:recorded", 0) > 0, seed
    assert sum(v for k, v in figures["outcomes"].items() if "undecodable" in k) > 0
    assert figures["crashes"] == 0
    assert figures["events"] > 0
    assert figures["imports"]["imported"] > 0  # some went in as files too


class _Letters:
    """An embedder of our Protocol: a text's vector counts its letters a, b, c;
    its windows are the parts between ``|``."""

    identity = ("fake", "letters", 3)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [[float(t.count(c)) for c in "abc"] for t in texts]

    def window_spans(self, text: str) -> list[tuple[int, int]]:
        spans, start = [], 0
        for part in text.split("|"):
            spans.append((start, start + len(part)))
            start += len(part) + 1
        return spans


def test_recall_ceiling_scores_an_entry_by_its_best_window(
    monkeypatch: pytest.MonkeyPatch,
):
    """The vector leg ranks a long entry by its best window, not their mean;
    the shares count either leg's top 10 and top 20 apart."""
    monkeypatch.syspath_prepend(str(HERE))
    ceiling = pytest.importorskip("_recall_ceiling")
    messages = [("mixed", "aaaa|bbbb|cccc"), ("ac", "ac"), ("none", "xyz")]
    ranked = ceiling.vector_leg(_Letters(), messages)
    assert ranked("c") == ["mixed", "ac", "none"]  # by their mean, "ac" first
    found = ceiling.Ceiling()
    deep = [f"k{i}" for i in range(20)]
    found.add({"k15"}, deep, ["v"])  # only in the keyword leg's second ten
    found.add({"v"}, deep, ["v"])
    assert found.shares() == {
        "keyword@10": 0.0,
        "vector@10": 0.5,
        "either@10": 0.5,
        "either@20": 1.0,
    }


@pytest.mark.postgres
def test_recall_public_runs_the_postgres_modes_in_a_dropped_schema(tmp_path: Path):
    """The PostgreSQL memory store's modes: figures, then their schema gone;
    without a server URL they print a skip line instead."""
    base = require_postgres()
    before = _bench_schemas(base)
    script = str(HERE / "bench_recall_public.py")
    out = tmp_path / "o.json"
    argv = [sys.executable, script, "--synthetic", "--json", str(out), "--modes"]
    env = {**os.environ, "TURNLEDGER_BENCH_POSTGRES_URL": base}
    run = {"cwd": tmp_path, "capture_output": True, "text": True, "timeout": 300}
    done = subprocess.run(
        [*argv, "postgres-keyword", "postgres"], env=env, check=False, **run
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    modes = json.loads(out.read_text())["recall"]["synthetic"]
    assert set(modes) == {"postgres-keyword", "postgres"}
    assert modes["postgres"]["answerable"] == 5
    assert _bench_schemas(base) == before  # the run's schemas were dropped
    env.pop("TURNLEDGER_BENCH_POSTGRES_URL")
    skipped = subprocess.run(
        [*argv, "postgres", "default"], env=env, check=False, **run
    )
    assert skipped.returncode == 0, skipped.stderr[-2000:]
    assert "  postgres: skip (TURNLEDGER_BENCH_POSTGRES_URL unset)" in skipped.stdout
    assert set(json.loads(out.read_text())["recall"]["synthetic"]) == {"default"}


def _bench_schemas(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT schema_name FROM information_schema.schemata "
            "WHERE starts_with(schema_name, 'bench_recall_')"
        ).fetchall()
    return {row[0] for row in rows}


def test_run_all_keeps_a_long_series_as_its_count_and_percentiles(
    monkeypatch: pytest.MonkeyPatch,
):
    """results.json keeps a series of more than 200 samples as its count, p50
    and p95; a shorter one keeps its samples, and the rest is left as it was."""
    monkeypatch.syspath_prepend(str(HERE))
    run_all = _run_all()
    long = [i / 1000 for i in range(1, 302)]  # 0.001 .. 0.301
    figures = {
        "meta": {"x": 1},
        "series": {
            "recall": {"unit": "query", "n": 1, "seconds": long},
            "store": {"unit": "entry", "n": 1, "seconds": [0.5, 0.25]},
        },
    }
    kept = run_all.kept(figures)
    assert kept["meta"] == {"x": 1}
    assert kept["series"]["store"] == figures["series"]["store"]
    assert kept["series"]["recall"] == {
        "unit": "query",
        "n": 1,
        "samples": 301,
        "p50_seconds": pytest.approx(0.151),
        "p95_seconds": pytest.approx(0.286),
    }
    assert len(figures["series"]["recall"]["seconds"]) == 301  # not changed
