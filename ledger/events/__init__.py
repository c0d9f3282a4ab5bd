"""The event catalogue: every fact the ledger records, as a typed msgspec Struct.

Rules (house style R2-R4):

- Events are frozen, keyword-only, tagged Structs. The tag (``type`` field) is an
  explicit, stable string, never the class name: it is what the ledger stores, so a
  class may be renamed or moved without touching stored data.
- Each type carries ``SCHEMA_VERSION``. Changes are additive (new fields get
  defaults); a breaking change bumps the version and registers a pure upcaster in
  :mod:`ledger.events.registry`, so old rows still decode.
- Events carry no stream id, version, position or clock: that is the envelope
  (:class:`ledger.envelope.Recorded`), written by the store.
- Events never carry raw media bytes or the assembled prompt: media is referenced by
  digest, the prompt by per-section sizes and digests. The one exception is the
  system (or developer) instructions, which are data: :class:`SystemPromptSet`
  records their text and digest once per change, so a session can be exported and
  replayed as it was sent.

This module defines the turn's events (session opened, turn started, prompt,
model call, assistant message, tool result, trim, media, system prompt, turn
end) and is the catalogue's public home: it re-exports the ``Event`` base and
field types (:mod:`ledger.events.base`), the memory events
(:mod:`ledger.events.memory`), the session-history events
(:mod:`ledger.events.history`) and the erasure receipt
(:mod:`ledger.events.erasure`), and lists them all in ``EVENT_TYPES``.
"""

from __future__ import annotations

import hashlib
from typing import Annotated, ClassVar, Literal, TypeAlias

import msgspec

from turnledger.ledger.events.base import (
    Event,
    MemorySource,
    NonEmpty,
    NonNegative,
    Sha256Hex,
    ToolResultProvenance,
    TurnFailureKind,
    TurnOrigin,
    tag_of,
)
from turnledger.ledger.events.erasure import ErasureRecorded
from turnledger.ledger.events.history import (
    ItemRecorded,
    ItemsRemoved,
    SessionForked,
    SessionRewound,
)
from turnledger.ledger.events.memory import (
    KnowledgeCaptured,
    MemoryForgotten,
    MemoryRecalled,
    MemoryStored,
    MemorySuperseded,
    RecallRef,
)


class SessionOpened(Event, tag="session.opened", frozen=True, kw_only=True, gc=False):
    """A session stream begins (first event of every session stream)."""

    ID_FIELDS: ClassVar[tuple[str, ...]] = ("agent", "session_key")

    agent: NonEmpty
    session_key: NonEmpty
    channel: str = ""
    workspace: str | None = None


class TurnStarted(Event, tag="turn.started", frozen=True, kw_only=True, gc=False):
    """A turn begins with the user's input."""

    ID_FIELDS: ClassVar[tuple[str, ...]] = ("turn_id",)

    turn_id: NonEmpty
    origin: TurnOrigin
    user_input: str
    attachments: tuple[Sha256Hex, ...] = ()


