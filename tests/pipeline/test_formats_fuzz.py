"""Fuzzing the readers: any input gives a ParsedTranscript or a TranscriptError.

Arbitrary bytes, arbitrary JSON values (as documents and as JSON Lines) and
mutated corpus lines and cassettes are fed to ``read_transcript`` with format
detection and with every explicit format. No other exception may escape.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from turnledger.pipeline.formats import (
    FORMAT_NAMES,
    ParsedTranscript,
    TranscriptError,
    count_pairing,
    read_transcript,
)

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus"
IN_CI = os.environ.get("CI", "").lower() == "true"
FORMATS = ("auto", *FORMAT_NAMES)

FUZZ = settings(
    max_examples=200,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10)
    | st.sampled_from(
        [
            "user",
            "assistant",
            "tool",
            "model",
            "function_call",
            "function_call_output",
            "tool_use",
            "tool_result",
            "session_meta",
            "response_item",
            "request",
            "response",
            "tool-call",
            "tool-return",
        ]
    )
)
KEYS = st.sampled_from(
    [
        "type",
        "role",
        "content",
        "messages",
        "input",
        "output",
        "contents",
        "parts",
        "tool_calls",
        "tool_call_id",
        "call_id",
        "id",
        "name",
        "arguments",
        "message",
        "payload",
        "uuid",
        "sessionId",
        "kind",
        "part_kind",
        "functionCall",
        "functionResponse",
        "tool_use_id",
        "interactions",
        "loglines",
        "data",
        "system",
    ]
) | st.text(max_size=6)


def _nest(inner: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    return (
        inner | st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=4)
    )


# Three fixed levels are much cheaper to draw than st.recursive, and deep enough
# for `{"messages": [{"role": ...}]}`; the corpus mutations bring deeper shapes.
json_values = _nest(_nest(_nest(json_scalars)))


def _check(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    for name in FORMATS:
        try:
            parsed = read_transcript(path, format=name)
        except TranscriptError:
            continue
        assert isinstance(parsed, ParsedTranscript)
        count_pairing(parsed)


@pytest.fixture(name="scratch", scope="module")
def _scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One file the fuzz examples overwrite."""
    return tmp_path_factory.mktemp("fuzz") / "transcript"


@FUZZ
@given(data=st.binary(max_size=400))
def test_arbitrary_bytes(scratch: Path, data: bytes):
    """Arbitrary bytes never raise anything but TranscriptError."""
    _check(scratch, data)


@FUZZ
@given(value=json_values)
def test_arbitrary_json_documents(scratch: Path, value: object):
    """Any JSON document never raises anything but TranscriptError."""
    _check(scratch, json.dumps(value).encode())


@FUZZ
@given(values=st.lists(json_values, min_size=1, max_size=4))
def test_arbitrary_json_lines(scratch: Path, values: list[object]):
    """Any JSON Lines content never raises anything but TranscriptError."""
    _check(scratch, b"\n".join(json.dumps(value).encode() for value in values))


def _corpus_lines() -> list[bytes]:
    if not CORPUS.exists():
        return [b'{"type": "user", "message": {"role": "user", "content": "hi"}}']
    lines: list[bytes] = []
    for path in sorted(CORPUS.rglob("*.jsonl"))[::4]:
        lines.extend(line for line in path.read_bytes().splitlines()[:6] if line)
    return lines


def _small_cassettes() -> list[object]:
    if not CORPUS.exists():
        return [{"interactions": []}]
    paths = sorted(
        (CORPUS / "pydantic-ai").glob("*.yaml"), key=lambda p: p.stat().st_size
    )
    return [yaml.safe_load(path.read_bytes()) for path in paths[:4]]


CORPUS_LINES = _corpus_lines()
CASSETTES = _small_cassettes()


def _mutate(value: object, path: list[int], replacement: object) -> object:
    """Replace the node ``path`` leads to (child indexes, modulo the size)."""
    if not path:
        return replacement
    if isinstance(value, dict) and value:
        keys = list(value)
        key = keys[path[0] % len(keys)]
        return value | {key: _mutate(value[key], path[1:], replacement)}
    if isinstance(value, list) and value:
        index = path[0] % len(value)
        return [
            *value[:index],
            _mutate(value[index], path[1:], replacement),
            *value[index + 1 :],
        ]
    return replacement


paths = st.lists(st.integers(min_value=0, max_value=50), max_size=6)


@FUZZ
@given(
    lines=st.lists(st.sampled_from(CORPUS_LINES), min_size=1, max_size=5),
    where=paths,
    replacement=json_values,
)
def test_structurally_mutated_corpus_lines(
    scratch: Path, lines: list[bytes], where: list[int], replacement: object
):
    """Corpus lines with one node replaced never raise anything else."""
    first = json.loads(lines[0])
    mutated = json.dumps(_mutate(first, where, replacement)).encode()
    _check(scratch, b"\n".join([mutated, *lines[1:]]))


@FUZZ
@given(
    lines=st.lists(st.sampled_from(CORPUS_LINES), min_size=1, max_size=5),
    cut=st.integers(min_value=0, max_value=2000),
    noise=st.binary(max_size=8),
)
def test_byte_mutated_corpus_lines(
    scratch: Path, lines: list[bytes], cut: int, noise: bytes
):
    """Corpus lines with bytes spliced in never raise anything else."""
    text = b"\n".join(lines)
    at = cut % (len(text) + 1)
    _check(scratch, text[:at] + noise + text[at + len(noise) :])


@FUZZ
@given(
    cassette=st.sampled_from(CASSETTES),
    where=paths,
    replacement=json_values,
)
def test_mutated_cassettes(
    scratch: Path, cassette: object, where: list[int], replacement: object
):
    """Cassettes with one node replaced never raise anything else."""
    mutated = _mutate(cassette, where, replacement)
    # JSON is YAML, and far quicker to write than YAML's pure-Python emitter.
    _check(scratch, json.dumps(mutated, default=str).encode())


def test_fuzz_inputs_come_from_the_corpus():
    """The mutation tests draw on real corpus lines (skips locally without it)."""
    if not CORPUS.exists():
        if IN_CI:
            pytest.fail(f"the corpus must be present under CI=true at {CORPUS}")
        pytest.skip(f"no corpus at {CORPUS}")
    assert len(CORPUS_LINES) > 20
    assert len(CASSETTES) == 4
