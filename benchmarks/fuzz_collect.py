"""Stress fuzzing of the OTLP receiver's decoding and recording (>= 100k cases).

What one case is: one request body, decoded as ``turnledger collect`` decodes
it and recorded by a long-lived :class:`~turnledger.pipeline.collect.Recorder`
(a receiver's, batch after batch: the sessions it remembers carry from case to
case; a new ledger and receiver every ``--run`` cases). Bodies start from real
OTLP/JSON requests we did not write: the spans and log records recorded from
six frameworks' instrumentations in ``tests/fixtures/otlp`` (see its
PROVENANCE.md), and the current GenAI form as the OpenTelemetry SDK's own
encoder writes it (``bench_collect``'s agent). A case takes a random run of one
request's spans (or log records), then applies one to four mutations:

- a node replaced by a random value, or a key dropped (any depth);
- ids made to collide (a span its own parent, two spans one id, a parent's
  parent its child), malformed, or of another trace;
- a span sent twice, or moved to another resource;
- start and end times swapped, zeroed, huge or not numbers;
- an attribute's key turned into a GenAI one, with a random value of any
  ``AnyValue`` kind;
- the JSON inside a string attribute (the messages) mutated;

or sends the previous case's body again (a retry). One body in twenty has a few
bytes spliced in, and one in ten goes as protobuf (the request re-encoded, then
spliced).

Every case is also taken by a receiver restarted for each batch, into a ledger
of its own: it knows only what it reads from its ledger, and must write what
the long-lived one writes (the same events, in the same streams, at the same
versions), or refuse what it refuses.

Outcomes, per case: ``recorded``; ``undecodable`` (a ``CollectError``: the
receiver answers 400); ``refused`` (a ``LedgerError`` from recording: 400 or
503); or ``crash``: any other exception, a recorded batch whose ledger grew by
other than the events its report counts, a refused one whose ledger grew at
all, or a restarted receiver that wrote otherwise. Every tenth JSON case is also
imported as a file (``turnledger import``'s ``import_otlp_file``) into a third
ledger: a refusal (``CollectError``, ``InputFileError``, ``LedgerError``) writes
nothing, an import grows the ledger by the events it says it wrote. At the end
of each run, ``verify`` must find the three ledgers whole.

On the first crash its body is saved as ``fuzz-collect-<seed>-<case>.json``
(or ``.pb``, in ``--out``), with the exception and the run's seed printed, and
the script exits 1 after the run.

Run::

    .venv/bin/python benchmarks/fuzz_collect.py                  # 100k cases
    .venv/bin/python benchmarks/fuzz_collect.py --quick          # ~300, seconds
    .venv/bin/python benchmarks/fuzz_collect.py --cases 20000 --seed 7
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import copy
import json
import random
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import msgspec
from _mutations import Mutations, dump, splice
from google.protobuf.json_format import ParseDict
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)

from tests.pipeline.collect.spans import otlp_json
from turnledger.ledger.errors import LedgerError
from turnledger.ledger.store import EventStore, open_store
from turnledger.ledger.verify import verify
from turnledger.pipeline.collect import (
    CollectError,
    Recorder,
    decode_json,
    decode_protobuf,
)
from turnledger.pipeline.collect.decode import decode_logs_json, decode_logs_protobuf
from turnledger.pipeline.import_files import import_otlp_file
from turnledger.pipeline.inputs import InputFileError

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "otlp"
MAX_FILE = 16 * 1024 * 1024
IDS = ("traceId", "spanId", "parentSpanId")
GENAI_KEYS = (
    "gen_ai.operation.name",
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.conversation.id",
    "gen_ai.tool.name",
    "gen_ai.tool.call.id",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "gen_ai.request.model",
    "gen_ai.response.model",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.prompt.0.content",
    "gen_ai.prompt.0.role",
    "gen_ai.completion.0.content",
    "gen_ai.completion.0.tool_calls.0.id",
    "llm.input_messages.0.message.content",
    "llm.output_messages.0.message.tool_calls.0.tool_call.id",
    "llm.token_count.prompt",
    "openinference.span.kind",
    "input.value",
    "output.value",
    "ai.prompt.messages",
    "ai.response.toolCalls",
    "event_name",
    "pydantic_ai.all_messages",
    "all_messages_events",
    "gcp.vertex.agent.llm_request",
    "gcp.vertex.agent.llm_response",
)
OUTCOMES = ("recorded", "undecodable", "refused", "crash")

MUTATIONS = Mutations(
    words=(
        "role", "content", "parts", "type", "id", "name", "arguments", "response",
        "result", "tool_calls", "function", "text", "finish_reason", "message",
        "stringValue", "intValue", "doubleValue", "boolValue", "arrayValue",
        "kvlistValue", "bytesValue", "values", "key", "value", "attributes",
        "spans", "scopeSpans", "resourceSpans", "logRecords", "body", "events",
    ),
    values=(
        "user", "assistant", "system", "tool", "model", "text", "tool_call",
        "tool_call_response", "chat", "execute_tool", "invoke_agent", "LLM",
        "TOOL", "AGENT", "call_1", "call_2", "gen_ai.user.message",
        "gen_ai.client.inference.operation.details", "gen_ai.choice", "{}", "[]",
        "null", "\u00b2",
    ),
)  # fmt: skip


# -- seeds -----------------------------------------------------------------------


@dataclass(frozen=True)
class Seed:
    """One real request: its OTLP/JSON document and signal (spans or logs)."""

    name: str
    document: dict[str, Any]
    logs: bool


def load_seeds() -> list[Seed]:
    """The fixtures' requests, then the SDK's own encoding of the current form."""
    seeds = []
    for path in sorted(FIXTURES.glob("*.json")):
        document = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(document, dict) and document.keys() & {
            "resourceSpans",
            "resourceLogs",
        }:  # a request (not another fixture: a list of them)
            seeds.append(Seed(path.stem, document, "resourceLogs" in document))
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_collect import Spans  # noqa: PLC0415 - the benchmark's agent

    for i, batch in enumerate(Spans(24).batches(3)):
        document: Any = otlp_json(batch)
        seeds.append(Seed(f"sdk-current-{i}", document, logs=False))
    return seeds


def _base64_ids(value: Any) -> Any:
    """OTLP/JSON's hex ids as protobuf's JSON mapping has them (what is no hex
    stays as it is, so that it fails as sent)."""
    if isinstance(value, list):
        return [_base64_ids(v) for v in value]
    if not isinstance(value, dict):
        return value
    found = {}
    for k, v in value.items():
        if k in IDS and isinstance(v, str):
            with contextlib.suppress(ValueError):
                v = base64.b64encode(bytes.fromhex(v)).decode()  # noqa: PLW2901
        found[k] = _base64_ids(v)
    return found


# -- mutations -------------------------------------------------------------------


def _items(document: dict[str, Any], logs: bool) -> list[dict[str, Any]]:
    """The request's spans (log records), as the dicts in the document."""
    return [x for held in _scopes(document, logs) for x in held if isinstance(x, dict)]


