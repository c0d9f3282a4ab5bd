"""An independent counter of the token usage recorded model responses report.

It never imports turnledger: it decodes each ``POST`` response of a VCR
cassette with the body decoding of :mod:`tests.cassette_counter` and walks
the decoded JSON (or every event of a stream) generically, keeping per
response the largest value of each documented count field (streamed counts
are cumulative): input ``prompt_tokens`` / ``input_tokens`` / ``inputTokens``
/ ``promptTokenCount`` / ``prompt_eval_count`` plus the cache fields counted
apart from it (Anthropic's ``cache_read_input_tokens`` and
``cache_creation_input_tokens``, Bedrock's ``cacheReadInputTokens`` and
``cacheWriteInputTokens``); output ``completion_tokens`` / ``output_tokens``
/ ``outputTokens`` / ``candidatesTokenCount`` + ``thoughtsTokenCount`` /
``eval_count``. Cohere's ``billed_units`` are ignored when ``tokens`` is
there. A non-2xx response, or one with no count field, reports nothing.

:func:`har_usage` counts a HAR file's entries the same way.

Usage: ``python tests/usage_counter.py FILE...`` prints per cassette response
``index<TAB>input<TAB>output``.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import yaml

from tests.cassette_counter import _body

_INPUT = (
    "prompt_tokens",
    "input_tokens",
    "inputTokens",
    "promptTokenCount",
    "prompt_eval_count",
)
_CACHE = (
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
    "cacheReadInputTokens",
    "cacheWriteInputTokens",
)
_OUTPUT = ("completion_tokens", "output_tokens", "outputTokens", "eval_count")
_GEMINI_OUTPUT = ("candidatesTokenCount", "thoughtsTokenCount")
_ALL = _INPUT + _CACHE + _OUTPUT + _GEMINI_OUTPUT


def _walk(value: object, last: dict[str, int]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "iterations" or (key == "billed_units" and "tokens" in value):
                continue
            if key in _ALL and isinstance(item, int) and not isinstance(item, bool):
                last[key] = item
            else:
                _walk(item, last)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _walk(item, last)


def response_usage(path: Path) -> list[tuple[int, int, int]]:
    """``(interaction index, input, output)`` of each response reporting usage."""
    data = yaml.safe_load(path.read_bytes())
    found = []
    for index, interaction in enumerate(data["interactions"]):
        request, response = interaction["request"], interaction["response"]
        code = (response.get("status") or {}).get("code", 200)
        if request.get("method", "").upper() != "POST" or not 200 <= code < 300:
            continue
        best: dict[str, int] = {}
        _walk(_body(response), best)
        if not best:
            continue
        found.append((index, *_totals(best)))
    return found


def _totals(best: dict[str, int]) -> tuple[int, int]:
    inputs = max((best.get(key, 0) for key in _INPUT), default=0)
    inputs += sum(best.get(key, 0) for key in _CACHE)
    outputs = max((best.get(key, 0) for key in _OUTPUT), default=0)
    outputs += sum(best.get(key, 0) for key in _GEMINI_OUTPUT)
    return inputs, outputs


def har_usage(path: Path) -> list[tuple[int, int, int]]:
    """The same for a HAR file's ``POST`` entries (JSON, SSE or JSON-line text)."""
    found = []
    entries = json.loads(path.read_text())["log"]["entries"]
    for index, entry in enumerate(entries):
        response = entry["response"]
        if entry["request"]["method"].upper() != "POST" or not (
            200 <= response["status"] < 300
        ):
            continue
        content = response.get("content") or {}
        text = content.get("text") or ""
        if content.get("encoding") == "base64":
            text = base64.b64decode(text).decode()
        try:
            values = [json.loads(text)] if text.strip() else []
        except json.JSONDecodeError:  # a stream: SSE data lines or JSON lines
            lines = [line.removeprefix("data:").strip() for line in text.splitlines()]
            values = [json.loads(x) for x in lines if x and x != "[DONE]"]
        best: dict[str, int] = {}
        _walk(values, best)
        if best:
            found.append((index, *_totals(best)))
    return found


if __name__ == "__main__":
    for name in sys.argv[1:]:
        for row in response_usage(Path(name)):
            print(name, *row, sep="\t")
