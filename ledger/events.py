"""The event catalogue: every fact the ledger records, as a typed msgspec Struct.

Rules (house style R2-R4):

- Events are frozen, keyword-only, tagged Structs. The tag (``type`` field) is an
  explicit, stable string, never the class name: it is what the ledger stores, so a
  class may be renamed or moved without touching stored data.
- Each type carries ``SCHEMA_VERSION``. Changes are additive (new fields get
  defaults); a breaking change bumps the version and registers a pure upcaster in
  :mod:`ledger.codec`, so old rows still decode.
- Events carry no stream id, version, position or clock: that is the envelope
  (:class:`ledger.envelope.Recorded`), written by the store.
- Events never carry raw media bytes or the assembled prompt: media is referenced by
  digest, the prompt by per-section sizes and digests. The one exception is the
  system (or developer) instructions, which are data: :class:`SystemPromptSet`
  records their text and digest once per change, so a session can be exported and
  replayed as it was sent.
"""

from __future__ import annotations

import hashlib
from typing import Annotated, ClassVar, Literal, TypeAlias

import msgspec

NonNegative = Annotated[int, msgspec.Meta(ge=0)]
"""A count that cannot be negative."""

NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]
"""An identifier that cannot be empty."""

Sha256Hex = Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{64}$")]
"""A lowercase hex SHA-256 digest."""

TurnOrigin: TypeAlias = Literal[
    "interactive", "channel", "agent_direct", "cron", "daemon", "sub_turn"
]
"""Where a turn came from; recall, autosave and consolidation branch on it."""

MemorySource: TypeAlias = Literal[
    "tool", "autosave", "consolidation", "import", "cli", "governance"
]
"""What wrote a memory entry."""

ToolResultProvenance: TypeAlias = Literal["executed", "synthesized", "imported"]
"""Where a tool result came from: a real run, the pairing repair, or an import."""

TurnFailureKind: TypeAlias = Literal[
    "error",
    "interrupted",
    "iteration_limit",
    "provider_error",
    "cancelled",
    "budget_exceeded",
]
"""Why a turn did not complete."""


class Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", gc=False):
    """Base of every ledger event. Not recorded itself."""

    SCHEMA_VERSION: ClassVar[int] = 1


class SessionOpened(Event, tag="session.opened", frozen=True, kw_only=True, gc=False):
    """A session stream begins (first event of every session stream)."""

    agent: NonEmpty
    session_key: NonEmpty
    channel: str = ""
    workspace: str | None = None


class TurnStarted(Event, tag="turn.started", frozen=True, kw_only=True, gc=False):
    """A turn begins with the user's input."""

    turn_id: NonEmpty
    origin: TurnOrigin
    user_input: str
    attachments: tuple[Sha256Hex, ...] = ()


