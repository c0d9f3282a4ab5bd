"""Inverted lists against the exact vector search, on real text: agreement and time.

``[embedding] index = "ivf"`` trades recall for speed. bench_recall_quality's
store at 100k rows is mostly near-copies of a few thousand distractors, which
inverted lists find easily; this measures the trade on real, diverse English:
distinct sentences of the docstrings of the Python standard library and of the
packages installed beside it (offline on every machine; the source files are
read in a seeded order until enough sentences are found, and the count is
printed). ``--rows`` of them are stored, ``--queries`` others are asked: a
query is a sentence not stored, and its nearest stored sentences are what a
recall would give. Each text is embedded by the local model (``--model``: the
static distillation by default, 100k sentences in seconds; the transformer
takes minutes).

Same run, same vectors: the exact index (``VectorIndex`` as the SQLite memory
builds it for this embedder) and one index per ``--probes`` value. Per query,
the top 10 of each; agreement is the share of the exact top 10 the lists
return, ``top1`` the share of queries whose exact best row they return;
latency is ``search()`` alone, p50/p95, as a ratio to the exact search's;
each index's first search (training the lists, arranging the rows) is timed
apart.

Goal, at the default probes (``[embedding] probes`` unset): agreement >= 0.90
and p50 <= 0.6 x the exact search's p50 (what makes the lists worth their
recall; with the static model's 128 dims the exact search is cheap, and they
are not).

    .venv/bin/python benchmarks/bench_vector_index.py               # static, 100k
    .venv/bin/python benchmarks/bench_vector_index.py --model all-MiniLM-L6-v2
    .venv/bin/python benchmarks/bench_vector_index.py --quick       # smoke
"""

from __future__ import annotations

import argparse
import hashlib
import random
import re
import sysconfig
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from turnledger.projections.memory.embedding import Embedder
from turnledger.projections.memory.embedding.local import PACKAGED_MODEL, LocalEmbedder
from turnledger.projections.memory.embedding.static import (
    DEFAULT_STATIC_DIMS,
    STATIC_MODEL,
    StaticEmbedder,
)
from turnledger.projections.memory.sqlite import DEFAULT_VECTOR_PROBES
from turnledger.projections.memory.sqlite._ivf import IVF_MIN_ROWS, list_count
from turnledger.projections.memory.sqlite._scope import make_scope
from turnledger.projections.memory.sqlite._vectors import VectorIndex

WINDOW = 10
AGREEMENT_GOAL = 0.90
SPEED_GOAL = 0.6
_DOCSTRING = re.compile(r'"""(.*?)"""', re.DOTALL)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_BATCH = 512


def sentences(count: int, seed: int) -> list[str]:
    """``count`` distinct docstring sentences (4+ words, 20-300 characters)."""
    paths = sysconfig.get_paths()
    roots = {Path(paths["stdlib"]), Path(paths["purelib"])}
    files = sorted(f for root in roots for f in root.rglob("*.py"))
    random.Random(seed).shuffle(files)
    found: dict[str, None] = {}
    for text in _docstrings(files):
        for sentence in _SENTENCE_END.split(" ".join(text.split())):
            if 20 <= len(sentence) <= 300 and len(sentence.split()) >= 4:
                found[sentence] = None
                if len(found) == count:
                    return list(found)
    msg = f"Expected {count:,} distinct docstring sentences, found {len(found):,}"
    raise SystemExit(msg)


def _docstrings(files: Sequence[Path]) -> Iterator[str]:
    for path in files:
        try:
            source = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        yield from _DOCSTRING.findall(source)


