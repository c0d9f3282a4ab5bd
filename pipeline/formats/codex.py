"""Codex CLI rollouts (JSON Lines).

Each line is ``{timestamp, type, payload}``. A ``session_meta`` line starts a
conversation (``payload.id`` is its id); the model conversation is the
sequence of ``response_item`` payloads, which are OpenAI Responses items (see
:mod:`pipeline.formats.openai_responses`). ``event_msg`` lines echo the same
activity for the UI and, like ``turn_context``, ``compacted`` and unknown
record types, are skipped and counted. An ``event_msg`` of type
``token_count`` reports the usage of the model call just made
(``info.last_token_usage``: ``input_tokens`` with ``cached_input_tokens``
among them, ``output_tokens`` with ``reasoning_output_tokens``); it goes to the
first assistant message of the items since the previous one, of the model the
latest ``turn_context`` names (a count that is not an integer >= 0 leaves it
out, counted as ``malformed usage``). The line is still counted as a skipped
``event_msg``.

The legacy layout has a first line ``{id, timestamp}`` and then bare Responses
items without the ``payload`` wrapper; a bare item in a file without that header
is not a rollout record (it is skipped and counted as unrecognised).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import msgspec

from turnledger.pipeline.formats._common import (
    UNTYPED,
    Items,
    JSONObject,
    Sink,
    conversation,
    get_object,
    get_str,
)
from turnledger.pipeline.formats._lines import read_json_lines
from turnledger.pipeline.formats.model import ModelUsage
from turnledger.pipeline.formats.openai_responses import responses_messages
from turnledger.pipeline.formats.usage import MALFORMED

if TYPE_CHECKING:
    from turnledger.pipeline.formats.model import Conversation, ParsedTranscript

EXPECTED = "Codex rollout records (JSON Lines)"

CODEX_RECORDS = frozenset(
    {"session_meta", "response_item", "event_msg", "turn_context", "compacted"}
)
"""Codex rollout record types."""


@dataclass
class _Rollout:
    id: str
    line: int
    legacy: bool = False
    items: list[object] = field(default_factory=list)
    origins: list[str] = field(default_factory=list)
    model: str = ""
    counted: int = 0
    usage_from: dict[int, tuple[int, ModelUsage]] = field(default_factory=dict)

    def token_count(self, usage: ModelUsage) -> None:
        """Give ``usage`` to the items since the previous count."""
        if self.counted < len(self.items):
            self.usage_from[self.counted] = (len(self.items), usage)
        self.counted = len(self.items)

    def add(self, line: int, item: JSONObject) -> None:
        self.items.append(item)
        self.origins.append(f"line {line}")


def parse_codex(data: bytes, *, name: str) -> ParsedTranscript:
    """Read a Codex rollout file.

    Args:
        data: The file's bytes.
        name: The file name, used as the conversation id when the file has no
            ``session_meta`` record.

    Returns:
        One conversation per ``session_meta`` record (one for a legacy file).

    Raises:
        TranscriptError: No line of the file is a JSON object.
    """
    sink = Sink()
    rollouts: list[_Rollout] = []
    for number, record in read_json_lines(data, sink, expected=EXPECTED):
        _read_record(number, record, rollouts, sink, name)
    return sink.transcript("codex", [_conversation(r, sink, name) for r in rollouts])


def _read_record(
    number: int, record: JSONObject, rollouts: list[_Rollout], sink: Sink, name: str
) -> None:
    kind = get_str(record, "type")
    payload = get_object(record, "payload")
    if kind == "session_meta":
        session_id = get_str(payload or {}, "id") or name
        rollouts.append(_Rollout(session_id, number))
    elif kind is None and not rollouts and "id" in record:
        # The legacy header: the first record, ``{id, timestamp}``.
        rollouts.append(_Rollout(get_str(record, "id") or name, number, legacy=True))
    elif kind == "response_item" and payload is not None:
        _current(rollouts, name, number).add(number, payload)
    elif (
        "payload" not in record
        and kind is not None
        and rollouts
        and rollouts[-1].legacy
    ):
        rollouts[-1].add(number, record)
    else:
        if rollouts and kind in {"turn_context", "event_msg"} and payload is not None:
            _context(rollouts[-1], kind, payload, sink)
        sink.begin("line", f"line {number}", record)
        if kind in CODEX_RECORDS:
            sink.skip(kind)
        else:
            sink.unknown(kind or UNTYPED)


def _context(rollout: _Rollout, kind: str, payload: JSONObject, sink: Sink) -> None:
    """Note a ``turn_context``'s model, read a ``token_count``'s usage."""
    if kind == "turn_context":
        rollout.model = get_str(payload, "model") or rollout.model
        return
    if get_str(payload, "type") != "token_count":
        return
    last = get_object(get_object(payload, "info") or {}, "last_token_usage")
    if last is None:
        return
    try:
        usage = ModelUsage(
            model=rollout.model,
            provider="openai",
            input_tokens=_count(last, "input_tokens"),
            output_tokens=_count(last, "output_tokens"),
            cached_input_tokens=_count(last, "cached_input_tokens"),
            reasoning_tokens=_count(last, "reasoning_output_tokens"),
        )
    except ValueError:
        sink.skip(MALFORMED)
        rollout.counted = len(rollout.items)  # that call's items get no usage
        return
    rollout.token_count(usage)


def _count(obj: JSONObject, key: str) -> int:
    value = obj.get(key, 0)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(key)
    return value


def _current(rollouts: list[_Rollout], name: str, number: int) -> _Rollout:
    if not rollouts:
        rollouts.append(_Rollout(name, number))
    return rollouts[-1]


def _conversation(rollout: _Rollout, sink: Sink, name: str) -> Conversation:
    items = Items(rollout.items, rollout.origins)
    indexed = responses_messages(items, sink)
    found = conversation(
        conversation_id=rollout.id,
        indexed=indexed,
        origins=items.origins,
        source=f"{name} session {rollout.id} (line {rollout.line})",
    )
    if not rollout.usage_from:
        return found
    usage: list[ModelUsage | None] = []
    spans = sorted(rollout.usage_from.items())  # disjoint [start, end) item ranges
    at, given = 0, False
    for index, message in indexed:
        while at < len(spans) and index >= spans[at][1][0]:
            at, given = at + 1, False
        inside = at < len(spans) and spans[at][0] <= index
        if message.role != "assistant" or not inside or given:
            usage.append(None)
            continue
        given = True
        usage.append(spans[at][1][1])
    return msgspec.structs.replace(found, usage=tuple(usage))
