"""An independent counter of tool calls in recorded model HTTP exchanges.

It never imports turnledger: it walks the raw JSON bodies of a VCR cassette
generically and counts tool-call objects by the field names the providers
document, so the readers' counts can be checked against it (the rows of
``tests/fixtures/transcripts/cassettes/EXPECTED.tsv`` are its output).

Rules:
- A ``POST`` whose JSON body has a ``messages`` list is a model request. A
  request whose ``messages`` a later request to the same path repeats as a
  prefix is superseded; every other request is one conversation: its
  ``messages`` plus the message its response returns (``choices[0].message``,
  ``message``, ``output.message``, an Anthropic ``type: "message"`` body, or
  assembled from a stream: SSE ``data:`` lines, JSON lines, or AWS event
  stream frames).
- Calls: each element of a ``tool_calls`` list (Chat Completions, Cohere,
  Mistral, Ollama), each ``toolUse`` object (Bedrock Converse) unless its
  ``type`` is ``server_tool_use`` (a tool the provider ran), and each
  ``type: "tool_use"`` block (Anthropic Messages, as Bedrock's InvokeModel
  passes them). In a stream: each
  distinct ``index`` (or new ``id``) of ``tool_calls`` deltas, each Cohere
  ``tool-call-start`` event, each Bedrock ``contentBlockStart`` with a
  ``toolUse``.
- Results: each ``role: "tool"`` message, each ``toolResult`` object in a
  ``user`` message, and each ``type: "tool_result"`` block.
- Pairing: a result pairs with the unanswered call of its id
  (``tool_call_id`` / ``toolUseId``); results without an id answer the
  calls without one in order. Whatever is left is unpaired.

Usage: ``python tests/cassette_counter.py FILE...`` prints one TSV row per file.
"""

from __future__ import annotations

import gzip
import json
import struct
import sys
from pathlib import Path
from urllib.parse import urlsplit

import yaml


def _headers(message: dict) -> dict[str, str]:
    found = {}
    for key, value in (message.get("headers") or {}).items():
        first = value[0] if isinstance(value, list) and value else value
        if isinstance(first, bytes):
            first = first.decode("utf-8", "replace")
        found[str(key).lower()] = str(first)
    return found


def _body(message: dict) -> object:
    if message.get("parsed_body") is not None:
        return message["parsed_body"]
    raw = message.get("body")
    if isinstance(raw, dict) and "string" not in raw:
        return raw  # the body itself, stored as a YAML mapping
    if isinstance(raw, dict):
        raw = raw.get("string")
    if isinstance(raw, bytes) and raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    kind = _headers(message).get("content-type", "")
    if isinstance(raw, bytes) and "eventstream" in kind:
        return ("events", _aws_frames(raw))
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8")
    if not raw or not raw.strip():
        return None
    lines = [line[5:].strip() for line in raw.splitlines() if line.startswith("data:")]
    if lines or "event-stream" in kind:
        return ("events", [json.loads(x) for x in lines if x and x != "[DONE]"])
    if "ndjson" in kind:
        return ("events", [json.loads(x) for x in raw.splitlines() if x.strip()])
    return json.loads(raw)


def _aws_frames(data: bytes) -> list[dict]:
    events, at = [], 0
    while at < len(data):
        total, header_length = struct.unpack(">II", data[at : at + 8])
        headers, cursor = {}, at + 12
        while cursor < at + 12 + header_length:
            size = data[cursor]
            name = data[cursor + 1 : cursor + 1 + size].decode()
            cursor += 2 + size  # name, then a value type byte (7: string)
            (length,) = struct.unpack(">H", data[cursor : cursor + 2])
            headers[name] = data[cursor + 2 : cursor + 2 + length].decode()
            cursor += 2 + length
        payload = data[at + 12 + header_length : at + total - 4]
        events.append({headers[":event-type"]: json.loads(payload)})
        at += total
    return events