def _scopes(document: dict[str, Any], logs: bool) -> list[list[Any]]:
    """The lists that hold the spans (log records), one per scope."""
    outer, inner, leaf = (
        ("resourceLogs", "scopeLogs", "logRecords")
        if logs
        else ("resourceSpans", "scopeSpans", "spans")
    )
    return [
        held
        for resource in _list(document.get(outer))
        for scope in _list(_dict(resource).get(inner))
        if isinstance(held := _dict(scope).get(leaf), list)
    ]


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _any_value(rng: random.Random) -> dict[str, Any]:
    """A random OTLP/JSON ``AnyValue`` of any kind."""
    kind = rng.randrange(8)
    if kind == 0:
        return {"stringValue": json.dumps(MUTATIONS.value(rng))}
    if kind == 1:
        return {"intValue": rng.choice(["1", "-5", "9" * 25, 7, "x", 1.5])}
    if kind == 2:
        return {"doubleValue": rng.choice([0.5, "NaN", "Infinity", "1e999", "z"])}
    if kind == 3:
        return {"boolValue": rng.choice([True, "true", 1])}
    if kind == 4:
        values = [_any_value(rng) for _ in range(rng.randrange(3))]
        return {"arrayValue": {"values": values}}
    if kind == 5:
        pairs = [
            {"key": rng.choice(MUTATIONS.words), "value": _any_value(rng)}
            for _ in range(rng.randrange(3))
        ]
        return {"kvlistValue": {"values": pairs}}
    if kind == 6:
        return {"bytesValue": rng.choice(["AAEC", "not base64!", ""])}
    return {"stringValue": str(MUTATIONS.scalar(rng))}


