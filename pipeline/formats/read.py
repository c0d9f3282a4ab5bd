"""Reading a transcript file in any supported format."""

from __future__ import annotations

import hashlib
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Literal, Protocol, TypeAlias

from turnledger.pipeline.formats.adk import parse_adk
from turnledger.pipeline.formats.anthropic import parse_anthropic
from turnledger.pipeline.formats.cassette import parse_cassette
from turnledger.pipeline.formats.claude_code import parse_claude_code
from turnledger.pipeline.formats.codex import parse_codex
from turnledger.pipeline.formats.detect import detect_candidates
from turnledger.pipeline.formats.gemini import parse_gemini
from turnledger.pipeline.formats.har import parse_har
from turnledger.pipeline.formats.inspect_ai import parse_inspect_ai
from turnledger.pipeline.formats.langchain import parse_langchain
from turnledger.pipeline.formats.model import FORMAT_NAMES, FormatName, TranscriptError
from turnledger.pipeline.formats.openai_agents import parse_openai_agents
from turnledger.pipeline.formats.openai_agents_items import SQLITE_MAGIC, WAL_MODE
from turnledger.pipeline.formats.openai_chat import parse_openai_chat
from turnledger.pipeline.formats.openai_responses import parse_openai_responses
from turnledger.pipeline.formats.openhands import parse_openhands
from turnledger.pipeline.formats.pydantic_ai import parse_pydantic_ai
from turnledger.pipeline.inputs import DEFAULT_MAX_INPUT_BYTES, read_input_file

if TYPE_CHECKING:
    from turnledger.pipeline.formats.model import ParsedTranscript

FormatChoice: TypeAlias = FormatName | Literal["auto"]
"""A format name, or ``"auto"`` to detect it from the content."""


class _Reader(Protocol):
    def __call__(self, data: bytes, *, name: str) -> ParsedTranscript: ...


_READERS: dict[FormatName, _Reader] = {
    "openai-chat": parse_openai_chat,
    "openai-responses": parse_openai_responses,
    "anthropic": parse_anthropic,
    "gemini": parse_gemini,
    "langchain": parse_langchain,
    "pydantic-ai": parse_pydantic_ai,
    "claude-code": parse_claude_code,
    "codex": parse_codex,
    "cassette": parse_cassette,
    "adk": parse_adk,
    "openai-agents": parse_openai_agents,
    "inspect-ai": parse_inspect_ai,
    "openhands": parse_openhands,
    "har": parse_har,
}


def read_transcript(
    path: str | Path,
    *,
    format: FormatChoice | str = "auto",  # noqa: A002 - the documented keyword
    max_bytes: int = DEFAULT_MAX_INPUT_BYTES,
) -> ParsedTranscript:
    """Read a transcript file.

    Args:
        path: The file to read.
        format: A format name, or ``"auto"`` to detect it from the content.
        max_bytes: The largest file read (``[runtime] max_input_bytes``).

    Returns:
        The conversations found, with what was skipped and what was malformed.

    Raises:
        TranscriptError: The format is unknown or undetectable, or the content
            cannot be read as that format.
        InputFileError: The file is missing, not a regular file (a FIFO, a
            device, a directory) or larger than the input bound.
    """
    return _read_file(Path(path), format, max_bytes)[0]


def read_transcript_source(
    path: str | Path,
    *,
    format: FormatChoice | str = "auto",  # noqa: A002 - the documented keyword
    max_bytes: int = DEFAULT_MAX_INPUT_BYTES,
) -> tuple[ParsedTranscript, str]:
    """Read a transcript file as :func:`read_transcript` does, with its digest.

    Returns:
        The transcript, and the SHA-256 (hex) of the very bytes it was parsed
        from (what an import's session keys and idempotency keys derive from).

    Raises:
        TranscriptError: See :func:`read_transcript`.
        InputFileError: See :func:`read_transcript`.
    """
    parsed, data = _read_file(Path(path), format, max_bytes)
    return parsed, hashlib.sha256(data).hexdigest()


def _read_file(
    path: Path,
    format: FormatChoice | str,  # noqa: A002 - the documented keyword
    max_bytes: int,
) -> tuple[ParsedTranscript, bytes]:
    data = read_input_file(path, max_bytes=max_bytes, what="transcript")  # #17
    _refuse_pending_wal(path, data)
    return parse_transcript(data, format=format, path=path), data


