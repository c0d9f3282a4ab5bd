"""Reading a transcript file in any supported format."""

from __future__ import annotations

from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Literal, Protocol, TypeAlias

from turnledger.pipeline.formats.adk import parse_adk
from turnledger.pipeline.formats.anthropic import parse_anthropic
from turnledger.pipeline.formats.cassette import parse_cassette
from turnledger.pipeline.formats.claude_code import parse_claude_code
from turnledger.pipeline.formats.codex import parse_codex
from turnledger.pipeline.formats.detect import detect_format
from turnledger.pipeline.formats.gemini import parse_gemini
from turnledger.pipeline.formats.langchain import parse_langchain
from turnledger.pipeline.formats.model import FORMAT_NAMES, FormatName, TranscriptError
from turnledger.pipeline.formats.openai_chat import parse_openai_chat
from turnledger.pipeline.formats.openai_responses import parse_openai_responses
from turnledger.pipeline.formats.pydantic_ai import parse_pydantic_ai

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
}


def read_transcript(
    path: str | Path,
    *,
    format: FormatChoice | str = "auto",  # noqa: A002 - the documented keyword
) -> ParsedTranscript:
    """Read a transcript file.

    Args:
        path: The file to read.
        format: A format name, or ``"auto"`` to detect it from the content.

    Returns:
        The conversations found, with what was skipped and what was malformed.

    Raises:
        TranscriptError: The format is unknown or undetectable, or the content
            cannot be read as that format.
        OSError: The file cannot be read.
    """
    path = Path(path)
    return parse_transcript(path.read_bytes(), format=format, path=path)


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

    Returns:
        The conversations found, with what was skipped and what was malformed.

    Raises:
        TranscriptError: The format is unknown or undetectable, or the content
            cannot be read as that format.
    """
    name = PurePath(path).name if path is not None else "<transcript>"
    chosen = detect_format(path, data) if format == "auto" else _format_name(format)
    try:
        return _READERS[chosen](data, name=name)
    except RecursionError as error:
        # Readers do not recurse, but comparing or encoding values nested close
        # to the interpreter's limit can (a cassette's history items).
        msg = f"Expected a {chosen} transcript, found values nested too deeply"
        raise TranscriptError(msg) from error


def _format_name(value: str) -> FormatName:
    for name in FORMAT_NAMES:
        if name == value:
            return name
    expected = ", ".join(("auto", *FORMAT_NAMES))
    msg = f"Expected a format name ({expected}), found {value!r}"
    raise TranscriptError(msg)