def mutate_node(rng: random.Random, document: dict[str, Any], logs: bool) -> None:
    """Replace one node of one span (or of the whole request) by a random value."""
    items = _items(document, logs)
    if items and rng.random() < 0.8:
        item = rng.choice(items)
        changed = MUTATIONS.mutate(rng, item)
        item.clear()
        item.update(_dict(changed))
    else:
        changed = MUTATIONS.mutate(rng, document)
        document.clear()
        document.update(_dict(changed))


def mutate_ids(rng: random.Random, document: dict[str, Any], logs: bool) -> None:
    """Make ids collide, or break one."""
    items = _items(document, logs)
    if not items:
        return
    a, b = rng.choice(items), rng.choice(items)
    pick = rng.randrange(6)
    if pick == 0:
        a["parentSpanId"] = a.get("spanId")  # its own parent
    elif pick == 1:
        a["spanId"] = b.get("spanId")  # two spans, one id
    elif pick == 2:
        a["parentSpanId"], b["parentSpanId"] = b.get("spanId"), a.get("spanId")
    elif pick == 3:
        a["traceId"] = f"{rng.getrandbits(128):032x}"
    else:
        key = rng.choice(IDS)
        a[key] = rng.choice(["", "zz" * 8, "ab", "0" * 32, "A" * 16, 12, None])


def mutate_order(rng: random.Random, document: dict[str, Any], logs: bool) -> None:
    """Send a span twice, or move one to another scope."""
    scopes = [s for s in _scopes(document, logs) if s]
    if not scopes:
        return
    source = rng.choice(scopes)
    item = rng.choice(source)
    target = rng.choice(_scopes(document, logs))
    if rng.random() < 0.5:
        target.insert(rng.randrange(len(target) + 1), copy.deepcopy(item))
    else:
        source.remove(item)
        target.insert(rng.randrange(len(target) + 1), item)


def mutate_times(rng: random.Random, document: dict[str, Any], logs: bool) -> None:
    """Swap, zero or break a span's times."""
    items = _items(document, logs)
    if not items:
        return
    item = rng.choice(items)
    start, end = ("timeUnixNano", "observedTimeUnixNano")
    if not logs:
        start, end = "startTimeUnixNano", "endTimeUnixNano"
    keys = (start, end)
    if rng.random() < 0.4:
        item[keys[0]], item[keys[1]] = item.get(keys[1]), item.get(keys[0])
    else:
        item[rng.choice(keys)] = rng.choice(["0", 0, str(2**64), "-1", "soon", 1.5])


def mutate_genai(rng: random.Random, document: dict[str, Any], logs: bool) -> None:
    """Give a span a GenAI attribute (or turn one of its keys into one)."""
    items = _items(document, logs)
    if not items:
        return
    attributes = rng.choice(items).setdefault("attributes", [])
    if not isinstance(attributes, list):
        return
    pair = {"key": rng.choice(GENAI_KEYS), "value": _any_value(rng)}
    if attributes and rng.random() < 0.5:
        attributes[rng.randrange(len(attributes))] = pair
    else:
        attributes.append(pair)


def mutate_inner_json(rng: random.Random, document: dict[str, Any], logs: bool) -> None:
    """Mutate the JSON held in a string attribute (a span's messages)."""
    held = []
    for item in _items(document, logs):
        for pair in _list(item.get("attributes")):
            text = _dict(_dict(pair).get("value")).get("stringValue")
            if isinstance(text, str) and text[:1] in "[{":
                held.append(pair)
    if not held:
        return
    pair = rng.choice(held)
    try:
        inner = json.loads(pair["value"]["stringValue"])
    except ValueError:
        return
    pair["value"]["stringValue"] = json.dumps(MUTATIONS.mutate(rng, inner))


