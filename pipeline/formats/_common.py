"""Helpers shared by the readers: JSON narrowing, text extraction, collection.

Readers see JSON (or YAML) values as ``object`` and narrow them here, so no
``Any`` leaks into their signatures. Nothing in this module recurses into
nested values, so hostile nesting cannot exhaust the stack.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, NamedTuple, TypeAlias, cast

import msgspec

from turnledger.pipeline.formats.model import (
    Conversation,
    FormatName,
    ParsedTranscript,
    Problem,
    TranscriptError,
)

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    from turnledger.policies.messages import Message

JSONObject: TypeAlias = dict[str, object]
"""A decoded JSON object (keys are strings in JSON; YAML may add others)."""

Indexed: TypeAlias = tuple[int, "Message"]
"""A message with the index of the first source item it was built from."""

PREAMBLE = -1
"""The item index of a message built from a top-level field (e.g. ``system``)."""

UNTYPED = "<untyped>"
"""The ``skipped`` key for items that carry no type at all."""

_encoder = msgspec.json.Encoder(enc_hook=str)
_UNENCODABLE = "<unencodable>"


def as_object(value: object) -> JSONObject | None:
    """Return ``value`` as a JSON object, or ``None`` if it is not one."""
    if isinstance(value, dict):
        return cast("JSONObject", value)
    return None


def as_list(value: object) -> list[object] | None:
    """Return ``value`` as a JSON array, or ``None`` if it is not one."""
    if isinstance(value, list):
        return cast("list[object]", value)
    return None


def get_str(obj: JSONObject, key: str) -> str | None:
    """Return ``obj[key]`` if it is a string, else ``None``."""
    value = obj.get(key)
    return value if isinstance(value, str) else None


def get_object(obj: JSONObject, key: str) -> JSONObject | None:
    """Return ``obj[key]`` if it is an object, else ``None``."""
    return as_object(obj.get(key))


def get_list(obj: JSONObject, key: str) -> list[object]:
    """Return ``obj[key]`` if it is an array, else an empty list."""
    return as_list(obj.get(key)) or []


def type_of(obj: JSONObject, key: str = "type") -> str:
    """Return the item type stored under ``key``, or :data:`UNTYPED`."""
    return get_str(obj, key) or UNTYPED


_KINDS: tuple[tuple[type, str], ...] = (
    (bool, "a boolean"),
    (int, "a number"),
    (float, "a number"),
    (str, "a string"),
    (list, "an array"),
    (dict, "an object"),
)


def describe(value: object) -> str:
    """Name the JSON kind of a value for error messages (``"a number"``)."""
    if value is None:
        return "null"
    for kind, name in _KINDS:
        if isinstance(value, kind):
            return name
    return f"a {type(value).__name__}"


def json_text(value: object) -> str:
    """Encode a value as compact JSON text (strings are returned unchanged).

    Values JSON cannot represent (non-string keys, nesting deeper than the
    interpreter allows, lone surrogates) become ``"<unencodable>"``.
    """
    if isinstance(value, str):
        return value
    try:
        return _encoder.encode(value).decode("utf-8", errors="replace")
    except (TypeError, ValueError, RecursionError):
        return _UNENCODABLE


def decode_json(data: bytes | str) -> object:
    """Decode one JSON document.

    Raises:
        TranscriptError: The data is not valid JSON (or nests too deeply).
    """
    try:
        return msgspec.json.decode(data)
    except (msgspec.DecodeError, RecursionError) as error:
        msg = f"Expected valid JSON, found {_reason(error)}"
        raise TranscriptError(msg) from error


def _reason(error: Exception) -> str:
    if isinstance(error, RecursionError):
        return "JSON nested too deeply to read"
    text = str(error).rstrip(".")
    if text == "Input data was truncated":
        return "truncated JSON"
    detail = text.removeprefix("JSON is malformed: ")
    return f"malformed JSON: {detail[:1].lower()}{detail[1:]}"


def part_text(part: object) -> str | None:
    """Return the text of one content part, or ``None`` if it has none.

    A part is a string, or an object with a string ``text`` (Anthropic ``text``,
    OpenAI ``text`` / ``input_text`` / ``output_text``, Gemini parts). Gemini
    thought summaries (``thought: true``) are not text.
    """
    if isinstance(part, str):
        return part
    obj = as_object(part)
    if obj is None or obj.get("thought") is True:
        return None
    return get_str(obj, "text")


def text_of(content: object, sink: Sink | None = None) -> str:
    """Flatten message or tool-result content to text.

    Strings are returned as they are, arrays of parts are joined with newlines,
    other values are encoded as JSON. Parts without text are counted in
    ``sink`` by their ``type``.

    Args:
        content: The content value.
        sink: Where to count parts that carry no text.

    Returns:
        The text.
    """
    if content is None:
        return ""
    parts = as_list(content)
    if parts is None:
        return part_text(content) or json_text(content)
    texts: list[str] = []
    for part in parts:
        text = part_text(part)
        if text is not None:
            texts.append(text)
        elif sink is not None:
            sink.skip_item(part)
    return "\n".join(text for text in texts if text)


class Sink:
    """Collects what a reader skipped and the problems it met.

    Attributes:
        skipped: Item, line, block and part kinds that produced no message.
        problems: Malformed pieces of input.
        items: Top-level items (messages, items, lines) the reader examined.
        unread: Those of them it did not recognise (an unknown role or type,
            not an object, a field of another format); detection refuses a
            file where they are most (see :func:`pipeline.formats.read`).
    """

    def __init__(self) -> None:
        self.skipped: Counter[str] = Counter()
        self.problems: list[Problem] = []
        self.items = 0
        self.unread = 0

    def unknown(self, kind: str) -> None:
        """Count one top-level item the reader does not recognise."""
        self.skipped[kind] += 1
        self.unread += 1

    def skip(self, kind: str) -> None:
        """Count one item of type ``kind`` that produced no message."""
        self.skipped[kind] += 1

    def skip_item(self, item: object, key: str = "type") -> None:
        """Count one item by the type stored under ``key``."""
        obj = as_object(item)
        self.skip(UNTYPED if obj is None else type_of(obj, key))

    def problem(self, line: int, message: str) -> None:
        """Record a malformed piece of input (``line`` 0: not line-based)."""
        self.problems.append(Problem(line, message))

    def transcript(
        self, fmt: FormatName, conversations: Iterable[Conversation]
    ) -> ParsedTranscript:
        """Build the result from the conversations and what was collected."""
        return ParsedTranscript(
            format=fmt,
            conversations=tuple(conversations),
            skipped=dict(sorted(self.skipped.items())),
            problems=tuple(sorted(self.problems, key=lambda problem: problem.line)),
            items=self.items,
            unread=self.unread,
        )


def conversation(
    *,
    conversation_id: str,
    indexed: list[Indexed],
    origins: list[str],
    source: str,
    api: FormatName | None = None,
    sidechain: bool = False,
) -> Conversation:
    """Build a :class:`Conversation` from indexed messages.

    Args:
        conversation_id: The conversation id.
        indexed: Messages with the index of their first source item.
        origins: The location label of every source item.
        source: Where the conversation lives in the file.
        api: The API shape, for cassettes.
        sidechain: Whether it is a subagent transcript.

    Returns:
        The conversation, with one origin label per message.
    """
    return Conversation(
        id=conversation_id,
        messages=tuple(message for _, message in indexed),
        source=source,
        origins=tuple(_label(origins, index) for index, _ in indexed),
        api=api,
        sidechain=sidechain,
    )


def _label(origins: list[str], index: int) -> str:
    if index == PREAMBLE:
        return "system"
    return origins[index] if 0 <= index < len(origins) else ""


def item_origins(prefix: str, count: int) -> list[str]:
    """Label ``count`` array items as ``prefix[0]``, ``prefix[1]``, ..."""
    return [f"{prefix}[{index}]" for index in range(count)]


class Items(NamedTuple):
    """Source items of one conversation, with a location label for each.

    Attributes:
        values: The decoded items (messages, Responses items, lines, ...).
        origins: A label per item (``"messages[3]"``, ``"line 12"``).
    """

    values: list[object]
    origins: list[str]

    @classmethod
    def of(cls, values: list[object], prefix: str) -> Items:
        """Wrap an array, labelling its items ``prefix[0]``, ``prefix[1]``, ..."""
        return cls(values, item_origins(prefix, len(values)))

    def objects(self, sink: Sink) -> Iterator[tuple[int, JSONObject]]:
        """Yield ``(index, item)`` for object items; report the others.

        Every item counts in ``sink.items``; one that is not an object is unread.
        """
        for index, value in enumerate(self.values):
            sink.items += 1
            obj = as_object(value)
            if obj is None:
                label = self.origins[index] if index < len(self.origins) else ""
                sink.unread += 1
                sink.problem(0, f"{label}: expected an object, found {describe(value)}")
            else:
                yield index, obj
