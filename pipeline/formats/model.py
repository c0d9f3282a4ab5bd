"""Result types of the transcript readers.

A reader turns one file into a :class:`ParsedTranscript`: the conversations it
holds, in the neutral message model of :mod:`policies.messages`, plus an account
of what it could not use (``skipped`` item types, ``problems`` with malformed
input). Input that cannot be read at all raises :class:`TranscriptError`.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Literal, NamedTuple, TypeAlias

import msgspec

from turnledger.pipeline.errors import PipelineError
from turnledger.policies.messages import Message

if TYPE_CHECKING:
    from collections.abc import Iterable

FormatName: TypeAlias = Literal[
    "openai-chat",
    "openai-responses",
    "anthropic",
    "gemini",
    "langchain",
    "pydantic-ai",
    "claude-code",
    "codex",
    "cassette",
    "adk",
    "openai-agents",
    "inspect-ai",
    "openhands",
    "har",
    "cohere",
    "mistral",
    "bedrock-converse",
    "ollama",
]
"""The name of a transcript format, as ``--format`` spells it, or of the API
shape of a recorded conversation (the last four: APIs read only inside
cassettes and HAR files, not in :data:`FORMAT_NAMES`)."""

FORMAT_NAMES: tuple[FormatName, ...] = (
    "openai-chat",
    "openai-responses",
    "anthropic",
    "gemini",
    "langchain",
    "pydantic-ai",
    "claude-code",
    "codex",
    "cassette",
    "adk",
    "openai-agents",
    "inspect-ai",
    "openhands",
    "har",
)
"""Every format a reader exists for, in the order ``--help`` lists them."""


class TranscriptError(PipelineError, ValueError):
    """The input cannot be read as a transcript of the expected format.

    The message names what was expected and what was found, e.g.
    ``"Expected a JSON document, found invalid JSON at byte 12"``.
    """


class Problem(NamedTuple):
    """One malformed piece of input that was left out.

    Attributes:
        line: The 1-based line number in a line-based file (JSONL); ``0`` when the
            problem is not tied to a line (the message then names the location).
        message: What was expected and what was found.
    """

    line: int
    message: str


class ModelUsage(msgspec.Struct, frozen=True, kw_only=True):
    """What a file says one model response used (an assistant message's call).

    Attributes:
        model: The model that answered (``""`` when the file names none).
        provider: The provider, when the file names it (``""`` otherwise).
        input_tokens: Prompt tokens, cached ones included.
        output_tokens: Completion tokens, reasoning ones included.
        cached_input_tokens: The part of the input read from the prompt cache.
        cache_write_tokens: The part of the input written to the prompt cache.
        reasoning_tokens: The part of the output spent on reasoning.
    """

    model: str = ""
    provider: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0


class Conversation(msgspec.Struct, frozen=True, kw_only=True):
    """One conversation found in a transcript.

    Attributes:
        id: An id that is unique within the file (a session id, a cassette
            interaction, or the file name).
        messages: The messages in order, in the neutral model.
        source: Where the conversation lives in the file, for people.
        origins: Where each message came from (``"line 12"``,
            ``"messages[3]"``, ``"interactions[2].response"``), parallel to
            ``messages``.
        api: The API shape of a recorded conversation (cassettes only), as a
            format name.
        sidechain: Whether every line of the conversation is marked as a
            sidechain (a Claude Code subagent transcript).
        usage: The usage the file reports for each message's model call,
            parallel to ``messages`` (``None``: none reported, always for a
            message that is not the assistant's); empty when the format
            carries no usage or the reader reads none.
    """

    id: str
    messages: tuple[Message, ...]
    source: str
    origins: tuple[str, ...] = ()
    api: FormatName | None = None
    sidechain: bool = False
    usage: tuple[ModelUsage | None, ...] = ()


class Coverage(msgspec.Struct, frozen=True, kw_only=True):
    """How every record of a file ended: mapped to messages, or accounted for.

    A record is a line, a message or item, an interaction or entry, a row or an
    event, whatever the format's top-level unit is. Each one a reader starts
    ends either *mapped* (recognised as a record of the format and read) or
    *accounted* for with a reason (``unrecognised``, ``malformed``, ``not a
    model request``); ``read == mapped + accounted`` always.

    Attributes:
        read: Records the reader started.
        mapped: Those it recognised and read.
        accounted: Those it did not map, each with a reason.
        kinds: Per record kind (``line``, ``item``, ``interaction``, ``entry``,
            ``row``): ``{"read": n, "mapped": n, "accounted": n}``.
        reasons: Accounted records per ``"<kind> <type>: <reason>"``.
        first: The first accounted record, ``"<where> (<type>): <reason>"``,
            or ``""`` when every record was mapped.
        refused: Why the file cannot be read fully, or ``""``: a record that is
            model traffic no reader understands (a request to a model API no
            shape knows, a message- or tool-call-shaped object of an unknown
            schema), naming the first such record and what it holds.
    """

    read: int = 0
    mapped: int = 0
    accounted: int = 0
    kinds: dict[str, dict[str, int]] = msgspec.field(default_factory=dict)
    reasons: dict[str, int] = msgspec.field(default_factory=dict)
    first: str = ""
    refused: str = ""


def total_coverage(coverages: Iterable[Coverage]) -> Coverage:
    """Sum the coverage of several files (``first`` and ``refused``: the first)."""
    kinds: dict[str, Counter[str]] = {}
    reasons: Counter[str] = Counter()
    read = mapped = 0
    first = refused = ""
    for coverage in coverages:
        read += coverage.read
        mapped += coverage.mapped
        for kind, counts in coverage.kinds.items():
            kinds.setdefault(kind, Counter()).update(counts)
        reasons.update(coverage.reasons)
        first = first or coverage.first
        refused = refused or coverage.refused
    return Coverage(
        read=read,
        mapped=mapped,
        accounted=read - mapped,
        kinds={kind: dict(counts) for kind, counts in sorted(kinds.items())},
        reasons=dict(sorted(reasons.items())),
        first=first,
        refused=refused,
    )


class ParsedTranscript(msgspec.Struct, frozen=True, kw_only=True):
    """Everything a reader found in one file.

    Attributes:
        format: The format the file was read as.
        conversations: The conversations, in file order.
        skipped: Item, line or block types that produced no message, with counts
            (unknown record types, reasoning items, provider-side tool blocks, ...).
        problems: Malformed pieces that were left out, in file order.
        items: Top-level items (messages, items, lines) the reader examined.
        unread: Those of them it did not recognise as its format's.
        coverage: How every record ended (mapped or accounted for).
    """

    format: FormatName
    conversations: tuple[Conversation, ...]
    skipped: dict[str, int] = msgspec.field(default_factory=dict)
    problems: tuple[Problem, ...] = ()
    items: int = 0
    unread: int = 0
    coverage: Coverage = msgspec.field(default_factory=Coverage)
