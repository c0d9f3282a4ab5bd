"""``turnledger collect``: spans/s into the receiver, and the time to acknowledge.

The real OpenTelemetry OTLP/HTTP exporter (protobuf) sends batches of GenAI chat
spans (each with its input and output messages and usage, one trace per batch)
to two receivers served the same way in this process (uvicorn, the same bounded
h11 protocol as ``serve``), in the same run, round-robin:

- ``collect``: the receiver, over a fresh SQLite ledger (``synchronous=FULL``):
  decode, map, one atomic append, answer 200 after the commit;
- ``discard``: the same HTTP stack answering 200 without decoding or keeping
  anything (the exporter's and the HTTP stack's own floor).

Goals:

1. spans/s into ``collect`` at least 0.5x spans/s into ``discard``;
2. acknowledgement p95 (the exporter's ``export()`` call of one batch, request
   to 200) at most 2x the p95 of one durable commit of the same batch's events
   (``append_atomic`` of those events into another fresh ledger, timed alone).

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
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import uvicorn
from _harness import (
    Case,
    Ratio,
    Scratch,
    Series,
    Stopwatch,
    percentile,
    print_ratios,
    print_table,
    run_rounds,
    write_json,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import Append, EventStore, open_store
from turnledger.pipeline.collect import Recorder
from turnledger.pipeline.collect.server import CollectApp, DiscardApp
from turnledger.pipeline.web.server import server_config

THROUGHPUT_GOAL = 0.5
ACK_GOAL = 2.0
SERVICE = "bench-agent"


def _attributes(i: int) -> dict[str, object]:
    user = {"role": "user", "parts": [{"type": "text", "content": f"Question {i}?"}]}
    answer = {
        "role": "assistant",
        "parts": [{"type": "text", "content": f"Answer {i}: " + "words " * 40}],
    }
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.usage.input_tokens": 120 + i,
        "gen_ai.usage.output_tokens": 40,
        "gen_ai.system_instructions": json.dumps(
            [{"type": "text", "content": "You are a helpful assistant."}]
        ),
        "gen_ai.input.messages": json.dumps([user]),
        "gen_ai.output.messages": json.dumps([answer]),
    }


class Spans:
    """Fresh batches of finished spans, one trace per batch (ids never repeat)."""

    def __init__(self, batch: int) -> None:
        self.batch = batch
        self.memory = InMemorySpanExporter()
        self.provider = TracerProvider(resource=Resource({"service.name": SERVICE}))
        self.provider.add_span_processor(SimpleSpanProcessor(self.memory))
        self.tracer = self.provider.get_tracer("bench")

    def batches(self, count: int) -> list[list[ReadableSpan]]:
        """``count`` batches of ``batch`` chat spans each."""
        found = []
        for _ in range(count):
            self.memory.clear()
            with self.tracer.start_as_current_span("agent run"):
                for i in range(self.batch):
                    attrs = _attributes(i)
                    with self.tracer.start_as_current_span("chat", attributes=attrs):
                        pass
            found.append(
                [s for s in self.memory.get_finished_spans() if s.name == "chat"]
            )
        return found


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


def _export_case(
    name: str,
    endpoint: str,
    spans: Spans,
    n_spans: int,
    acks: list[float] | None,
) -> Case:
    exporter = OTLPSpanExporter(endpoint=endpoint, timeout=30)

    def run(n: int) -> float:
        batches = spans.batches(max(1, n // spans.batch))
        total = 0.0
        for batch in batches:
            with Stopwatch() as watch:
                result = exporter.export(batch)
            if result is not SpanExportResult.SUCCESS:
                sys.exit(f"{name}: the exporter's batch was not acknowledged")
            total += watch.seconds
            if acks is not None:
                acks.append(watch.seconds)
        return total

    return Case(name, n_spans, run, unit="span", note=f"batches of {spans.batch}")


def _commit_samples(source: EventStore, scratch: Scratch, count: int) -> list[float]:
    """Durable commits of the events one batch wrote, into another fresh ledger."""
    streams = source.stream_ids()[:count]
    timings = []
    with open_store(str(scratch.fresh())) as target:
        for stream in streams:
            events = [r.event for r in source.read_stream(stream)]
            fresh = session_stream_id(SERVICE, uuid.uuid4().hex)
            with Stopwatch() as watch:
                target.append_atomic([Append(fresh, events, 0)])
            timings.append(watch.seconds)
    return timings


def main(argv: list[str] | None = None) -> int:
    """Run both receivers round-robin, print the table and the goal lines."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke)")
    parser.add_argument("--json", default=None, help="write the figures here")
    args = parser.parse_args(argv)
    batch, n_spans, repeat = (16, 64, 2) if args.quick else (256, 5_120, 5)
    print(
        f"bench_collect: Python {platform.python_version()}, "
        f"{n_spans} spans per run in batches of {batch}, {repeat} repetitions"
    )
    acks: list[float] = []
    with Scratch("bench_collect") as scratch:
        store = open_store(str(scratch.fresh()))
        app = CollectApp(Recorder(store))
        spans = Spans(batch)
        with serving(app) as ours, serving(DiscardApp()) as floor:
            cases = [
                _export_case("collect", ours, spans, n_spans, acks),
                _export_case("discard", floor, spans, n_spans, None),
            ]
            series = run_rounds(cases, repeat=repeat, warmup=1)
        commits = _commit_samples(store, scratch, len(acks))
        store.close()
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
    # The MCP section (benchmarks/_mcp_overhead.py, written with the MCP
    # server) prints its own table and goal lines here, after the OTLP ones;
    # it is wired in when that module lands.
    if args.json:
        ack = Series("ack", 1, "batch", seconds=acks)
        commit = Series("commit", 1, "batch", seconds=commits)
        write_json(
            Path(args.json),
            meta={"batch": batch, "spans": n_spans, "repeat": repeat},
            series=[*series, ack, commit],
            ratios=[ratio],
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
