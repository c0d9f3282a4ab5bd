"""Inspect AI eval logs: the ``.json`` log and the zipped ``.eval`` log.

A log holds ``samples``, each with its ``messages`` (Inspect's chat messages:
``system`` / ``user`` / ``assistant`` / ``tool``). An assistant message's
``tool_calls`` are ``{id, function, arguments}`` (``function`` is the tool's
name, ``arguments`` an object); a ``tool`` message answers one by
``tool_call_id``, and a non-null ``error`` makes it a failed result. Messages
are OpenAI-chat shaped, so they pair by the chat rule (a result before the next
assistant message). One conversation per sample (and epoch).

The ``.eval`` form is a zip archive whose ``samples/*.json`` entries are the
samples; an archive that cannot be read whole is refused, and so is one with
more than :data:`MAX_SAMPLES` samples or whose samples declare more than
:data:`MAX_UNPACKED_BYTES` unpacked (checked before anything is inflated).
"""

from __future__ import annotations

import io
import lzma
import zipfile
import zlib
from typing import TYPE_CHECKING

import msgspec

from turnledger.pipeline.formats._common import (
    UNTYPED,
    Items,
    JSONObject,
    Sink,
    as_object,
    conversation,
    decode_json,
    get_list,
    get_object,
    get_str,
    json_text,
    text_of,
)
from turnledger.pipeline.formats._documents import describe_document, load_json
from turnledger.pipeline.formats.model import ModelUsage, TranscriptError
from turnledger.pipeline.formats.usage import MALFORMED, UNMATCHED_USAGE
from turnledger.pipeline.inputs import DEFAULT_MAX_INPUT_BYTES
from turnledger.policies.messages import Message, ToolCall, ToolResult, make_message

if TYPE_CHECKING:
    from turnledger.pipeline.formats.model import Conversation, ParsedTranscript

EXPECTED = "an Inspect AI eval log (`.json` with `samples`, or a zipped `.eval`)"
ZIP_MAGIC = b"PK\x03\x04"
"""How a zipped ``.eval`` log begins."""
MAX_SAMPLES = 100_000
"""The most ``samples/*.json`` members a ``.eval`` archive may have."""
MAX_UNPACKED_BYTES = DEFAULT_MAX_INPUT_BYTES
"""The most bytes its samples may unpack to (the bound on an input file)."""

_UNREADABLE = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    OSError,
    EOFError,
    ValueError,
    zlib.error,
    lzma.LZMAError,
    NotImplementedError,  # a compression method zipfile does not implement
    RuntimeError,  # an encrypted member
)
"""What reading a damaged or unusual archive raises (all become refusals)."""

_LOG_ENTRIES = frozenset({"header.json", "_journal/start.json"})
"""Entries one of which every ``.eval`` archive has."""


def is_eval_log(obj: JSONObject) -> bool:
    """Whether a JSON object is an Inspect eval log."""
    return "samples" in obj and "eval" in obj


def parse_inspect_ai(data: bytes, *, name: str) -> ParsedTranscript:
    """Read an Inspect AI eval log.

    Args:
        data: The file's bytes (JSON, or a zip archive).
        name: The file name, for conversation ids.

    Returns:
        One conversation per sample.

    Raises:
        TranscriptError: Not a log, or an archive that cannot be read whole.
    """
    samples = _zip_samples(data) if data.startswith(ZIP_MAGIC) else _json_samples(data)
    sink = Sink()
    found = [_sample(sample, index, name, sink) for index, sample in enumerate(samples)]
    return sink.transcript("inspect-ai", found)


def _json_samples(data: bytes) -> list[object]:
    document = load_json(data, expected=EXPECTED)
    log = as_object(document)
    if log is None or not is_eval_log(log):
        msg = f"Expected {EXPECTED}, found {describe_document(document)}"
        raise TranscriptError(msg)
    return get_list(log, "samples")


def _zip_samples(data: bytes) -> list[object]:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except _UNREADABLE as error:
        msg = f"Expected {EXPECTED}, found an archive that cannot be read: {error}"
        raise TranscriptError(msg) from error
    with archive:
        every = set(archive.namelist())
        if not every & _LOG_ENTRIES:
            msg = (
                f"Expected {EXPECTED}, found a zip archive without "
                "`header.json` or `_journal/start.json`"
            )
            raise TranscriptError(msg)
        names = sorted(
            n for n in every if n.startswith("samples/") and n.endswith(".json")
        )
        _check_unpacked([archive.getinfo(n) for n in names])
        try:
            raw = [archive.read(n) for n in names]
        except _UNREADABLE as error:
            msg = f"Expected {EXPECTED}, found an archive that cannot be read: {error}"
            raise TranscriptError(msg) from error
    try:
        return [decode_json(entry) for entry in raw]
    except TranscriptError as error:
        msg = f"Expected {EXPECTED}, found a sample that is not JSON: {error}"
        raise TranscriptError(msg) from error


