"""Reading JSON Lines: one JSON object per line, malformed lines reported."""

from __future__ import annotations

from typing import TYPE_CHECKING

from turnledger.pipeline.formats._common import (
    MALFORMED,
    JSONObject,
    as_object,
    decode_json,
    describe,
)
from turnledger.pipeline.formats.model import TranscriptError

if TYPE_CHECKING:
    from turnledger.pipeline.formats._common import Sink

_BOM = b"\xef\xbb\xbf"


def read_json_lines(
    data: bytes, sink: Sink, *, expected: str
) -> list[tuple[int, JSONObject]]:
    """Decode the object lines of a JSON Lines file.

    Blank lines are ignored. A line that is not valid JSON, or not a JSON
    object, is reported to ``sink`` with its 1-based line number and left out;
    the rest of the file is still read.

    Args:
        data: The file's bytes.
        sink: Receives a problem per malformed line.
        expected: What the format expects, for the error message.

    Returns:
        ``(line number, object)`` for every object line, in file order.

    Raises:
        TranscriptError: The file has lines but not one of them is a JSON object.
    """
    objects: list[tuple[int, JSONObject]] = []
    first_problem = ""
    for number, raw in enumerate(data.removeprefix(_BOM).split(b"\n"), 1):
        line = raw.strip()
        if not line:
            continue
        message = _read_line(line, number, objects)
        if message:
            sink.whole("line", f"line {number}", "<not a JSON object>", MALFORMED)
            sink.problem(number, message)
            first_problem = first_problem or f"line {number}: {message}"
    if not objects and first_problem:
        msg = f"Expected {expected}, found no readable line ({first_problem})"
        raise TranscriptError(msg)
    return objects


def _read_line(line: bytes, number: int, into: list[tuple[int, JSONObject]]) -> str:
    try:
        value = decode_json(line)
    except TranscriptError as error:
        return str(error)
    obj = as_object(value)
    if obj is None:
        return f"Expected a JSON object, found {describe(value)}"
    into.append((number, obj))
    return ""