class RecallRef(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A reference to one recalled memory entry (never its content)."""

    key: str
    entry_id: str = ""
    score: float | None = None
    agent: str = ""


class MemoryRecalled(Event, tag="memory.recalled", frozen=True, kw_only=True, gc=False):
    """Memory was searched for a turn; only references and a scrubbed summary."""

    turn_id: NonEmpty
    backend: str
    entries: tuple[RecallRef, ...] = ()
    query_summary: str = ""
    injected_chars: NonNegative = 0


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

    turn_id: NonEmpty
    text: str = ""
    tool_calls: tuple[ToolCallRecord, ...] = ()
    iteration: NonNegative = 0


class ToolResultRecorded(
    Event, tag="tool_result.recorded", frozen=True, kw_only=True, gc=False
):
    """The bounded result of one tool call."""

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

    turn_id: NonEmpty
    file_name: str
    mime: str
    kind: Literal["image", "audio", "video", "document", "unknown"]
    size_bytes: NonNegative
    sha256: Sha256Hex
    storage_ref: str | None = None
    summary: str | None = None


class MemoryStored(Event, tag="memory.stored", frozen=True, kw_only=True, gc=False):
    """A long-term memory entry was written (upsert per agent and key)."""

    agent: NonEmpty
    key: NonEmpty
    content: str
    category: str = "core"
    session: str | None = None
    namespace: str = "default"
    importance: Annotated[float, msgspec.Meta(ge=0.0, le=1.0)] | None = None
    source: MemorySource = "tool"
    entry_id: str = ""


class MemoryForgotten(
    Event, tag="memory.forgotten", frozen=True, kw_only=True, gc=False
):
    """A long-term memory entry was deleted."""

    agent: NonEmpty
    key: NonEmpty
    session: str | None = None
    source: MemorySource = "tool"
    reason: str = ""


class MemorySuperseded(
    Event, tag="memory.superseded", frozen=True, kw_only=True, gc=False
):
    """A memory entry was replaced by a newer, conflicting one."""

    agent: NonEmpty
    key: NonEmpty
    superseded_by: NonEmpty
    source: MemorySource = "consolidation"
    reason: str = ""


class KnowledgeCaptured(
    Event, tag="knowledge.captured", frozen=True, kw_only=True, gc=False
):
    """An explicit (subject, relation, object) triple."""

    agent: NonEmpty
    subject: NonEmpty
    relation: NonEmpty
    object: NonEmpty
    provenance: str = ""


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

    turn_id: NonEmpty
    iterations: NonNegative = 1
    duration_ms: Annotated[float, msgspec.Meta(ge=0.0)] = 0.0


class TurnFailed(Event, tag="turn.failed", frozen=True, kw_only=True, gc=False):
    """A turn ended without a final answer."""

    turn_id: NonEmpty
    kind: TurnFailureKind = "error"
    error: str = ""


class ItemRecorded(Event, tag="item.recorded", frozen=True, kw_only=True, gc=False):
    """A framework item's fields that no typed event models, kept verbatim.

    Written by the framework adapters (``turnledger.adapters``): right after the
    typed event carrying the item's modelled part (``typed``), or alone when no
    typed event models the item (a reasoning item, a state-only event). The typed
    event and this one give the item back exactly.
    """

    turn_id: NonEmpty
    framework: NonEmpty
    kind: str = ""
    fields: str = "{}"
    typed: bool = True


class ItemsRemoved(Event, tag="items.removed", frozen=True, kw_only=True, gc=False):
    """A framework removed items from a session's history; the ledger keeps them.

    The history projection drops what the events with versions in
    ``[first_version, last_version]`` of this stream put there (the OpenAI Agents
    SDK's ``pop_item`` and ``clear_session``, for instance).
    """

    first_version: NonNegative
    last_version: NonNegative
    framework: str = ""
    reason: str = ""


class SessionForked(Event, tag="session.forked", frozen=True, kw_only=True, gc=False):
    """A session begins as a fork of another session's prefix (its first event).

    Nothing of the source is copied: readers compose the source's events up to
    ``source_version`` with this stream's own
    (:class:`turnledger.projections.queries.SessionHistories`). Versions of the
    fork's history are counted through the prefix: this stream's version ``v``
    stands at ``base_version + v``.

    Attributes:
        agent: The fork's agent.
        session_key: The fork's session key.
        source_stream: The source session's stream id.
        source_version: The last version of the source stream in the fork.
        source_position: The global position of that event.
        base_version: The history version of the prefix's last event.
        channel: The fork's channel.
    """

    agent: NonEmpty
    session_key: NonEmpty
    source_stream: NonEmpty
    source_version: NonNegative
    source_position: NonNegative = 0
    base_version: NonNegative = 0
    channel: str = ""


class SessionRewound(Event, tag="session.rewound", frozen=True, kw_only=True, gc=False):
    """The session's history goes back to what it was at ``to_version``.

    Messages after that history version are no longer provider-visible from here
    on; the ledger keeps them, and a later rewind to a version before this event
    brings them back (redo). Trims applied since stay applied.

    Attributes:
        to_version: The history version rewound to.
        to_position: The global position it was asked as.
        turns: The ids of the turns rewound.
        memory_rule: What happened to their long-term memory writes.
        superseded: The memory keys superseded by that rule.
    """

    to_version: NonNegative
    to_position: NonNegative = 0
    turns: tuple[str, ...] = ()
    memory_rule: Literal["keep", "supersede"] = "keep"
    superseded: tuple[str, ...] = ()


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
)
"""The catalogue in declaration order."""


def tag_of(event_type: type[Event]) -> str:
    """Return the stable tag stored for an event type."""
    tag = event_type.__struct_config__.tag
    if not isinstance(tag, str):
        msg = f"Expected {event_type.__name__} to have a string tag, found {tag!r}"
        raise TypeError(msg)
    return tag
