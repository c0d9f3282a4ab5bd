"""History trimming, tool-result bounding and scrubbing throughput.

1. Trimming: ``policies.trimming.trim_to_budget`` over a realistic agent
   history of N messages (default 10,000: turns of a user message, 0-3 tool
   rounds of 1-3 parallel calls answered by ``tool`` rows or an Anthropic-style
   carrier, and a final answer; sizes lognormal, median ~240 characters, capped
   at 20,000). The budget is half the estimate, so about half the turns go.
   Baseline, in the same run: a plain backward scan over a precomputed list of
   per-message token sizes that visits every message and slices the kept suffix
   (``perf-limits.md`` item 7, "cached_full"). The trim itself starts from the
   messages and derives the turn boundaries from roles and kinds on each call.
   The goal, trim time <= 2 x baseline time (printed as a rate ratio >= 0.50),
   is judged with the per-message estimates passed in (``estimates=``, as a
   history view that keeps them would), so both sides scan precomputed
   integers. Also reported, not judged: the same trim computing the estimates
   from ``Message.chars`` on every call, and that trim when nothing is cut.
2. Bounding: ``policies.bounding.bound_tool_result`` on a 1 MB output with
   image markers, default limit 50,000 characters (µs per call).
3. Scrubbing: ``policies.scrubbing.scrub_text`` on 1 MB of mixed text (prose,
   JSON, ``key=value`` credentials, bearer headers, URLs with query strings,
   ``sk-``/``ghp_`` tokens).

Each repetition runs every case once, round-robin; figures are medians over
repetitions, and each ratio is the median of its per-repetition ratios. The
script reports; it exits 0 even when a goal is missed (the line says MISS).

Run::

    .venv/bin/python benchmarks/bench_policies.py            # full run (~10 s)
    .venv/bin/python benchmarks/bench_policies.py --quick    # smoke: < 2 s
    .venv/bin/python benchmarks/bench_policies.py --n 50000 --repeat 15 --json out.json
"""

from __future__ import annotations

import argparse
import platform
import random
import sys
import time
from collections.abc import Callable, Sequence

from _harness import (
    Case,
    Ratio,
    print_ratios,
    print_table,
    run_rounds,
    write_json,
)

from turnledger.policies.bounding import bound_tool_result
from turnledger.policies.messages import Message, ToolCall, ToolResult, make_message
from turnledger.policies.scrubbing import scrub_text
from turnledger.policies.token_estimates import (
    estimate_history_tokens,
    estimate_tokens,
)
from turnledger.policies.trimming import trim_to_budget

MB = 1_000_000
TRIM_GOAL = 0.5  # rate ratio: trim time <= 2 x the precomputed-size scan


def _size(rng: random.Random) -> int:
    return min(20_000, int(rng.lognormvariate(5.5, 1.0)))


def _tool_round(rng: random.Random, first_id: int) -> list[Message]:
    calls = tuple(
        ToolCall(id=f"call_{first_id + k}", name="shell", arguments="{}")
        for k in range(rng.randint(1, 3))
    )
    results = tuple(
        ToolResult(call_id=call.id, content="r" * _size(rng), name=call.name)
        for call in calls
    )
    round_ = [make_message("assistant", tool_calls=calls)]
    if rng.random() < 0.3:  # Anthropic shape: one carrier with every result
        round_.append(make_message("user", tool_results=results))
    else:  # OpenAI shape: one tool row per result
        round_ += [make_message("tool", tool_results=(r,)) for r in results]
    return round_


def build_history(n: int, seed: int = 7) -> list[Message]:
    """Return a realistic agent history of exactly ``n`` messages."""
    rng = random.Random(seed)
    history = [make_message("system", "s" * 2_000)]
    next_id = 0
    while len(history) < n:
        history.append(make_message("user", "u" * _size(rng)))
        for _ in range(rng.randint(0, 3)):
            history += _tool_round(rng, next_id)
            next_id += 3
        history.append(make_message("assistant", "a" * _size(rng)))
    return history[:n]


def baseline_scan(sizes: Sequence[int], budget: int, history: list[Message]) -> list:
    """Scan every precomputed size backwards; slice off what does not fit."""
    total = 0
    cut = 0
    for index in range(len(sizes) - 1, -1, -1):
        total += sizes[index]
        if total > budget and not cut:
            cut = index + 1
    return history[cut:]