def _response_message(body: object) -> tuple[list[dict], int]:
    """The response's message(s), and the calls a stream carried."""
    if isinstance(body, tuple):
        return [], _stream_calls(body[1])
    if not isinstance(body, dict):
        return [], 0
    choices = body.get("choices") or []
    if choices and isinstance(choices[0].get("message"), dict):
        return [choices[0]["message"]], 0
    if isinstance(body.get("message"), dict):
        return [{"role": "assistant", **body["message"]}], 0
    output = body.get("output")
    if isinstance(output, dict) and isinstance(output.get("message"), dict):
        return [output["message"]], 0
    if body.get("type") == "message" and isinstance(body.get("content"), list):
        return [body], 0  # Anthropic Messages (Bedrock InvokeModel)
    return [], 0


def _stream_calls(events: list[dict]) -> int:
    seen: set[object] = set()
    count = 0
    for event in events:
        if event.get("type") == "tool-call-start":
            count += 1
        start = (event.get("contentBlockStart") or {}).get("start") or {}
        if "toolUse" in start:
            count += 1
        for choice in event.get("choices") or []:
            for call in (choice.get("delta") or {}).get("tool_calls") or []:
                # A new id is a new call; an id-less piece is new only at a new index.
                key = (
                    ("id", call["id"])
                    if call.get("id")
                    else ("index", call.get("index"))
                )
                if key not in seen:
                    seen.update({key, ("index", call.get("index"))})
                    count += 1
        message = event.get("message")
        if isinstance(message, dict):
            count += len(message.get("tool_calls") or [])
    return count


def _count(messages: list[dict], extra_calls: int) -> tuple[int, int, int, int]:
    calls: list[str] = []
    results: list[str] = []
    for message in messages:
        calls.extend(call.get("id") or "" for call in message.get("tool_calls") or [])
        for block in (
            message.get("content") if isinstance(message.get("content"), list) else []
        ):
            if not isinstance(block, dict):
                continue
            use = block.get("toolUse")
            if isinstance(use, dict) and use.get("type") != "server_tool_use":
                calls.append(use.get("toolUseId") or "")
            result = block.get("toolResult")
            if isinstance(result, dict) and message.get("role") == "user":
                results.append(result.get("toolUseId") or "")
            if block.get("type") == "tool_use":
                calls.append(block.get("id") or "")
            if block.get("type") == "tool_result":
                results.append(block.get("tool_use_id") or "")
        if message.get("role") == "tool":
            results.append(message.get("tool_call_id") or "")
    open_calls = list(calls)
    unpaired_results = 0
    for result in results:
        if result in open_calls:
            open_calls.remove(result)
        else:
            unpaired_results += 1
    total_calls = len(calls) + extra_calls
    return total_calls, len(results), len(open_calls) + extra_calls, unpaired_results


def count_file(path: Path) -> tuple[int, int, int, int, int]:
    """``(conversations, calls, results, unpaired calls, unpaired results)``."""
    document = yaml.safe_load(path.read_bytes())
    requests = []
    for interaction in document["interactions"]:
        request, response = interaction["request"], interaction["response"]
        if request["method"].upper() != "POST":
            continue
        body = _body(request)
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            continue
        code = (response.get("status") or {}).get("code", 200)
        reply = _body(response) if 200 <= code < 300 else None
        requests.append((urlsplit(request["uri"]).path, body["messages"], reply))
    totals = [0, 0, 0, 0, 0]
    for position, (where, messages, reply) in enumerate(requests):
        if any(
            other == where and later[: len(messages)] == messages
            for other, later, _ in requests[position + 1 :]
        ):
            continue
        output, stream_calls = _response_message(reply)
        counts = _count(messages + output, stream_calls)
        totals[0] += 1
        for index, value in enumerate(counts, start=1):
            totals[index] += value
    return (totals[0], totals[1], totals[2], totals[3], totals[4])


if __name__ == "__main__":
    for name in sys.argv[1:]:
        print("\t".join([name, *map(str, count_file(Path(name)))]))