def embed_all(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """Every text's vector, in batches, as float32 rows."""
    parts = [
        np.asarray(embedder.embed(list(texts[i : i + _BATCH])), dtype="<f4")
        for i in range(0, len(texts), _BATCH)
    ]
    return np.concatenate(parts)


def kept_vectors(
    path: Path | None, embedder: Embedder, texts: Sequence[str]
) -> np.ndarray:
    """The texts' vectors: from ``path`` if it holds these, else embedded (and kept)."""
    identity = embedder.identity
    digest = hashlib.sha256(
        "\n".join([identity.model, str(identity.dims), *texts]).encode()
    ).hexdigest()
    if path is not None and path.exists():
        with np.load(path) as kept:
            if str(kept["digest"]) == digest:
                return np.asarray(kept["vectors"], dtype="<f4")
    vectors = embed_all(embedder, texts)
    if path is not None:
        with path.open("wb") as out:
            np.savez(out, digest=digest, vectors=vectors)
    return vectors


def make_index(
    embedder: Embedder, probes: int | None, vectors: np.ndarray
) -> VectorIndex:
    """An index as the SQLite memory builds it for ``embedder``, loaded."""
    index = VectorIndex(
        embedder.identity.dims,
        getattr(embedder, "int8_product", None),
        blas_pool=not hasattr(embedder, "int8_product"),
        probes=probes,
    )
    index.load(
        [
            (i + 1, f"s{i:07d}", "bench", None, "core", i, vectors[i].tobytes())
            for i in range(vectors.shape[0])
        ]
    )
    return index


def measure(
    index: VectorIndex, queries: np.ndarray
) -> tuple[float, list[float], list[list[str]]]:
    """The first search's ms, then every query's ms and top-10 ids, best first."""
    scope = make_scope(["bench"])
    started = time.perf_counter()
    index.search(queries[0], scope, WINDOW)
    first = (time.perf_counter() - started) * 1000
    times, tops = [], []
    for query in queries:
        started = time.perf_counter()
        hits = index.search(query, scope, WINDOW)
        times.append((time.perf_counter() - started) * 1000)
        tops.append([entry for _, entry, _ in hits])
    return first, times, tops


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    parser.add_argument("--rows", type=int, default=100_000, help="stored sentences")
    parser.add_argument("--queries", type=int, default=300, help="asked sentences")
    parser.add_argument(
        "--probes",
        type=int,
        nargs="+",
        default=sorted({8, 16, DEFAULT_VECTOR_PROBES, 64}),
        help=f"probes per ivf index (default includes {DEFAULT_VECTOR_PROBES})",
    )
    parser.add_argument(
        "--model",
        choices=(PACKAGED_MODEL, STATIC_MODEL),
        default=STATIC_MODEL,
        help="the local model (default the static one: fast to embed 100k)",
    )
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument(
        "--vectors",
        type=Path,
        help="keep the embedded vectors in this .npz file and reuse them when it "
        "holds this run's (same sentences, model and dims): the transformer "
        "takes about 17 minutes for 100k sentences on 2 cores",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.queries = IVF_MIN_ROWS + 1_000, 20
        args.probes = [DEFAULT_VECTOR_PROBES]
    embedder: Embedder = (
        StaticEmbedder(DEFAULT_STATIC_DIMS)
        if args.model == STATIC_MODEL
        else LocalEmbedder()
    )
    started = time.perf_counter()
    texts = sentences(args.rows + args.queries, args.seed)
    found = time.perf_counter() - started
    started = time.perf_counter()
    vectors = kept_vectors(args.vectors, embedder, texts)
    embedded = time.perf_counter() - started
    stored, queries = vectors[: args.rows], vectors[args.rows :]
    print(
        f"{len(texts):,} docstring sentences in {found:.1f} s, embedded by "
        f"{embedder.identity.model} ({embedder.identity.dims} dims) in "
        f"{embedded:.1f} s; {args.rows:,} stored ({list_count(args.rows)} lists), "
        f"{args.queries} asked, top {WINDOW}"
    )
    exact = make_index(embedder, None, stored)
    _, exact_times, truth = measure(exact, queries)
    exact.close()
    exact_p50 = float(np.percentile(exact_times, 50))
    print(
        f"{'index':<10} {'agree':>6} {'top1':>6} {'p50ms':>7} {'p95ms':>7} "
        f"{'x exact':>8} {'first ms':>9}"
    )
    print(
        f"{'exact':<10} {1:>6.3f} {1:>6.3f} {exact_p50:>7.3f} "
        f"{np.percentile(exact_times, 95):>7.3f} {1:>8.2f} {'':>9}"
    )
    verdicts = []
    for probes in args.probes:
        index = make_index(embedder, probes, stored)
        first, times, tops = measure(index, queries)
        index.close()
        pairs = list(zip(truth, tops, strict=True))
        agreement = float(
            np.mean([len(set(t) & set(f)) / max(1, len(t)) for t, f in pairs])
        )
        best = float(np.mean([t[0] in f for t, f in pairs if t]))
        p50 = float(np.percentile(times, 50))
        print(
            f"{f'ivf {probes}':<10} {agreement:>6.3f} {best:>6.3f} {p50:>7.3f} "
            f"{np.percentile(times, 95):>7.3f} {p50 / exact_p50:>8.2f} {first:>9.0f}"
        )
        if probes == DEFAULT_VECTOR_PROBES:
            verdicts.append((agreement, p50))
    print()
    for agreement, p50 in verdicts:
        ok = agreement >= AGREEMENT_GOAL and p50 <= SPEED_GOAL * exact_p50
        print(
            f"goal: ivf at the default {DEFAULT_VECTOR_PROBES} probes, {args.rows:,} "
            f"rows: agreement {agreement:.3f} (goal >= {AGREEMENT_GOAL}), p50 "
            f"{p50:.3f} ms vs exact {exact_p50:.3f} ms -> {p50 / exact_p50:.2f}x "
            f"(goal <= {SPEED_GOAL}x) -> {'PASS' if ok else 'MISS'}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
