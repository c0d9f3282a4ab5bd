"""Scrubbing throughput over the planted-secret corpus (issue #17).

The text: every entry of ``tests/secret_corpus.py`` (more than 30 secret shapes:
cloud keys, provider tokens, JWTs, URL passwords, PEM blocks, high-entropy values
under secret-like keys), each followed by a paragraph of ordinary prose, JSON and
log text, repeated to about N bytes (default 1 MB; about 1 in 20 bytes belongs to
a secret). Cases, on the same text in the same run:

- ``ours_scrub_text``: ``policies.scrubbing.scrub_text`` over the whole text;
- ``raw_naive_regex``: the baseline, the obvious scrubber: one ``re.sub`` of a
  single alternation of the same token shapes, a ``key=value`` credential rule
  and a URL password rule (it catches fewer shapes than ours);
- ``raw_one_regex``: one ``re.sub`` of a single literal-prefix token pattern
  (``sk-`` plus a body): the least any regex pass costs;
- ``part_rule_set``: ``policies.secret_rules.scrub_rule_matches`` (gitleaks'
  rule set, issue #26) alone over the raw text; inside the scrub it runs last,
  on text the other steps have already cut, so it costs less there.

Before timing, the script checks that no planted secret survives the scrub and
that a second scrub changes nothing, on this corpus and on the true positives of
gitleaks' rule fixtures (it exits 1 otherwise). Ratios are rates
(kB/s) of ours over a baseline, medians of per-repetition ratios. The goal, ours
>= 1.0 x the naive single regex (as fast as the obvious scrubber while knowing
more shapes), is judged; the ratio to the one-literal pass is reported. Since
the scrubber runs gitleaks' 221 rules too (issue #26) it misses that goal on
this text (about 0.7 x), where every planted shape repeats every few kB.

Run::

    .venv/bin/python benchmarks/bench_scrub.py            # ~1 MB, 7 repetitions
    .venv/bin/python benchmarks/bench_scrub.py --quick    # smoke
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _harness import (
    Case,
    Ratio,
    print_ratios,
    print_table,
    run_rounds,
    write_json,
)

from tests.secret_corpus import CORPUS, gitleaks_cases
from turnledger.policies.scrubbing import scrub_text
from turnledger.policies.secret_rules import scrub_rule_matches
from turnledger.policies.secret_shapes import TOKEN_SHAPES

GOAL = 1.0
_FILLER = (
    "The deployment finished at 09:14 and the queue drained in 3 minutes; "
    'next step: {"user": "ops", "retries": 2, "url": "https://status.example.com/'
    'board"} then a log line level=info msg="turn done" tokens=812 session=demo-1. '
)
_ONE_REGEX = re.compile(r"sk-[A-Za-z0-9\-_.:]{8,}")
_NAIVE = re.compile(
    "|".join(
        [
            *(re.escape(prefix) + body for prefix, body in TOKEN_SHAPES),
            (
                r"(?i:password|passwd|secret|token|api[_-]?key|authorization)"
                r"[\"']?\s*[:=]\s*[\"']?[^\s\"']{8,}"
            ),
            r"://[^\s:@/]*:[^\s@/]+@",
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----",
        ]
    ),
    re.DOTALL,
)


def corpus_text(size: int) -> str:
    """Return the corpus with filler, repeated to about ``size`` characters."""
    unit = "\n".join(f"{text}\n{_FILLER * 4}" for _, text, _ in CORPUS)
    return (unit * (size // len(unit) + 1))[:size]


def check(text: str) -> None:
    """Exit 1 when a planted secret survives or a second pass changes the text."""
    once = scrub_text(text)
    leaks = [name for name, _, secret in CORPUS if secret in once]
    for rule, planted, secret in gitleaks_cases():
        scrubbed = scrub_text(planted)
        if secret in scrubbed or scrub_text(scrubbed) != scrubbed:
            leaks.append(rule)
    if leaks or scrub_text(once) != once:
        print(f"FAIL: leaked {leaks} or not idempotent", file=sys.stderr)
        sys.exit(1)


def _timed(function: Callable[[str], object], text: str) -> Callable[[int], float]:
    def run(n: int) -> float:
        del n  # one pass over the whole text is the unit of work
        start = time.perf_counter()
        function(text)
        return time.perf_counter() - start

    return run


def _one_regex(text: str) -> str:
    return _ONE_REGEX.sub("[REDACTED]", text)


def _naive(text: str) -> str:
    return _NAIVE.sub("[REDACTED]", text)


def main() -> None:
    """Parse arguments, check the corpus, time the cases, print the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1_000_000, help="bytes of text")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke)")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args()
    size, repeat = (50_000, 3) if args.quick else (args.size, args.repeat)
    text = corpus_text(size)
    check(corpus_text(200_000))  # whole corpus units, every shape planted
    kilobytes = max(1, len(text.encode()) // 1000)
    cases = [
        Case("ours_scrub_text", kilobytes, _timed(scrub_text, text), unit="kB"),
        Case("raw_naive_regex", kilobytes, _timed(_naive, text), unit="kB"),
        Case("raw_one_regex", kilobytes, _timed(_one_regex, text), unit="kB"),
        Case("part_rule_set", kilobytes, _timed(scrub_rule_matches, text), unit="kB"),
    ]
    series = run_rounds(cases, repeat=repeat, warmup=1)
    print(
        f"Scrub throughput over {len(CORPUS)} planted secret shapes, "
        f"{len(text):,} characters:"
    )
    print_table(series)
    ours, naive, one_regex, rule_set = series
    ratios = [
        Ratio("scrub vs the naive single regex", ours, naive, GOAL),
        Ratio("scrub vs one literal-prefix pass", ours, one_regex),
        Ratio("scrub vs its rule-set part alone", ours, rule_set),
    ]
    print_ratios(ratios)
    if args.json:
        write_json(
            args.json,
            meta={"size": len(text), "shapes": len(CORPUS)},
            series=series,
            ratios=ratios,
        )


if __name__ == "__main__":
    main()
