"""Stress fuzzing of every transcript reader and of the importer (>= 100k cases).

What one case is: one generated input, read by ``parse_transcript`` with format
detection and with each of the nine explicit formats (10 reads a case), each
parsed result counted with ``count_pairing``. Inputs come from a seeded
generator mixing: random bytes; random JSON documents and JSON Lines built
from the keys and values the formats use; corpus lines and small corpus files
with bytes spliced in or one node replaced; small VCR cassettes with one node
replaced (written as JSON, which is YAML); sessions exported by
``pipeline.export`` in the three wire formats, then mutated; YAML with alias
cycles and alias bombs; deeply nested arrays.

Outcomes, per read: ``parsed`` (a ``ParsedTranscript``), ``typed`` (a
``TranscriptError``) or ``crash`` (anything else). Writes are sampled, so that
100k cases run in minutes: one auto-detected parse in ``--import-every`` (25)
that found a conversation is imported with ``import_transcript`` into a
throwaway SQLite ledger (``synchronous=OFF``), each import its own
transaction. An import must succeed or raise a ``LedgerError``, and the ledger
must then have grown by exactly the events it reported, or not at all; at the
end ``verify`` must find the ledger whole. Anything else is a crash.

On the first crash, the input is saved as ``fuzz-crash-<seed>-<case>.<ext>``
(in ``--out``, default the current folder), its format, exception and a
command line reproducing it are printed, and the script exits 1 after the run.

``--atheris`` runs the same check under libFuzzer (coverage-guided, seeded from
the corpus) when the optional ``atheris`` package is installed.

Run::

    .venv/bin/python benchmarks/fuzz_importers.py                  # 100k cases
    .venv/bin/python benchmarks/fuzz_importers.py --quick          # ~500, seconds
    .venv/bin/python benchmarks/fuzz_importers.py --cases 20000 --seed 7
    .venv/bin/python benchmarks/fuzz_importers.py --atheris --cases 50000
"""

from __future__ import annotations

import argparse
import atexit
import json
import random
import shutil
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import yaml
from _harness import installed
from _mutations import Mutations, dump, splice

from turnledger.ledger.errors import LedgerError
from turnledger.ledger.events import (
    AssistantMessage,
    Event,
    HistoryTrimmed,
    SessionOpened,
    ToolCallRecord,
    ToolResultRecorded,
    TurnCompleted,
    TurnStarted,
)
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import EventStore, open_store
from turnledger.ledger.verify import verify
from turnledger.pipeline.export import (
    EXPORT_FORMATS,
    ExportOptions,
    prepare_history,
    render,
)
from turnledger.pipeline.formats import (
    FORMAT_NAMES,
    ParsedTranscript,
    TranscriptError,
    count_pairing,
    parse_transcript,
)
from turnledger.pipeline.importer import import_transcript
from turnledger.pipeline.sessions import load_history
from turnledger.projections.history.read import visible_messages

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"
FORMATS = ("auto", *FORMAT_NAMES)
SUFFIXES = (".json", ".jsonl", ".yaml")

WORDS = [
    "type", "role", "content", "messages", "input", "output", "contents", "parts",
    "tool_calls", "tool_call_id", "call_id", "id", "name", "arguments", "message",
    "payload", "uuid", "parentUuid", "sessionId", "kind", "part_kind", "text",
    "functionCall", "functionResponse", "tool_use_id", "interactions", "loglines",
    "data", "system", "request", "response", "parsed_body", "body", "string",
    "uri", "method", "status", "code", "choices", "delta", "candidates", "timestamp",
]  # fmt: skip
VALUES = [
    "user", "assistant", "tool", "model", "system", "developer", "human", "ai",
    "function_call", "function_call_output", "tool_use", "tool_result", "text",
    "session_meta", "response_item", "event_msg", "tool-call", "tool-return",
    "request", "response", "message", "POST", "https://api.openai.com/v1/chat/completions",
    "https://api.anthropic.com/v1/messages", "https://api.openai.com/v1/responses",
    "https://generativelanguage.googleapis.com/v1beta/models/x:generateContent",
]  # fmt: skip


# -- inputs ----------------------------------------------------------------------


MUTATIONS = Mutations(WORDS, VALUES)


