"""Codex CLI rollouts (JSON Lines).

Each line is ``{timestamp, type, payload}``. A ``session_meta`` line starts a
conversation (``payload.id`` is its id); the model conversation is the
sequence of ``response_item`` payloads, which are OpenAI Responses items (see
:mod:`pipeline.formats.openai_responses`). ``event_msg`` lines echo the same
activity for the UI and, like ``turn_context``, ``compacted`` and unknown
record types, are skipped and counted.

The legacy layout has a first line ``{id, timestamp}`` and then bare Responses
items without the ``payload`` wrapper; a bare item in a file without that header
is not a rollout record (it is skipped and counted as unrecognised).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

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
from turnledger.pipeline.formats.openai_responses import responses_messages

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
        sink.begin("line", f"line {number}", record)
        if kind in CODEX_RECORDS:
            sink.skip(kind)
        else:
            sink.unknown(kind or UNTYPED)


def _current(rollouts: list[_Rollout], name: str, number: int) -> _Rollout:
    if not rollouts:
        rollouts.append(_Rollout(name, number))
    return rollouts[-1]


def _conversation(rollout: _Rollout, sink: Sink, name: str) -> Conversation:
    items = Items(rollout.items, rollout.origins)
    return conversation(
        conversation_id=rollout.id,
        indexed=responses_messages(items, sink),
        origins=items.origins,
        source=f"{name} session {rollout.id} (line {rollout.line})",
    )