def _check_unpacked(members: list[zipfile.ZipInfo]) -> None:
    """Refuse an archive whose samples would unpack past the bounds.

    Each member's declared size is what :meth:`zipfile.ZipFile.read` returns
    at most (a member that inflates further fails its size and CRC check), so
    checking the declared sizes first bounds the memory a zip bomb can take.
    """
    if len(members) > MAX_SAMPLES:
        msg = (
            f"Expected {EXPECTED} with at most {MAX_SAMPLES} samples, "
            f"found {len(members)}"
        )
        raise TranscriptError(msg)
    unpacked = sum(member.file_size for member in members)
    if unpacked > MAX_UNPACKED_BYTES:
        msg = (
            f"Expected {EXPECTED} whose samples unpack to at most "
            f"{MAX_UNPACKED_BYTES} bytes, found {unpacked} bytes"
        )
        raise TranscriptError(msg)


def _sample(raw: object, index: int, name: str, sink: Sink) -> Conversation:
    sample = as_object(raw) or {}
    sample_id = json_text(sample.get("id", index))
    epoch = sample.get("epoch")
    conversation_id = (
        f"{sample_id}" if epoch in (None, 1) else f"{sample_id}-epoch{epoch}"
    )
    items = Items.of(get_list(sample, "messages"), f"samples[{index}].messages")
    indexed: list[tuple[int, Message]] = []
    ids: dict[int, str] = {}
    for position, item in items.objects(sink):
        message = _message(item, sink)
        if message is not None:
            indexed.append((position, message))
            ids[position] = get_str(item, "id") or ""
    found = conversation(
        conversation_id=conversation_id,
        indexed=indexed,
        origins=items.origins,
        source=f"{name} sample {sample_id}",
    )
    calls = _model_calls(get_list(sample, "events"), sink)
    if not calls:
        return found
    usage: list[ModelUsage | None] = []
    for position, message in indexed:
        key = ids.get(position, "")
        given = calls.pop(key, None) if message.role == "assistant" and key else None
        usage.append(given)
    for _ in calls:
        sink.skip(UNMATCHED_USAGE)
    return msgspec.structs.replace(found, usage=tuple(usage))


def _model_calls(events: list[object], sink: Sink) -> dict[str, ModelUsage]:
    """The usage of each ``model`` event, by the id of the message it output.

    Inspect's ``input_tokens`` holds the cached tokens for some providers
    (OpenAI) and not for others (Anthropic); ``total_tokens`` says which: the
    cache reads and writes are added to the input only when the total counts
    them apart. A usage whose total fits neither, or with a count that is not
    an integer >= 0, is skipped (``malformed usage``).
    """
    found: dict[str, ModelUsage] = {}
    for raw in events:
        event = as_object(raw) or {}
        output = (
            get_object(event, "output") if get_str(event, "event") == "model" else None
        )
        usage = get_object(output, "usage") if output is not None else None
        if output is None or usage is None:
            continue
        choices = get_list(output, "choices")
        first = as_object(choices[0]) if choices else None
        message_id = (
            get_str(get_object(first, "message") or {}, "id") if first else None
        )
        model = get_str(output, "model") or get_str(event, "model") or ""
        read = _usage(usage, model)
        if read is None:
            sink.skip(MALFORMED)
        elif message_id:
            found[message_id] = read
        else:
            sink.skip(UNMATCHED_USAGE)
    return found


def _usage(usage: JSONObject, model: str) -> ModelUsage | None:
    counts: dict[str, int] = {}
    for key in (
        "input_tokens",
        "output_tokens",
        "total_tokens",
        "input_tokens_cache_read",
        "input_tokens_cache_write",
        "reasoning_tokens",
    ):
        value = usage.get(key)
        if value is None:
            value = 0
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            return None
        counts[key] = value
    read, write = counts["input_tokens_cache_read"], counts["input_tokens_cache_write"]
    inputs, outputs, total = (
        counts["input_tokens"],
        counts["output_tokens"],
        counts["total_tokens"],
    )
    if read + write and total == inputs + outputs + read + write:
        inputs += read + write  # counted apart from input_tokens (Anthropic)
    elif read + write and total != inputs + outputs:
        return None
    return ModelUsage(
        model=model,
        input_tokens=inputs,
        output_tokens=outputs,
        cached_input_tokens=read,
        cache_write_tokens=write,
        reasoning_tokens=counts["reasoning_tokens"],
    )


def _message(item: JSONObject, sink: Sink) -> Message | None:
    role = get_str(item, "role")
    text = text_of(item.get("content"), sink)
    if role == "system":
        return make_message("system", text)
    if role == "user":
        return make_message("user", text)
    if role == "assistant":
        calls = tuple(
            ToolCall(
                id=get_str(call, "id") or "",
                name=get_str(call, "function") or "",
                arguments=json_text(call.get("arguments", {})),
            )
            for value in get_list(item, "tool_calls")
            if (call := as_object(value)) is not None
        )
        return make_message("assistant", text, tool_calls=calls)
    if role == "tool":
        error = as_object(item.get("error"))
        if error is not None and not text:
            text = get_str(error, "message") or ""
        result = ToolResult(
            call_id=get_str(item, "tool_call_id") or "",
            content=text,
            is_error=error is not None,
            name=get_str(item, "function"),
        )
        return make_message("tool", tool_results=(result,))
    sink.unknown(f"role:{role or UNTYPED}")
    return None