MUTATORS: tuple[Callable[[random.Random, dict[str, Any], bool], None], ...] = (
    mutate_node,
    mutate_ids,
    mutate_order,
    mutate_times,
    mutate_genai,
    mutate_inner_json,
)


def cut(rng: random.Random, document: dict[str, Any], logs: bool) -> None:
    """Keep a random run of each scope's spans (a batch cut where it falls)."""
    for held in _scopes(document, logs):
        if len(held) > 1:
            start = rng.randrange(len(held))
            end = rng.randrange(start + 1, len(held) + 1)
            held[:] = held[start:end]


# -- cases -----------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One request: its body, encoding and signal."""

    number: int
    seed: str
    body: bytes
    protobuf: bool
    logs: bool


def make_case(rng: random.Random, number: int, seeds: Sequence[Seed]) -> Case:
    """A mutated cut of a random seed request, encoded as JSON or protobuf."""
    seed = rng.choice(seeds)
    document = copy.deepcopy(seed.document)
    cut(rng, document, seed.logs)
    for _ in range(rng.randrange(1, 5)):
        rng.choice(MUTATORS)(rng, document, seed.logs)
    protobuf = rng.random() < 0.1
    body = _protobuf(document, seed.logs) if protobuf else dump(document)
    if body is not None and rng.random() < 0.05:
        body = splice(rng, body)
    if body is None:  # no protobuf message holds it: it goes as JSON
        protobuf, body = False, dump(document)
    return Case(number, seed.name, body, protobuf, seed.logs)


def _protobuf(document: dict[str, Any], logs: bool) -> bytes | None:
    """The request as protobuf, or ``None`` when the mutations left none."""
    message = ExportLogsServiceRequest() if logs else ExportTraceServiceRequest()
    try:
        ParseDict(_base64_ids(document), message)
    except Exception:  # noqa: BLE001 - protobuf's parse errors have no one type
        return None
    return bytes(message.SerializeToString())


# -- the receiver ------------------------------------------------------------------


@dataclass
class Tally:
    """Outcomes per seed request and signal, and the first crash."""

    outcomes: Counter[tuple[str, str]] = field(default_factory=Counter)
    imports: Counter[str] = field(default_factory=Counter)
    events: int = 0
    crashes: int = 0
    first: tuple[Case, str, str] | None = None

    def crash(self, case: Case, problem: str, trace: str) -> None:
        """Count a crash (keep the first)."""
        self.crashes += 1
        self.outcomes[case.seed, "crash"] += 1
        if self.first is None:
            self.first = (case, problem, trace)


class Receiver:
    """A ledger and the receiver recording into it (batch after batch).

    ``restarted``: a new receiver for every batch (nothing in memory: what it
    knows, it reads from the ledger).
    """

    def __init__(self, path: Path, *, restarted: bool = False) -> None:
        self.store: EventStore = open_store(str(path), synchronous="OFF")
        self.recorder = Recorder(self.store)
        self.restarted = restarted
        self.before = 0

    def take(self, case: Case) -> tuple[str, int, str | None]:
        """Decode and record a case; its outcome, events and any problem.

        Raises:
            Exception: Whatever decoding or recording raised that is not a
                refusal (the finding).
        """
        try:
            if case.logs:
                decode = decode_logs_protobuf if case.protobuf else decode_logs_json
                records = decode(case.body)
            else:
                spans = (decode_protobuf if case.protobuf else decode_json)(case.body)
        except CollectError:
            return "undecodable", 0, None
        before = self.before = self.store.max_position()
        if self.restarted:
            self.recorder = Recorder(self.store)
        try:
            report = (
                self.recorder.record_logs(records)
                if case.logs
                else self.recorder.record(spans)
            )
        except LedgerError as e:
            grown = self.store.max_position() - before
            problem = f"a refused batch wrote {grown} events ({e})" if grown else None
            return "refused", 0, problem
        grown = self.store.max_position() - before
        if grown != report.events:
            said = f"the batch reported {report.events} events, the ledger grew by"
            return "recorded", grown, f"{said} {grown}"
        return "recorded", grown, None

    def written(self) -> list[tuple[str, int, bytes]]:
        """What the last case wrote: each event's stream, version and payload."""
        return [
            (str(r.stream_id), r.version, msgspec.json.encode(r.event))
            for r in self.store.iter_all(after=self.before)
        ]

    def finish(self) -> str | None:
        """Check the whole ledger, then close it; return a problem, if any."""
        return _closed_whole(self.store)