class PromptSection(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """The size and digest of one section of an assembled prompt."""

    name: str
    chars: NonNegative
    messages: NonNegative = 0
    digest: Sha256Hex


class PromptAssembled(
    Event, tag="prompt.assembled", frozen=True, kw_only=True, gc=False
):
    """A prompt was built: its fingerprint, never its text (it is ephemeral)."""

    ID_FIELDS: ClassVar[tuple[str, ...]] = ("turn_id",)

    turn_id: NonEmpty
    iteration: NonNegative = 0
    sections: tuple[PromptSection, ...] = ()
    fingerprint: Sha256Hex
    estimated_tokens: NonNegative = 0


class ModelCalled(Event, tag="model.called", frozen=True, kw_only=True, gc=False):
    """One provider call, with usage and cost (errors scrubbed by the caller).

    Token counts have the neutral meaning: ``input_tokens`` is the whole prompt,
    of which ``cached_input_tokens`` were read from the provider's prompt cache
    and ``cache_write_tokens`` written to it; ``output_tokens`` is the whole
    completion, of which ``reasoning_tokens`` were reasoning (thinking). The two
    cache fields and ``reasoning_tokens`` are 0 when the provider did not report
    them (and on every event recorded before they existed).
    """

    ID_FIELDS: ClassVar[tuple[str, ...]] = ("turn_id",)

    turn_id: NonEmpty
    provider: str
    model: str
    input_tokens: NonNegative = 0
    output_tokens: NonNegative = 0
    cached_input_tokens: NonNegative = 0
    cache_write_tokens: NonNegative = 0
    reasoning_tokens: NonNegative = 0
    cost_usd: Annotated[float, msgspec.Meta(ge=0.0)] = 0.0
    duration_ms: Annotated[float, msgspec.Meta(ge=0.0)] = 0.0
    success: bool = True
    error: str | None = None
    iteration: NonNegative = 0


class ToolCallRecord(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A tool call as the model made it."""

    id: NonEmpty
    name: NonEmpty
    arguments: str = "{}"


class AssistantMessage(
    Event, tag="assistant.message", frozen=True, kw_only=True, gc=False
):
    """The model's message: text and the tool calls it asked for."""

    ID_FIELDS: ClassVar[tuple[str, ...]] = ("turn_id",)

    turn_id: NonEmpty
    text: str = ""
    tool_calls: tuple[ToolCallRecord, ...] = ()
    iteration: NonNegative = 0

    def identifiers(self) -> list[tuple[str, object]]:
        """Return the turn id and every tool call's id (``tool_calls[0].id``)."""
        found = super().identifiers()
        found.extend(
            (f"tool_calls[{i}].id", c.id) for i, c in enumerate(self.tool_calls)
        )
        return found


class ToolResultRecorded(
    Event, tag="tool_result.recorded", frozen=True, kw_only=True, gc=False
):
    """The bounded result of one tool call."""

    ID_FIELDS: ClassVar[tuple[str, ...]] = ("turn_id", "call_id")

    turn_id: NonEmpty
    call_id: NonEmpty
    tool: str
    success: bool = True
    output: str = ""
    error: str | None = None
    original_chars: NonNegative = 0
    kept_chars: NonNegative = 0
    truncated: bool = False
    provenance: ToolResultProvenance = "executed"


class HistoryTrimmed(Event, tag="history.trimmed", frozen=True, kw_only=True, gc=False):
    """Older turns were dropped from the provider-visible history."""

    ID_FIELDS: ClassVar[tuple[str, ...]] = ("turn_id",)

    turn_id: NonEmpty
    dropped_messages: NonNegative
    dropped_turns: NonNegative
    kept_turns: NonNegative
    tokens_before: NonNegative
    tokens_after: NonNegative
    reason: str
    dropped_through_version: NonNegative = 0
    breadcrumb: bool = True


class MediaAttached(Event, tag="media.attached", frozen=True, kw_only=True, gc=False):
    """A media file attached to a turn: metadata and a reference, never bytes."""

    ID_FIELDS: ClassVar[tuple[str, ...]] = ("turn_id",)

    turn_id: NonEmpty
    file_name: str
    mime: str
    kind: Literal["image", "audio", "video", "document", "unknown"]
    size_bytes: NonNegative
    sha256: Sha256Hex
    storage_ref: str | None = None
    summary: str | None = None


def text_digest(text: str) -> str:
    """Return the lowercase hex SHA-256 of a text's UTF-8 bytes.

    Lone surrogates (which JSON can carry) are encoded with ``surrogatepass``.
    """
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class SystemPromptSet(
    Event, tag="system_prompt.set", frozen=True, kw_only=True, gc=False
):
    """The system or developer instructions the model is given from here on.

    Recorded when they change: by the turn engine before the first prompt that
    uses a new system prompt, and by an import at the place of each system or
    developer message of the transcript. ``digest`` is :func:`text_digest` of
    ``text``; a value whose digest does not match is refused (at construction and
    on decode).

    Attributes:
        text: The instructions, verbatim.
        digest: The SHA-256 of ``text`` (the prompt fingerprint's ``system``
            section records the same value).
        role: ``"developer"`` when the source called them developer instructions.
        turn_id: The turn they were set for (``None`` before the first turn).
    """

    ID_FIELDS: ClassVar[tuple[str, ...]] = ("turn_id",)

    text: str
    digest: Sha256Hex
    role: Literal["system", "developer"] = "system"
    turn_id: str | None = None

    def __post_init__(self) -> None:
        """Refuse a digest that is not the text's."""
        found = text_digest(self.text)
        if found != self.digest:
            msg = f"Expected the text's digest {found}, found {self.digest}"
            raise ValueError(msg)

    @classmethod
    def of(
        cls,
        text: str,
        *,
        role: Literal["system", "developer"] = "system",
        turn_id: str | None = None,
    ) -> SystemPromptSet:
        """Build the event for ``text``, computing its digest."""
        return cls(text=text, digest=text_digest(text), role=role, turn_id=turn_id)


class TurnCompleted(Event, tag="turn.completed", frozen=True, kw_only=True, gc=False):
    """A turn ended with a final answer."""

    ID_FIELDS: ClassVar[tuple[str, ...]] = ("turn_id",)

    turn_id: NonEmpty
    iterations: NonNegative = 1
    duration_ms: Annotated[float, msgspec.Meta(ge=0.0)] = 0.0


class TurnFailed(Event, tag="turn.failed", frozen=True, kw_only=True, gc=False):
    """A turn ended without a final answer."""

    ID_FIELDS: ClassVar[tuple[str, ...]] = ("turn_id",)

    turn_id: NonEmpty
    kind: TurnFailureKind = "error"
    error: str = ""


LedgerEvent: TypeAlias = (
    SessionOpened
    | TurnStarted
    | MemoryRecalled
    | PromptAssembled
    | ModelCalled
    | AssistantMessage
    | ToolResultRecorded
    | HistoryTrimmed
    | MediaAttached
    | MemoryStored
    | MemoryForgotten
    | MemorySuperseded
    | KnowledgeCaptured
    | TurnCompleted
    | TurnFailed
    | SystemPromptSet
    | ItemRecorded
    | ItemsRemoved
    | SessionForked
    | SessionRewound
    | ErasureRecorded
)
"""Every event type the ledger records."""

EVENT_TYPES: tuple[type[Event], ...] = (
    SessionOpened,
    TurnStarted,
    MemoryRecalled,
    PromptAssembled,
    ModelCalled,
    AssistantMessage,
    ToolResultRecorded,
    HistoryTrimmed,
    MediaAttached,
    MemoryStored,
    MemoryForgotten,
    MemorySuperseded,
    KnowledgeCaptured,
    TurnCompleted,
    TurnFailed,
    SystemPromptSet,
    ItemRecorded,
    ItemsRemoved,
    SessionForked,
    SessionRewound,
    ErasureRecorded,
)
"""The catalogue in declaration order."""

__all__ = [
    "EVENT_TYPES",
    "AssistantMessage",
    "ErasureRecorded",
    "Event",
    "HistoryTrimmed",
    "ItemRecorded",
    "ItemsRemoved",
    "KnowledgeCaptured",
    "LedgerEvent",
    "MediaAttached",
    "MemoryForgotten",
    "MemoryRecalled",
    "MemorySource",
    "MemoryStored",
    "MemorySuperseded",
    "ModelCalled",
    "NonEmpty",
    "NonNegative",
    "PromptAssembled",
    "PromptSection",
    "RecallRef",
    "SessionForked",
    "SessionOpened",
    "SessionRewound",
    "Sha256Hex",
    "SystemPromptSet",
    "ToolCallRecord",
    "ToolResultProvenance",
    "ToolResultRecorded",
    "TurnCompleted",
    "TurnFailed",
    "TurnFailureKind",
    "TurnOrigin",
    "TurnStarted",
    "tag_of",
    "text_digest",
]
