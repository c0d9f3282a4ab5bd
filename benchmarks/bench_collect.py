"""``turnledger collect``: spans/s into the receiver, and the time to acknowledge.

The real OpenTelemetry OTLP/HTTP exporter (protobuf) sends batches of an agent's
GenAI spans (see :class:`Spans`: tool round trips, each chat span carrying the
conversation so far, content captured) to two receivers served the same way by
one child process (uvicorn, the same bounded h11 protocol as ``serve``; the
exporter's spans stay in this one, as they would in an application), in the
same run, round-robin:

- ``collect``: the receiver, over a fresh SQLite ledger (``synchronous=FULL``):
  decode, map, one atomic append, answer 200 after the commit;
- ``discard``: the same HTTP stack answering 200 without decoding or keeping
  anything (the exporter's and the HTTP stack's own floor).

Goals:

1. spans/s into ``collect`` at least 0.5x spans/s into ``discard``;
2. acknowledgement p95 at most 2x the p95 of one durable commit of the same
   batch's events (``append_atomic`` of those events into another fresh ledger,
   timed alone). The acknowledgement is the receiver's: from the request
   reaching the app (headers read) to its 200 sent, so reading the body,
   decoding, mapping and the commit. Printed beside it, not judged: the
   medians of both; the client's side, the p95 of the exporter's HTTP round
   trip (sending the encoded batch until the answer is read) into each
   receiver, and of its whole ``export()`` call (its own encoding too).

Printed after them, not judged: the ceiling of any receiver that decodes a
batch and commits its events durably, were the mapping from spans to events
free (the discarding receiver's ``export()`` median plus the medians of one
decoding of a batch's body and one durable commit of its events, both timed
again after the run, as a share of the discarding receiver's spans/s; an
estimate from the same run's medians); and the mapping's budget at the
throughput goal, beside what the mapping takes now (:func:`_budget_line`).

Each receiver is warmed up with a tenth of a run first; the warm-up's batches
are neither timed nor among the acknowledgement and commit samples.

Then the MCP server's tool call overhead (:mod:`_mcp_overhead`: ``memory_recall``
and ``memory_store`` through the SDK's client vs the memory service called
directly, same run, round-robin) prints its table and two ratios (no goal).

The script reports; it exits 0 even when a goal is missed (the line then says
MISS).

Run::

    .venv/bin/python benchmarks/bench_collect.py          # full run
    .venv/bin/python benchmarks/bench_collect.py --quick  # smoke: a few seconds
"""

from __future__ import annotations

import argparse
import json
import platform
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import requests
import uvicorn
from _harness import (
    Case,
    Ratio,
    Series,
    Stopwatch,
    percentile,
    print_ratios,
    print_table,
    run_rounds,
    write_json,
)
from _mcp_overhead import measure as measure_mcp
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

from turnledger.ledger.envelope import AppendResult
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import Append, EventStore, open_store
from turnledger.pipeline.collect import Recorder, decode_protobuf
from turnledger.pipeline.collect.server import (
    CollectApp,
    DiscardApp,
    Message,
    Receive,
    Scope,
    Send,
)
from turnledger.pipeline.web.server import server_config

THROUGHPUT_GOAL = 0.5
ACK_GOAL = 2.0
SERVICE = "bench-agent"


TURNS = 10
"""Turns per conversation (a trace): then the agent starts a new one."""

SYSTEM = json.dumps([{"type": "text", "content": "You are a helpful assistant."}])


def _text(role: str, content: str) -> dict[str, object]:
    return {"role": role, "parts": [{"type": "text", "content": content}]}


def _chat(history: list[dict[str, object]], output: dict[str, object]) -> dict:
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.usage.input_tokens": 120 + 30 * len(history),
        "gen_ai.usage.output_tokens": 40,
        "gen_ai.system_instructions": SYSTEM,
        "gen_ai.input.messages": json.dumps(history),
        "gen_ai.output.messages": json.dumps([output]),
    }