class Importer:
    """A ledger that every tenth JSON case goes into as a file (``turnledger
    import``): its growth must be what the import says it wrote."""

    EVERY = 10

    def __init__(self, path: Path) -> None:
        self.store: EventStore = open_store(str(path), synchronous="OFF")
        self.file = path.with_suffix(".json")

    def take(self, case: Case) -> tuple[str, str | None]:
        """Import a case's body as a file, when its turn; the outcome, any problem.

        Raises:
            Exception: Whatever the import raised that is not a refusal.
        """
        if case.protobuf or case.number % self.EVERY:
            return "", None
        self.file.write_bytes(case.body)
        before = self.store.max_position()
        try:
            done = import_otlp_file(
                self.store, str(self.file), agent=None, max_bytes=MAX_FILE
            )
        except (CollectError, InputFileError, LedgerError):
            grown = self.store.max_position() - before
            return (
                "refused",
                f"a refused import wrote {grown} events" if grown else None,
            )
        grown = self.store.max_position() - before
        if grown != done.written:
            said = f"the import wrote {done.written} events, the ledger grew by"
            return "imported", f"{said} {grown}"
        return "imported", None

    def finish(self) -> str | None:
        """Check the whole ledger, then close it; return a problem, if any."""
        return _closed_whole(self.store)


def _closed_whole(store: EventStore) -> str | None:
    """Verify a ledger and close it; what ``verify`` found wrong, if anything."""
    report = verify(store)
    store.close()
    if not report.ok:
        return f"verify found {len(report.problems)} problems: {report.problems[0]}"
    return None


def run(args: argparse.Namespace, seeds: Sequence[Seed], tally: Tally) -> None:
    """Every case, a new ledger and receiver every ``args.run`` cases."""
    rng = random.Random(args.seed)
    previous: Case | None = None
    with tempfile.TemporaryDirectory(prefix="fuzz_collect_") as tmp:
        receivers: tuple[Receiver, Receiver, Importer] | None = None
        for number in range(args.cases):
            if number % args.run == 0:
                if receivers is not None:
                    _finish(receivers, previous, tally)
                receivers = (
                    Receiver(Path(tmp) / f"run{number}.db"),
                    Receiver(Path(tmp) / f"run{number}-restarted.db", restarted=True),
                    Importer(Path(tmp) / f"run{number}-imported.db"),
                )
            if previous is not None and rng.random() < 0.05:  # a retry
                case = Case(number, previous.seed, previous.body, previous.protobuf,
                            previous.logs)  # fmt: skip
            else:
                case = make_case(rng, number, seeds)
            if receivers is not None:
                _take(receivers, case, tally)
            previous = case
        if receivers is not None:
            _finish(receivers, previous, tally)


def _take(
    receivers: tuple[Receiver, Receiver, Importer], case: Case, tally: Tally
) -> None:
    """Take a case by the receiver and by the restarted one (compared), and
    maybe import it as a file."""
    live, restarted, importer = receivers
    try:
        outcome, events, problem = live.take(case)
        again, _, other = restarted.take(case)
        imported, trouble = importer.take(case)
    except Exception as e:  # noqa: BLE001 - any other exception is the finding
        tally.crash(case, f"{type(e).__name__}: {e}"[:500], traceback.format_exc(-8))
        return
    problem = problem or other or trouble
    if problem is None and (again != outcome or live.written() != restarted.written()):
        problem = (
            f"a restarted receiver recorded otherwise ({again}, not {outcome}): "
            f"{_difference(live.written(), restarted.written())}"
        )
    if problem is not None:
        tally.crash(case, problem, "")
        return
    tally.outcomes[case.seed, outcome] += 1
    tally.events += events
    if imported:
        tally.imports[imported] += 1