def _refuse_pending_wal(path: Path, data: bytes) -> None:
    """Refuse a WAL-mode database whose ``-wal`` holds writes the file lacks."""
    if not data.startswith(SQLITE_MAGIC) or data[18:20] != WAL_MODE:
        return
    wal = path.with_name(f"{path.name}-wal")
    try:
        pending = wal.stat().st_size
    except OSError:
        return  # no -wal: every write is in the file
    if pending:
        msg = (
            f"Expected a session database with every write in the file, found "
            f"{pending} bytes not yet checkpointed in {wal.name} (close the "
            "program writing it, or run `PRAGMA wal_checkpoint`, then retry)"
        )
        raise TranscriptError(msg)


def parse_transcript(
    data: bytes,
    *,
    format: FormatChoice | str = "auto",  # noqa: A002 - the documented keyword
    path: str | PurePath | None = None,
) -> ParsedTranscript:
    """Parse a transcript from its bytes (no I/O).

    Args:
        data: The transcript's bytes.
        format: A format name, or ``"auto"`` to detect it from the content.
        path: Where the bytes came from; its name identifies single-conversation
            files and its suffix helps detection.

    With ``format="auto"`` the detected candidates are tried best first, and a
    reader's result is refused when it did not recognise most top-level items
    (or found no message while something was unrecognised), or when a record
    it did not map is model traffic (a request to a model API no shape knows,
    a message- or tool-call-shaped object of an unknown schema: see
    :class:`~pipeline.formats.model.Coverage`); the next candidate is tried,
    and when none is left a :class:`TranscriptError` names them all, with the
    first record that did not fit. A forced format is read as it is, reporting
    what it skipped, unless a record is such model traffic: it is refused too.

    Returns:
        The conversations found, with what was skipped and what was malformed.

    Raises:
        TranscriptError: The format is unknown or undetectable, the content
            cannot be read as that format, or no detected reader recognised it.
    """
    name = PurePath(path).name if path is not None else "<transcript>"
    if format != "auto":
        return _unrefused(_read(_format_name(format), data, name))
    candidates = detect_candidates(path, data)
    refusals: list[str] = []
    forcible = False
    for chosen in candidates:
        try:
            parsed = _read(chosen, data, name)
        except TranscriptError as error:
            if not refusals:
                raise  # the best candidate cannot read it: say why
            refusals.append(f"{chosen} ({error})")
            continue
        if parsed.coverage.refused and len(candidates) == 1:
            _unrefused(parsed)
        refusal = parsed.coverage.refused or _refusal(parsed)
        if not refusal:
            return parsed
        forcible = forcible or not parsed.coverage.refused
        refusals.append(f"{chosen} ({refusal})")
    considered = "; ".join(refusals)
    hint = "; pass --format to read it as one of them anyway" if forcible else ""
    msg = (
        f"Expected a transcript one reader recognises, found none that reads most "
        f"of it (formats considered: {considered}){hint}"
    )
    raise TranscriptError(msg)


def _read(chosen: FormatName, data: bytes, name: str) -> ParsedTranscript:
    try:
        return _READERS[chosen](data, name=name)
    except RecursionError as error:
        # Readers do not recurse, but comparing or encoding values nested close
        # to the interpreter's limit can (a cassette's history items).
        msg = f"Expected a {chosen} transcript, found values nested too deeply"
        raise TranscriptError(msg) from error


def _unrefused(parsed: ParsedTranscript) -> ParsedTranscript:
    """Return ``parsed`` unless a record holds model traffic it could not read.

    Raises:
        TranscriptError: Naming the format read, the first such record and
            what it holds (:attr:`Coverage.refused`).
    """
    refused = parsed.coverage.refused
    if refused:
        msg = (
            f"Expected every record readable as {parsed.format}, found model "
            f"traffic no reader understands: {refused}"
        )
        raise TranscriptError(msg)
    return parsed


def _refusal(parsed: ParsedTranscript) -> str | None:
    """Why a detected reader's result is not to be trusted, or ``None``.

    It is refused when most top-level items were unrecognised, or when it found
    no message at all while some item was unrecognised; the reason names the
    first record that did not fit.
    """
    if not parsed.unread:
        return None
    messages = sum(len(c.messages) for c in parsed.conversations)
    if parsed.unread * 2 <= parsed.items and messages:
        return None
    kinds = sorted(parsed.skipped.items(), key=lambda kv: -kv[1])[:3]
    listed = ", ".join(f"{kind} x{count}" for kind, count in kinds)
    first = f"; first {parsed.coverage.first}" if parsed.coverage.first else ""
    return (
        f"{parsed.unread} of {parsed.items} items unrecognised, "
        f"{messages} messages read; skipped {listed}{first}"
    )


def _format_name(value: str) -> FormatName:
    for name in FORMAT_NAMES:
        if name == value:
            return name
    expected = ", ".join(("auto", *FORMAT_NAMES))
    msg = f"Expected a format name ({expected}), found {value!r}"
    raise TranscriptError(msg)