class Spans:
    """Fresh batches of an agent's finished spans (ids never repeat).

    The agent answers each user message with one tool round trip: a chat span
    asking for a tool, the tool's ``execute_tool`` span, a chat span answering;
    each chat span carries the whole conversation so far as its input (as the
    instrumentations send it), and after :data:`TURNS` turns the agent starts a
    new conversation (a new trace under an ``invoke_agent`` span). A batch is
    the next ``batch`` spans, cut wherever they fall.
    """

    def __init__(self, batch: int) -> None:
        self.batch = batch
        self.memory = InMemorySpanExporter()
        self.provider = TracerProvider(resource=Resource({"service.name": SERVICE}))
        self.provider.add_span_processor(SimpleSpanProcessor(self.memory))
        self.tracer = self.provider.get_tracer("bench")
        self.pending: list[ReadableSpan] = []

    def _conversation(self) -> None:
        tracer = self.tracer
        history: list[dict[str, object]] = []
        agent = {"gen_ai.operation.name": "invoke_agent"}
        with tracer.start_as_current_span("invoke_agent", attributes=agent):
            for turn in range(TURNS):
                history.append(_text("user", f"Question {turn}: " + "words " * 20))
                call_id = f"call_{turn}"
                call = {
                    "role": "assistant",
                    "parts": [
                        {
                            "type": "tool_call",
                            "id": call_id,
                            "name": "search",
                            "arguments": {"query": f"question {turn}"},
                        }
                    ],
                }
                with tracer.start_as_current_span(
                    "chat", attributes=_chat(history, call)
                ):
                    pass
                history.append(call)
                result = "result " * 30
                tool = {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "search",
                    "gen_ai.tool.call.id": call_id,
                    "gen_ai.tool.call.result": result,
                }
                with tracer.start_as_current_span("execute_tool", attributes=tool):
                    pass
                history.append(
                    {
                        "role": "tool",
                        "parts": [
                            {
                                "type": "tool_call_response",
                                "id": call_id,
                                "response": result,
                            }
                        ],
                    }
                )
                answer = _text("assistant", f"Answer {turn}: " + "words " * 40)
                with tracer.start_as_current_span(
                    "chat", attributes=_chat(history, answer)
                ):
                    pass
                history.append(answer)

    def batches(self, count: int) -> list[list[ReadableSpan]]:
        """The next ``count`` batches of ``batch`` spans each."""
        found = []
        for _ in range(count):
            while len(self.pending) < self.batch:
                self.memory.clear()
                self._conversation()
                self.pending += self.memory.get_finished_spans()
            found.append(self.pending[: self.batch])
            self.pending = self.pending[self.batch :]
        return found


class Timed:
    """An ASGI wrapper: the time from each request reaching the app to its answer.

    It keeps each request's body too (to time its decoding again after the run).
    """

    def __init__(self, app: CollectApp, samples: list[float]) -> None:
        self.app = app
        self.samples = samples
        self.bodies: list[bytes] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the app; note when its response body is sent."""
        start = time.perf_counter()
        chunks: list[bytes] = []

        async def kept() -> Message:
            message = await receive()
            chunks.append(message.get("body", b""))
            return message

        async def timed(message: Message) -> None:
            await send(message)
            if message["type"] == "http.response.body":
                self.samples.append(time.perf_counter() - start)

        await self.app(scope, kept, timed)
        self.bodies.append(b"".join(chunks))


@contextmanager
def serving(app: object) -> Iterator[str]:
    """Serve an ASGI app on a free loopback port in a thread; yield its endpoint."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    server = uvicorn.Server(server_config(app))  # type: ignore[arg-type]
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]})
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1/traces"
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


class TimedExporter(OTLPSpanExporter):
    """The OTLP/HTTP exporter, noting each HTTP round trip's time (client side).

    A round trip is the exporter's ``_export``: the encoded batch sent, the
    answer read; the exporter's encoding of the spans comes before it.
    """

    def __init__(self, endpoint: str, trips: list[float]) -> None:
        super().__init__(endpoint=endpoint, timeout=30)
        self.trips = trips

    def _export(
        self, serialized_data: bytes, timeout_sec: float | None = None
    ) -> requests.Response:
        with Stopwatch() as watch:
            response = super()._export(serialized_data, timeout_sec)
        self.trips.append(watch.seconds)
        return response