@dataclass
class Seeds:
    """Real inputs the mutations start from (a built-in few without the corpus)."""

    lines: list[bytes] = field(default_factory=list)
    files: list[tuple[bytes, str]] = field(default_factory=list)
    cassettes: list[object] = field(default_factory=list)
    exports: list[tuple[bytes, str]] = field(default_factory=list)

    @classmethod
    def load(cls, rng: random.Random) -> Seeds:
        seeds = cls(exports=_exports(rng))
        if CORPUS.exists():
            for path in sorted(CORPUS.rglob("*.jsonl")):
                seeds.lines += [x for x in path.read_bytes().splitlines()[:8] if x]
                if path.stat().st_size < 20_000:
                    seeds.files.append((path.read_bytes(), path.suffix))
            cassettes = sorted(
                (CORPUS / "pydantic-ai").glob("*.yaml"), key=lambda p: p.stat().st_size
            )
            seeds.cassettes = [yaml.safe_load(p.read_bytes()) for p in cassettes[:6]]
        seeds.lines = seeds.lines or [dump(FALLBACK_LINE)]
        seeds.files = seeds.files or [(b"\n".join(seeds.lines), ".jsonl")]
        seeds.cassettes = seeds.cassettes or [{"interactions": []}]
        return seeds


def _exports(rng: random.Random) -> list[tuple[bytes, str]]:
    """Sessions with parallel calls, failures and a trim, exported 3 ways each."""
    out: list[tuple[bytes, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(str(Path(tmp) / "exports.db"), synchronous="OFF")
        for s in range(8):
            stream = session_stream_id("seed", f"s{s}")
            events: list[Event] = [SessionOpened(agent="seed", session_key=f"s{s}")]
            for t in range(rng.randrange(1, 5)):
                turn = f"t{t}"
                calls = tuple(
                    ToolCallRecord(id=f"{turn}c{c}", name="grep", arguments='{"q": 1}')
                    for c in range(rng.randrange(4))
                )
                events += [
                    TurnStarted(turn_id=turn, origin="interactive", user_input="q"),
                    AssistantMessage(turn_id=turn, tool_calls=calls),
                ]
                events += [
                    ToolResultRecorded(
                        turn_id=turn,
                        call_id=c.id,
                        tool=c.name,
                        success=rng.random() < 0.7,
                        output="out",
                        error="boom",
                    )
                    for c in calls
                    if rng.random() < 0.8
                ]
                events += [
                    AssistantMessage(turn_id=turn, text="a", iteration=1),
                    TurnCompleted(turn_id=turn),
                ]
                if rng.random() < 0.3:
                    events.append(
                        HistoryTrimmed(
                            turn_id=turn,
                            dropped_messages=1,
                            dropped_turns=1,
                            kept_turns=1,
                            tokens_before=2,
                            tokens_after=1,
                            reason="budget",
                            dropped_through_version=len(events) // 2,
                        )
                    )
            store.append(stream, events, expected_version=0)
            messages = visible_messages(load_history(store, stream))
            prepared = prepare_history(messages, ExportOptions())
            out += [
                (msgspec.json.encode(render(prepared.messages, fmt)), ".json")
                for fmt in EXPORT_FORMATS
            ]
        store.close()
    return out


FALLBACK_LINE = {
    "type": "user",
    "sessionId": "s",
    "uuid": "u",
    "message": {"role": "user", "content": "hi"},
}

Generator = Callable[[random.Random, Seeds], tuple[bytes, str]]


def gen_bytes(rng: random.Random, seeds: Seeds) -> tuple[bytes, str]:
    del seeds
    data = bytes(rng.randrange(256) for _ in range(rng.randrange(400)))
    return data, rng.choice(SUFFIXES)


def gen_json(rng: random.Random, seeds: Seeds) -> tuple[bytes, str]:
    del seeds
    return dump(MUTATIONS.value(rng)), ".json"


def gen_jsonl(rng: random.Random, seeds: Seeds) -> tuple[bytes, str]:
    del seeds
    return b"\n".join(
        dump(MUTATIONS.value(rng)) for _ in range(rng.randrange(1, 6))
    ), ".jsonl"


def gen_corpus_lines(rng: random.Random, seeds: Seeds) -> tuple[bytes, str]:
    lines = [rng.choice(seeds.lines) for _ in range(rng.randrange(1, 7))]
    i = rng.randrange(len(lines))
    try:
        lines[i] = dump(MUTATIONS.mutate(rng, json.loads(lines[i])))
    except ValueError:
        lines[i] = splice(rng, lines[i])
    return b"\n".join(lines), ".jsonl"


def gen_corpus_bytes(rng: random.Random, seeds: Seeds) -> tuple[bytes, str]:
    data, suffix = rng.choice(seeds.files)
    for _ in range(rng.randrange(1, 4)):
        data = splice(rng, data)
    return data, suffix


def gen_cassette(rng: random.Random, seeds: Seeds) -> tuple[bytes, str]:
    cassette = rng.choice(seeds.cassettes)
    for _ in range(rng.randrange(1, 3)):
        cassette = MUTATIONS.mutate(rng, cassette)
    return dump(cassette), ".yaml"


def gen_export(rng: random.Random, seeds: Seeds) -> tuple[bytes, str]:
    data, suffix = rng.choice(seeds.exports)
    if rng.random() < 0.2:
        return splice(rng, data), suffix
    return dump(MUTATIONS.mutate(rng, json.loads(data))), suffix


def gen_yaml_aliases(rng: random.Random, seeds: Seeds) -> tuple[bytes, str]:
    del seeds
    if rng.random() < 0.3:
        return b"interactions: &a [*a]\n", ".yaml"  # a cycle
    levels = rng.randrange(2, 30)
    lines = [b"a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]".encode()
        for i in range(1, levels)
    ]
    lines.append(f"interactions: [*a{levels - 1}]".encode())
    return b"\n".join(lines), ".yaml"


def gen_nesting(rng: random.Random, seeds: Seeds) -> tuple[bytes, str]:
    del seeds
    depth = rng.choice([50, 500, 5_000, 50_000])
    opener, closer = rng.choice([(b"[", b"]"), (b'{"messages":', b"}")])
    return opener * depth + b"1" + closer * depth, rng.choice(SUFFIXES)


GENERATORS: tuple[tuple[str, Generator], ...] = (
    ("bytes", gen_bytes),
    ("json", gen_json),
    ("jsonl", gen_jsonl),
    ("corpus-lines", gen_corpus_lines),
    ("corpus-bytes", gen_corpus_bytes),
    ("cassette", gen_cassette),
    ("export", gen_export),
    ("yaml-aliases", gen_yaml_aliases),
    ("nesting", gen_nesting),
)
WEIGHTS = (10, 12, 10, 20, 12, 10, 20, 2, 2)


# -- checking --------------------------------------------------------------------


@dataclass
class Crash:
    """The first input that raised something other than our typed errors."""

    case: int
    generator: str
    fmt: str
    data: bytes
    suffix: str
    error: str
    trace: str


@dataclass
class Tally:
    """Outcome counts."""

    reads: Counter[tuple[str, str]] = field(default_factory=Counter)
    generators: Counter[str] = field(default_factory=Counter)
    imports: Counter[str] = field(default_factory=Counter)
    events: int = 0
    crashes: int = 0
    first: Crash | None = None

    def crash(self, crash: Crash) -> None:
        self.crashes += 1
        if self.first is None:
            self.first = crash


class Importer:
    """Imports a sample of parsed transcripts into a throwaway ledger."""

    def __init__(self, path: Path, every: int) -> None:
        self.store: EventStore = open_store(str(path), synchronous="OFF")
        self.every = max(1, every)
        self.seen = 0

    def maybe_import(
        self, parsed: ParsedTranscript, case: int, rng: random.Random, tally: Tally
    ) -> str | None:
        """Import one parse in ``every``; return what went wrong, if anything."""
        if not parsed.conversations:
            return None
        self.seen += 1
        if self.seen % self.every:
            return None
        session = rng.choice([None, None, "", "k", "a/b c", "\x00", "é" * 300])
        before = self.store.max_position()
        try:
            report = import_transcript(
                self.store, parsed, agent=f"fuzz{case}", session=session
            )
        except LedgerError as e:
            tally.imports[f"refused ({type(e).__name__})"] += 1
            grown = self.store.max_position() - before
            return f"a refused import wrote {grown} events" if grown else None
        written = sum(s.events for s in report.sessions)
        grown = self.store.max_position() - before
        tally.imports["imported"] += 1
        tally.events += written
        if grown != written:
            return f"the import reported {written} events, the ledger grew by {grown}"
        return None

    def finish(self) -> str | None:
        """Check the whole ledger; return a problem, if any."""
        report = verify(self.store)
        count = self.store.count()
        self.store.close()
        if not report.ok:
            return f"verify found {len(report.problems)} problems: {report.problems[0]}"
        if count != report.last_position:
            return f"{count} events but the last position is {report.last_position}"
        return None


@dataclass
class Fuzzer:
    """Reads inputs in every format, imports a sample, tallies the outcomes."""

    importer: Importer | None
    rng: random.Random
    tally: Tally

    def read(self, data: bytes, fmt: str, path: str, case: int) -> str | None:
        """One read (and maybe its import); return a problem that raised nothing."""
        parsed = parse_transcript(data, format=fmt, path=path)
        count_pairing(parsed)
        self.tally.reads[fmt, "parsed"] += 1
        if self.importer is None or fmt != "auto":
            return None
        return self.importer.maybe_import(parsed, case, self.rng, self.tally)

    def check_case(self, case: int, name: str, data: bytes, suffix: str) -> None:
        """Read one input in every format; tally each outcome."""
        path = f"case{case}{suffix}"
        for fmt in FORMATS:
            try:
                problem = self.read(data, fmt, path, case)
            except TranscriptError:
                self.tally.reads[fmt, "typed"] += 1
                continue
            except Exception as e:  # noqa: BLE001 - any other exception is the finding
                problem = f"{type(e).__name__}: {e}"[:500]
                trace = "".join(traceback.format_exc(limit=-6))
            else:
                if problem is None:
                    continue
                trace = ""
            self.tally.reads[fmt, "crash"] += 1
            self.tally.crash(Crash(case, name, fmt, data, suffix, problem, trace))


def cases(seed: int, n: int, seeds: Seeds) -> Iterator[tuple[int, str, bytes, str]]:
    """The generated inputs: (case number, generator, bytes, file suffix)."""
    rng = random.Random(seed)
    names = [g[0] for g in GENERATORS]
    funcs = dict(GENERATORS)
    for case in range(n):
        name = rng.choices(names, WEIGHTS)[0]
        data, suffix = funcs[name](rng, seeds)
        yield case, name, data, suffix


# -- reporting -------------------------------------------------------------------


def report_crash(crash: Crash, out: Path, seed: int) -> Path:
    """Save the reproducer and print how to replay it."""
    out.mkdir(parents=True, exist_ok=True)
    file = out / f"fuzz-crash-{seed}-{crash.case}{crash.suffix}"
    file.write_bytes(crash.data)
    fmt = crash.fmt
    print(f"\nFIRST CRASH: case {crash.case} ({crash.generator})")
    print(f"  format {fmt}: {crash.error}")
    print(f"  input saved to {file} ({len(crash.data)} bytes): {crash.data[:120]!r}")
    print(f"  reproduce: .venv/bin/turnledger import {file} --format {fmt}")
    print("  " + crash.trace.replace("\n", "\n  ").rstrip())
    return file


def print_summary(tally: Tally, seconds: float, n: int) -> None:
    """Per-format outcomes, inputs per generator, imports."""
    print(f"{n:,} cases ({n * len(FORMATS):,} reads) in {seconds:.1f} s")
    print(f"  {n / seconds:,.0f} cases/s, {n * len(FORMATS) / seconds:,.0f} reads/s")
    print(f"{'format':<18}{'parsed':>10}{'typed':>10}{'crash':>8}")
    for fmt in FORMATS:
        parsed, typed, crash = (
            tally.reads[fmt, k] for k in ("parsed", "typed", "crash")
        )
        print(f"{fmt:<18}{parsed:>10,}{typed:>10,}{crash:>8,}")
    print(
        "inputs: "
        + ", ".join(f"{k} {v:,}" for k, v in sorted(tally.generators.items()))
    )
    print(
        "imports: "
        + (", ".join(f"{k} {v:,}" for k, v in sorted(tally.imports.items())) or "none")
        + f"; {tally.events:,} events written"
    )


# -- atheris ---------------------------------------------------------------------


def run_atheris(args: argparse.Namespace, seeds: Seeds) -> int:
    """Coverage-guided fuzzing with libFuzzer through atheris (optional package)."""
    if not installed(
        "fuzz_importers --atheris: atheris", "atheris", hint="pip install atheris"
    ):
        return 2
    import atheris  # noqa: PLC0415 - an optional tool, imported only for --atheris

    work = Path(tempfile.mkdtemp(prefix="fuzz_atheris_"))
    atexit.register(shutil.rmtree, work, ignore_errors=True)
    importer = Importer(work / "ledger.db", args.import_every)
    seeds_dir = work / "seeds"
    seeds_dir.mkdir()
    rng = random.Random(args.seed)
    # Seed inputs: a format byte, a suffix byte, then the content.
    for i, (_, _, data, suffix) in enumerate(cases(args.seed, 200, seeds)):
        head = bytes([i % len(FORMATS), SUFFIXES.index(suffix)])
        (seeds_dir / f"seed{i}").write_bytes(head + data[:4096])
    counter = [0]

    def one_input(raw: bytes) -> None:
        if len(raw) < 2:
            return
        counter[0] += 1
        fmt = FORMATS[raw[0] % len(FORMATS)]
        suffix = SUFFIXES[raw[1] % len(SUFFIXES)]
        data = raw[2:]
        try:
            parsed = parse_transcript(data, format=fmt, path=f"case{suffix}")
        except TranscriptError:
            return
        count_pairing(parsed)
        problem = importer.maybe_import(parsed, counter[0], rng, Tally())
        if problem is not None:
            raise AssertionError(problem)

    print(
        f"atheris: {args.cases:,} runs from {len(list(seeds_dir.iterdir()))} seeds, "
        f"crashes saved to {args.out}/fuzz-crash-*"
    )
    args.out.mkdir(parents=True, exist_ok=True)
    atheris.instrument_all()
    atheris.Setup(
        [
            sys.argv[0],
            f"-atheris_runs={args.cases}",
            f"-seed={args.seed}",
            "-max_len=8192",
            "-timeout=20",
            "-rss_limit_mb=4096",
            f"-artifact_prefix={args.out}/fuzz-",
            str(seeds_dir),
        ],
        one_input,
    )
    atheris.Fuzz()  # exits the process: 0 when the runs are done, non-zero on a crash
    return 0  # pragma: no cover - not reached


# -- main ------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse the command line."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=100_000, help="inputs (100,000)")
    p.add_argument("--seed", type=int, default=20240601)
    p.add_argument(
        "--import-every",
        type=int,
        default=25,
        help="import one parsed transcript in N into the ledger (25)",
    )
    p.add_argument("--out", type=Path, default=Path(), help="where a crash is saved")
    p.add_argument("--quick", action="store_true", help="about 500 cases (smoke test)")
    p.add_argument("--atheris", action="store_true", help="libFuzzer-driven mode")
    p.add_argument("--json", metavar="PATH", help="also write the counts as JSON")
    args = p.parse_args(argv)
    if args.quick:
        args.cases, args.import_every = 500, 5
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Fuzz; print the outcome table; exit 1 on any crash."""
    args = parse_args(argv)
    seeds = Seeds.load(random.Random(args.seed))
    if args.atheris:
        return run_atheris(args, seeds)
    corpus = "corpus" if CORPUS.exists() else f"no corpus at {CORPUS}: built-in seeds"
    print(
        f"fuzz_importers: {args.cases:,} cases x {len(FORMATS)} formats, seed "
        f"{args.seed}, import 1 in {args.import_every}; {corpus}"
    )
    tally = Tally()
    rng = random.Random(args.seed + 1)
    with tempfile.TemporaryDirectory(prefix="fuzz_importers_") as tmp:
        importer = Importer(Path(tmp) / "ledger.db", args.import_every)
        fuzzer = Fuzzer(importer, rng, tally)
        start = time.perf_counter()
        for case, name, data, suffix in cases(args.seed, args.cases, seeds):
            tally.generators[name] += 1
            fuzzer.check_case(case, name, data, suffix)
        problem = importer.finish()
        seconds = time.perf_counter() - start
    if problem is not None:
        tally.crash(Crash(-1, "ledger verify", "-", b"", ".txt", problem, ""))
    print_summary(tally, seconds, args.cases)
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "cases": args.cases,
                    "seed": args.seed,
                    "seconds": seconds,
                    "reads": {
                        f"{f}:{k}": v for (f, k), v in sorted(tally.reads.items())
                    },
                    "imports": dict(tally.imports),
                    "events": tally.events,
                    "crashes": tally.crashes,
                },
                indent=2,
            )
            + "\n",
            encoding="utf-8",
        )
    if tally.first is None:
        print("OK: only parsed results and TranscriptError; imports all-or-nothing")
        return 0
    print(f"CRASHES: {tally.crashes}")
    report_crash(tally.first, args.out, args.seed)
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
