"""Helpers shared by the readers: JSON narrowing, text extraction, collection.

Readers see JSON (or YAML) values as ``object`` and narrow them here, so no
``Any`` leaks into their signatures. Nothing in this module recurses into
nested values, so hostile nesting cannot exhaust the stack.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, NamedTuple, TypeAlias, cast

import msgspec

from turnledger.pipeline.formats._traffic import call_shape, message_shape
from turnledger.pipeline.formats.model import (
    Conversation,
    Coverage,
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


UNRECOGNISED = "unrecognised"
"""The reason of a record a reader did not recognise as its format's."""

MALFORMED = "malformed"
"""The reason of a record a reader met a malformed piece in."""

PROVIDER_SIDE = ("server_", "mcp_", "web_search", "code_execution", "bash_code")
"""Part type prefixes of tools the provider ran (deliberately not client calls)."""


class _Record:
    """The record a reader is reading, until the next one starts."""

    __slots__ = ("kind", "label", "outcome", "value")

    def __init__(self, kind: str, label: str, value: object) -> None:
        self.kind = kind
        self.label = label
        self.value = value
        self.outcome: tuple[str, str] | None = None


class Sink:
    """Collects what a reader skipped, the problems it met, and its coverage.

    Every record a reader starts (:meth:`begin`; :meth:`Items.objects` starts
    one per item, so readers iterating items cannot forget) ends *mapped*
    unless the reader accounted for it while it was open (:meth:`unknown`,
    :meth:`problem`, :meth:`account`). A record ends when the next one starts
    or when the result is built. An unrecognised record shaped like a message
    or a tool call, and an unknown part shaped like a tool call, make the file
    refused (``coverage.refused``): model traffic no reader understands.

    Attributes:
        skipped: Item, line, block and part kinds that produced no message.
        problems: Malformed pieces of input.
        items: Top-level items (messages, items, lines) the reader examined.
        unread: Those of them it did not recognise (an unknown role or type,
            not an object, a field of another format); detection refuses a
            file where they are most (see :func:`pipeline.formats.read`).
        refused: Why the file cannot be read fully, or ``""``.
    """

    def __init__(self) -> None:
        self.skipped: Counter[str] = Counter()
        self.problems: list[Problem] = []
        self.items = 0
        self.unread = 0
        self.refused = ""
        self._record: _Record | None = None
        self._read: Counter[str] = Counter()
        self._mapped: Counter[str] = Counter()
        self._reasons: Counter[str] = Counter()
        self._first = ""

    def begin(self, kind: str, label: str, value: object) -> None:
        """Start a record (ending the one before); it counts in ``items``.

        Args:
            kind: The record kind (``line``, ``item``, ``interaction``, ...).
            label: Where it is (``"line 12"``, ``"messages[3]"``).
            value: The decoded record, examined if it ends unrecognised.
        """
        self.end()
        self.items += 1
        self._record = _Record(kind, label, value)

    def end(self) -> None:
        """End the open record: mapped, unless it was accounted for."""
        record, self._record = self._record, None
        if record is None:
            return
        self._read[record.kind] += 1
        if record.outcome is None:
            self._mapped[record.kind] += 1
            return
        what, reason = record.outcome
        self._reasons[f"{record.kind} {what}: {reason}"[:200]] += 1
        self._first = self._first or f"{record.label} ({what}): {reason}"[:200]
        if reason == UNRECOGNISED and not self.refused:
            shape = message_shape(record.value)
            if shape is not None:
                self.refuse(f"{record.label} ({what}) holds {shape}")

    def account(self, what: str, reason: str) -> None:
        """Account for the open record: it is not mapped, for ``reason``."""
        if self._record is not None and self._record.outcome is None:
            self._record.outcome = (what, reason)

    def whole(self, kind: str, label: str, what: str, reason: str) -> None:
        """Count one record (of type ``what``) accounted for as soon as it is met."""
        self.end()
        self._record = _Record(kind, label, None)
        self._record.outcome = (what, reason)
        self.end()

    def refuse(self, reason: str) -> None:
        """Refuse the file: a record holds model traffic no reader understands."""
        if not self.refused:
            self.refused = reason[:300]

    def unknown(self, kind: str) -> None:
        """Count one top-level item the reader does not recognise."""
        self.skipped[kind] += 1
        self.unread += 1
        self.account(kind, UNRECOGNISED)

    def skip(self, kind: str) -> None:
        """Count one item of type ``kind`` that produced no message."""
        self.skipped[kind] += 1

    def skip_part(self, kind: str, part: object, *, in_calls: bool = False) -> None:
        """Count one part of an unhandled type; refuse it if it is a tool call.

        A part shaped like a tool call (see :func:`._traffic.call_shape`), or
        any element of a list of calls (``in_calls``), whose type is not a
        provider-side tool's would be a call lost in silence.
        """
        self.skip(kind)
        bare = kind.removeprefix("tool_call:")
        if self.refused or bare.startswith(PROVIDER_SIDE) or "server" in bare:
            return
        shape = "an element of a tool-call list" if in_calls else call_shape(part)
        if shape is not None:
            where = self._record.label if self._record is not None else "a part"
            self.refuse(f"{where}: a part of type {kind!r} holds {shape}")

    def skip_item(self, item: object, key: str = "type") -> None:
        """Count one item by the type stored under ``key``."""
        obj = as_object(item)
        self.skip(UNTYPED if obj is None else type_of(obj, key))

    def problem(self, line: int, message: str) -> None:
        """Record a malformed piece of input (``line`` 0: not line-based)."""
        self.problems.append(Problem(line, message))
        if self._record is not None:
            value = self._record.value
            obj = as_object(value)
            self.account(describe(value) if obj is None else type_of(obj), MALFORMED)

    def coverage(self) -> Coverage:
        """The coverage so far (ends the open record)."""
        self.end()
        kinds = {
            kind: {
                "read": read,
                "mapped": self._mapped[kind],
                "accounted": read - self._mapped[kind],
            }
            for kind, read in sorted(self._read.items())
        }
        read = self._read.total()
        mapped = self._mapped.total()
        return Coverage(
            read=read,
            mapped=mapped,
            accounted=read - mapped,
            kinds=kinds,
            reasons=dict(sorted(self._reasons.items())),
            first=self._first,
            refused=self.refused,
        )

    def transcript(
        self, fmt: FormatName, conversations: Iterable[Conversation]
    ) -> ParsedTranscript:
        """Build the result from the conversations and what was collected."""
        conversations = tuple(conversations)
        return ParsedTranscript(
            format=fmt,
            conversations=conversations,
            skipped=dict(sorted(self.skipped.items())),
            problems=tuple(sorted(self.problems, key=lambda problem: problem.line)),
            items=self.items,
            unread=self.unread,
            coverage=self.coverage(),
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

        Every item is a record of ``sink`` (:meth:`Sink.begin`), so it counts
        in ``sink.items`` and ends mapped or accounted for; one that is not an
        object is unread.
        """
        for index, value in enumerate(self.values):
            label = self.origins[index] if index < len(self.origins) else ""
            sink.begin("item", label, value)
            obj = as_object(value)
            if obj is None:
                sink.unread += 1
                sink.problem(0, f"{label}: expected an object, found {describe(value)}")
            else:
                yield index, obj
        sink.end()
