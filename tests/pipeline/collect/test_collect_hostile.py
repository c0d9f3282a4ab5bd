"""Hostile requests to the receiver: one typed refusal each, nothing written."""

from __future__ import annotations

import gzip
import json

import httpx
import pytest

from tests.pipeline.collect.conftest import Ledger
from tests.pipeline.collect.receiver import running
from tests.pipeline.collect.spans import chat_attributes, json_request, json_span
from turnledger.pipeline.cli import main

TRACE = "5b8efff798038103d269b633813fc60c"
PROTOBUF = {"content-type": "application/x-protobuf"}
JSON = {"content-type": "application/json"}


def _good() -> bytes:
    span = json_span(TRACE, "00f067aa0ba902b7", chat_attributes(), start=1)
    return json.dumps(json_request([span])).encode()


def _deep(levels: int) -> bytes:
    value: dict[str, object] = {"stringValue": "x"}
    for _ in range(levels):
        value = {"arrayValue": {"values": [value]}}
    span = json_span(TRACE, "00f067aa0ba902b7", {}, start=1)
    span["attributes"] = [{"key": "deep", "value": value}]
    return json.dumps(json_request([span])).encode()


def _with(value: dict[str, object] | None = None, **fields: object) -> bytes:
    """A chat span whose input token count is ``value``, its fields overridden."""
    attrs = chat_attributes()
    span = json_span(TRACE, "00f067aa0ba902b7", attrs, start=1)
    if value is not None:
        span["attributes"] = [
            *span["attributes"],  # type: ignore[list-item]
            {"key": "gen_ai.usage.input_tokens", "value": value},
        ]
    span.update(fields)
    return json.dumps(json_request([span])).encode()


def _raw(body: bytes, old: bytes, new: bytes) -> bytes:
    assert old in body
    return body.replace(old, new, 1)


_TIMES = _with(startTimeUnixNano="12345")


@pytest.mark.parametrize(
    ("body", "headers", "status", "names"),
    [
        (_with({"intValue": "\u00b2"}), JSON, 400, "to be a 64-bit integer"),
        (_with({"intValue": "\u0663"}), JSON, 400, "to be a 64-bit integer"),
        (_with(startTimeUnixNano="9" * 5_000), JSON, 400, "64-bit integer"),
        (_raw(_TIMES, b'"12345"', b"9" * 5_000), JSON, 400, "out of range"),
        (_with(startTimeUnixNano=str(2**64)), JSON, 400, "64-bit integer"),
        (_with({"doubleValue": "1e400"}), JSON, 400, "to be a double"),
        (_with({"doubleValue": "nan"}), JSON, 400, "to be a double"),
        (_with({"doubleValue": True}), JSON, 400, "to be a double"),
        (_with(status={"code": "STATUS_CODE_FAILED"}), JSON, 400, "status.code"),
        (b"\xff\x00garbage" * 10, PROTOBUF, 400, "OTLP/protobuf"),
        (b'{"resourceSpans": [', JSON, 400, "OTLP/JSON"),
        (b'{"resourceSpans": {}}', JSON, 400, "resourceSpans to be an array"),
        (_deep(40), JSON, 400, "nested at most 32 deep"),
        (b"[" * 30_000 + b"]" * 30_000, JSON, 400, "nested too deeply"),
        (
            _good().replace(b"5b8efff798038103d269b633813fc60c", b"nothex"),
            JSON,
            400,
            "traceId of 32 hex digits",
        ),
        (_good(), {"content-type": "text/plain"}, 415, "Content-Type"),
        (_good(), {**JSON, "content-encoding": "br"}, 415, "Content-Encoding"),
        (b"\x1f\x8bnot gzip", {**JSON, "content-encoding": "gzip"}, 400, "gzip"),
        (b"x" * 70_000, JSON, 413, "at most 65536 bytes"),
        (
            gzip.compress(b" " * 1_000_000),
            {**JSON, "content-encoding": "gzip"},
            413,
            "at most 65536 bytes",
        ),
    ],
)
def test_refused_with_one_line_and_nothing_written(
    ledger: Ledger, body: bytes, headers: dict[str, str], status: int, names: str
) -> None:
    with running(ledger.store, max_body=65_536) as (url, app):
        answer = httpx.post(f"{url}/v1/traces", content=body, headers=headers)
        assert app.refused == 1
    assert answer.status_code == status
    if headers["content-type"] == "application/json":
        message = answer.json()["message"]
        assert names in message
        assert "\n" not in message
        assert len(message) < 600
    assert ledger.store.max_position() == 0


def test_other_paths_and_methods_are_refused(ledger: Ledger) -> None:
    with running(ledger.store) as (url, _app):
        assert (
            httpx.post(f"{url}/v1/metrics", content=_good(), headers=JSON).status_code
            == 404
        )
        assert httpx.get(f"{url}/v1/traces").status_code == 405
        gzipped = httpx.post(
            f"{url}/v1/traces",
            content=gzip.compress(_good()),
            headers={**JSON, "content-encoding": "gzip"},
        )
        assert gzipped.status_code == 200
    assert ledger.store.max_position() == 3


def test_without_token_a_host_that_is_not_loopback_is_refused(ledger: Ledger) -> None:
    with running(ledger.store) as (url, _app):
        rebound = httpx.post(
            f"{url}/v1/traces",
            content=_good(),
            headers={**JSON, "host": "attacker.example:4318"},
        )
        assert rebound.status_code == 421
        assert "loopback Host" in rebound.json()["message"]
        assert ledger.store.max_position() == 0
        local = {**JSON, "host": "localhost:4318"}
        assert (
            httpx.post(f"{url}/v1/traces", content=_good(), headers=local).status_code
            == 200
        )


def test_non_loopback_without_token_is_one_line_exit_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["collect", "--host", "0.0.0.0", "--port", "0"]) == 2  # noqa: S104 - refused
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "Expected --token" in err
    assert main(["collect", "--token", "short"]) == 2
    assert "Expected a token of 8 to 512" in capsys.readouterr().err