def _export_case(
    name: str,
    endpoint: str,
    spans: Spans,
    n_spans: int,
    samples: tuple[list[float], list[float]],
) -> Case:
    """The case of one receiver; ``samples``: its export() times, its round trips."""
    acks, trips = samples
    exporter = TimedExporter(endpoint, trips)

    def run(n: int) -> float:
        batches = spans.batches(max(1, n // spans.batch))
        total = 0.0
        for batch in batches:
            with Stopwatch() as watch:
                result = exporter.export(batch)
            if result is not SpanExportResult.SUCCESS:
                sys.exit(f"{name}: the exporter's batch was not acknowledged")
            total += watch.seconds
            acks.append(watch.seconds)
        return total

    return Case(name, n_spans, run, unit="span", note=f"batches of {spans.batch}")


class Capture:
    """Keeps the appends of each batch the receiver commits (to time them again)."""

    def __init__(self, store: EventStore) -> None:
        self.batches: list[list[Append]] = []
        self._append_atomic = store.append_atomic
        store.append_atomic = self.append_atomic  # type: ignore[method-assign]

    def append_atomic(self, appends: Sequence[Append]) -> list[AppendResult]:
        """Keep the batch's appends, then commit them as the store does."""
        self.batches.append(list(appends))
        return self._append_atomic(appends)


def _commit_samples(batches: list[list[Append]], path: Path) -> list[float]:
    """One durable commit of each batch's events, into another fresh ledger."""
    timings = []
    with open_store(str(path)) as target:
        for appends in batches:
            fresh = [
                Append(session_stream_id(SERVICE, uuid.uuid4().hex), a.events, 0)
                for a in appends
            ]
            with Stopwatch() as watch:
                target.append_atomic(fresh)
            timings.append(watch.seconds)
    return timings


def _decode_samples(bodies: list[bytes]) -> list[float]:
    """One decoding of each batch's request body (as the receiver decodes it)."""
    timings = []
    for body in bodies:
        with Stopwatch() as watch:
            decode_protobuf(body)
        timings.append(watch.seconds)
    return timings


def serve_child(folder: Path) -> int:
    """The receivers' process: both apps until stdin closes, then the samples.

    Prints the two endpoints as one JSON line once listening; when the parent
    closes stdin, stops, times one durable commit of each batch's appends and
    one decoding of each batch's body, and prints ``{"acks": [...], "commits":
    [...], "decodes": [...]}`` as another.
    """
    acks: list[float] = []
    store = open_store(str(folder / "collect.db"))
    capture = Capture(store)
    app = Timed(CollectApp(Recorder(store)), acks)
    with serving(app) as ours, serving(DiscardApp()) as floor:
        print(json.dumps({"collect": ours, "discard": floor}), flush=True)
        sys.stdin.read()
    store.close()
    commits = _commit_samples(capture.batches, folder / "commits.db")
    decodes = _decode_samples(app.bodies)
    samples = {"acks": acks, "commits": commits, "decodes": decodes}
    print(json.dumps(samples), flush=True)
    return 0


def _ceiling_line(
    floor: list[float], decodes: list[float], commits: list[float]
) -> str:
    """What any receiver that decodes and commits durably could reach at most.

    The discarding receiver's ``export()`` median (the exporter's encoding, the
    HTTP stack, the body read) plus the medians of one decoding of a batch's
    body and one durable commit of its events: the time a batch would take
    were the mapping from spans to events free, as a share of the discarding
    receiver's spans/s. An estimate from medians of the same run, not a run.
    """
    base, decode, commit = (percentile(v, 50) for v in (floor, decodes, commits))
    share = base / (base + decode + commit)
    return (
        f"info  ceiling with the mapping left out: the discarding receiver's "
        f"export() p50 {base * 1e3:.1f} ms + one decoding of the body p50 "
        f"{decode * 1e3:.1f} ms + one durable commit p50 {commit * 1e3:.1f} ms -> "
        f"at most {share:.2f}x its spans/s"
    )


def _budget_line(
    floor: list[float], decodes: list[float], commits: list[float], acks: list[float]
) -> str:
    """How much faster the mapping would have to be for the throughput goal.

    At the goal, a batch may take the discarding receiver's ``export()``
    median divided by :data:`THROUGHPUT_GOAL`. Take out that floor, one
    decoding of the body and one durable commit (medians): what is left is
    the mapping's budget per batch. Take the decoding and the commit out of
    the acknowledgement's median: what is left is what the mapping takes now
    (with the body's read and the answer, which are small). An estimate from
    medians of the same run, as the ceiling is.
    """
    base, decode, commit, ack = (
        percentile(v, 50) for v in (floor, decodes, commits, acks)
    )
    budget = base / THROUGHPUT_GOAL - base - decode - commit
    now = ack - decode - commit
    head = (
        f"info  the mapping's budget at {THROUGHPUT_GOAL:g}x: a batch may take "
        f"{base / THROUGHPUT_GOAL * 1e3:.1f} ms, the discarding receiver's export() "
        f"p50 / {THROUGHPUT_GOAL:g}; "
    )
    if budget <= 0:
        return head + "the floor, one decoding and one commit already take more"
    return head + (
        f"less the floor, one decoding and one commit, {budget * 1e3:.1f} ms are "
        f"left for mapping a batch; the acknowledgement p50 less its decoding and "
        f"commit is {now * 1e3:.1f} ms -> the mapping would have to be "
        f"{now / budget:.1f}x faster"
    )


def main(argv: list[str] | None = None) -> int:
    """Run both receivers round-robin, print the table and the goal lines."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke)")
    parser.add_argument("--json", default=None, help="write the figures here")
    parser.add_argument("--serve-child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_child is not None:
        return serve_child(Path(args.serve_child))
    batch, n_spans, repeat = (16, 64, 2) if args.quick else (256, 5_120, 5)
    print(
        f"bench_collect: Python {platform.python_version()}, "
        f"{n_spans} spans per run in batches of {batch}, {repeat} repetitions"
    )
    exports: dict[str, tuple[list[float], list[float]]] = {
        "collect": ([], []),
        "discard": ([], []),
    }
    with tempfile.TemporaryDirectory(prefix="bench_collect") as folder:
        child = subprocess.Popen(
            [sys.executable, __file__, "--serve-child", folder],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        if child.stdin is None or child.stdout is None:
            return 1
        endpoints = json.loads(child.stdout.readline())
        spans = Spans(batch)
        cases = [
            _export_case(name, endpoints[name], spans, n_spans, exports[name])
            for name in ("collect", "discard")
        ]
        for case in cases:  # warm-up: neither timed nor sampled
            case.run(max(1, n_spans // 10))
        warm = {name: len(exports[name][0]) for name in exports}
        series = run_rounds(cases, repeat=repeat, warmup=0)
        child.stdin.close()
        samples = json.loads(child.stdout.readline())
        child.stdout.close()
        child.wait(60)
    # The child saw the collect requests in order: the warm-up's come first.
    acks: list[float] = samples["acks"][warm["collect"] :]
    commits: list[float] = samples["commits"][warm["collect"] :]
    decodes: list[float] = samples["decodes"][warm["collect"] :]
    export, trip = (exports["collect"][i][warm["collect"] :] for i in (0, 1))
    floor_trip = exports["discard"][1][warm["discard"] :]
    print_table(series)
    by_name = {s.name: s for s in series}
    ratio = Ratio(
        "collect spans/s vs discarding receiver",
        by_name["collect"],
        by_name["discard"],
        goal=THROUGHPUT_GOAL,
    )
    print_ratios([ratio])
    ack_p95 = percentile(acks, 95)
    commit_p95 = percentile(commits, 95)
    factor = ack_p95 / commit_p95
    verdict = "PASS" if factor <= ACK_GOAL else "MISS"
    print(
        f"{verdict:<4}  acknowledgement p95: {ack_p95 * 1e3:.1f} ms per batch of "
        f"{batch} ({len(acks)} batches) vs one durable commit of a batch's events "
        f"p95 {commit_p95 * 1e3:.1f} ms ({len(commits)} commits) -> ratio "
        f"{factor:.2f}; goal <= {ACK_GOAL:g}x one durable commit"
    )
    print(
        f"info  medians: acknowledgement {percentile(acks, 50) * 1e3:.1f} ms, one "
        f"durable commit {percentile(commits, 50) * 1e3:.1f} ms -> ratio "
        f"{percentile(acks, 50) / percentile(commits, 50):.2f}"
    )
    trip_p95 = percentile(trip, 95)
    floor_p95 = percentile(floor_trip, 95)
    print(
        f"info  client side, the exporter's HTTP round trip of a batch: p95 "
        f"{trip_p95 * 1e3:.1f} ms into collect ({trip_p95 / commit_p95:.2f}x the "
        f"commit) vs {floor_p95 * 1e3:.1f} ms into discard"
    )
    export_p95 = percentile(export, 95)
    print(
        f"info  the exporter's export() of a batch, encoding and round trip: p95 "
        f"{export_p95 * 1e3:.1f} ms -> {export_p95 / commit_p95:.2f}x the commit"
    )
    floor_export = exports["discard"][0][warm["discard"] :]
    print(_ceiling_line(floor_export, decodes, commits))
    print(_budget_line(floor_export, decodes, commits, acks))
    print()
    print("MCP tool calls vs the memory service called directly")
    if args.quick:
        mcp_series, mcp_ratios = measure_mcp(calls=10, entries=50, repeat=2)
    else:
        mcp_series, mcp_ratios = measure_mcp()
    print_table(mcp_series)
    print_ratios(mcp_ratios)
    if args.json:
        samples_of = {
            "ack": acks,
            "trip": trip,
            "export": export,
            "commit": commits,
            "decode": decodes,
        }
        write_json(
            Path(args.json),
            meta={"batch": batch, "spans": n_spans, "repeat": repeat},
            series=[
                *series,
                *(Series(k, 1, "batch", seconds=v) for k, v in samples_of.items()),
                *mcp_series,
            ],
            ratios=[ratio, *mcp_ratios],
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