def _difference(
    live: list[tuple[str, int, bytes]], restarted: list[tuple[str, int, bytes]]
) -> str:
    """The first event the two receivers wrote otherwise."""
    for i, (a, b) in enumerate(zip(live, restarted, strict=False)):
        if a != b:
            return f"event {i}: {a[2][:300]!r} against {b[2][:300]!r}"
    return f"{len(live)} events against {len(restarted)}"


def _finish(
    receivers: tuple[Receiver, Receiver, Importer], last: Case | None, tally: Tally
) -> None:
    for receiver in receivers:
        problem = receiver.finish()
        if problem is not None and last is not None:
            tally.crash(last, f"after the run: {problem}", "")


# -- reporting -------------------------------------------------------------------


def print_summary(tally: Tally, seeds: Sequence[Seed], seconds: float, n: int) -> None:
    """Outcomes per seed request."""
    print(f"{n:,} cases in {seconds:.1f} s ({n / seconds:,.0f} cases/s)")
    print(f"{'seed request':<32}{''.join(f'{k:>13}' for k in OUTCOMES)}")
    for seed in seeds:
        counts = "".join(f"{tally.outcomes[seed.name, k]:>13,}" for k in OUTCOMES)
        print(f"{seed.name:<32}{counts}")
    print(f"{tally.events:,} events written")
    imports = ", ".join(f"{k} {v:,}" for k, v in sorted(tally.imports.items()))
    print(f"imported as files: {imports or 'none'}")


def report_crash(tally: Tally, out: Path, seed: int) -> None:
    """Save the first crash's body and print what it raised."""
    if tally.first is None:
        return
    case, problem, trace = tally.first
    out.mkdir(parents=True, exist_ok=True)
    suffix = ".pb" if case.protobuf else ".json"
    file = out / f"fuzz-collect-{seed}-{case.number}{suffix}"
    file.write_bytes(case.body)
    signal = "logs" if case.logs else "traces"
    print(f"\nFIRST CRASH: case {case.number} (from {case.seed}, /v1/{signal})")
    print(f"  {problem}")
    print(f"  body saved to {file} ({len(case.body)} bytes)")
    print("  " + trace.replace("\n", "\n  ").rstrip())


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse the command line."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=100_000, help="requests (100,000)")
    p.add_argument("--seed", type=int, default=20261206)
    p.add_argument(
        "--run", type=int, default=2_000, help="cases per ledger and receiver (2,000)"
    )
    p.add_argument("--out", type=Path, default=Path(), help="where a crash is saved")
    p.add_argument("--quick", action="store_true", help="about 300 cases (smoke test)")
    p.add_argument("--json", metavar="PATH", help="also write the counts as JSON")
    args = p.parse_args(argv)
    if args.quick:
        args.cases, args.run = 300, 100
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Fuzz; print the outcomes; exit 1 on any crash."""
    args = parse_args(argv)
    seeds = load_seeds()
    print(
        f"fuzz_collect: {args.cases:,} cases, seed {args.seed}, a new receiver "
        f"every {args.run:,}; {len(seeds)} seed requests"
    )
    tally = Tally()
    start = time.perf_counter()
    run(args, seeds, tally)
    seconds = time.perf_counter() - start
    print_summary(tally, seeds, seconds, args.cases)
    if args.json:
        counts = {f"{s}:{k}": v for (s, k), v in sorted(tally.outcomes.items())}
        figures = {"cases": args.cases, "seed": args.seed, "seconds": seconds}
        figures |= {"outcomes": counts, "events": tally.events}
        figures["imports"] = dict(tally.imports)
        figures["crashes"] = tally.crashes
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    if tally.first is None:
        print("OK: only recorded batches and typed refusals; every batch whole")
        return 0
    print(f"CRASHES: {tally.crashes}")
    report_crash(tally, args.out, args.seed)
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