def mixed_text(size: int, seed: int = 11) -> str:
    """Return about ``size`` characters of prose, JSON and secrets."""
    rng = random.Random(seed)
    pieces = [
        "The build finished and the report is attached below. ",
        '{"user": "ada", "api_key": "AbCdEfGh12345678", "count": 3}\n',
        "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.signature\n",
        "token=QWxh+GRpbjpvcGVu/IHNlc2FtZQ== next=public ",
        "see https://example.com/path?session=abc123&sig=xyz for details ",
        "export OPENAI=sk-proj-0123456789abcdefghijklmnop\n",
        "cloned with ghp_0123456789abcdefghijABCDEFGHIJ0123 ",
        "password: 'correct horse battery staple' ",
    ]
    out: list[str] = []
    length = 0
    while length < size:
        piece = rng.choice(pieces)
        out.append(piece)
        length += len(piece)
    return "".join(out)[:size]


def image_output(size: int) -> str:
    """Return ``size`` characters of tool output with an image marker now and then."""
    line = "line of tool output with some detail " * 2 + "\n"
    marker = "[IMAGE:/tmp/render/frame_0001.png]\n"
    block = line * 20 + marker
    return (block * (size // len(block) + 1))[:size]


def _loop(work: Callable[[], object], per_call: int) -> Callable[[int], float]:
    """Turn ``work`` (``per_call`` units) into a ``Case.run``."""

    def run(n: int) -> float:
        calls = max(1, n // per_call)
        start = time.perf_counter()
        for _ in range(calls):
            work()
        return time.perf_counter() - start

    return run


def trim_cases(n: int, loops: int) -> list[Case]:
    """The trimming cases: the baseline scan and three trims."""
    history = build_history(n)
    sizes = [estimate_tokens(m) for m in history]
    total = estimate_history_tokens(history)
    budget = total // 2
    units = n * loops

    def case(name: str, work: Callable[[], object], note: str) -> Case:
        return Case(name, units, _loop(work, n), unit="msg", note=note, warmup_n=units)

    return [
        case(
            "scan_precomputed",
            lambda: baseline_scan(sizes, budget, history),
            "baseline: backward scan of precomputed sizes",
        ),
        case(
            "trim_precomputed",
            lambda: trim_to_budget(history, budget, estimates=sizes),
            "half the estimate; estimates passed in",
        ),
        case(
            "trim_to_budget",
            lambda: trim_to_budget(history, budget),
            "half the estimate; estimates from Message.chars",
        ),
        case(
            "trim_fits",
            lambda: trim_to_budget(history, total),
            "no cut (budget = estimate); from chars",
        ),
    ]


def other_cases(output_size: int, loops: int) -> list[Case]:
    """The bounding and scrubbing cases."""
    output = image_output(output_size)
    text = mixed_text(output_size)
    return [
        Case(
            "bound_tool_result",
            loops,
            _loop(lambda: bound_tool_result(output), 1),
            note=f"{output_size / MB:g} MB output, max 50,000 chars",
            warmup_n=1,
        ),
        Case(
            "scrub_text",
            loops,
            _loop(lambda: scrub_text(text), 1),
            note=f"{output_size / MB:g} MB mixed text per op",
            warmup_n=1,
        ),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print its table and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000, help="messages to trim")
    parser.add_argument("--loops", type=int, default=5, help="trims per repetition")
    parser.add_argument("--repeat", type=int, default=11, help="repetitions")
    parser.add_argument("--mb", type=float, default=1.0, help="output size in MB")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke)")
    parser.add_argument("--json", metavar="PATH", help="also write JSON here")
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.loops, args.repeat, args.mb = 500, 2, 3, 0.05
    cases = trim_cases(args.n, args.loops) + other_cases(int(args.mb * MB), 3)
    series = run_rounds(cases, repeat=args.repeat, warmup=2)
    named = {s.name: s for s in series}
    base = named["scan_precomputed"]
    ratios = [
        Ratio("trim vs scan", named["trim_precomputed"], base, TRIM_GOAL),
        Ratio("trim from chars vs scan", named["trim_to_budget"], base),
        Ratio("no-cut trim from chars vs scan", named["trim_fits"], base),
    ]
    print(f"python {platform.python_version()}, {args.n:,} messages")
    print_table(series)
    rate = named["scrub_text"].ops_per_s * args.mb
    print(f"scrubbing throughput: {rate:.1f} MB/s")
    print_ratios(ratios)
    for ratio in ratios:
        print(f"      {ratio.name}: time ratio {1 / ratio.median:.2f} (goal <= 2)")
    if args.json:
        meta = {"n": args.n, "repeat": args.repeat, "python": sys.version}
        write_json(args.json, meta=meta, series=series, ratios=ratios)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
