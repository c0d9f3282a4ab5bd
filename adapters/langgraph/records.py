"""How the saver writes a checkpoint, a task's writes or a removal as ledger events.

A checkpoint record (``item.recorded``) holds what changed since its parent; it is
built as a dict and written in the compact form of
:mod:`turnledger.adapters.langgraph.format` (kinds ``cp`` and ``wr``); see
:mod:`turnledger.adapters.langgraph.state` for how it folds back. New messages of
the messages channel become typed events, each once: a message object already
recorded (by a write or an earlier checkpoint) is referred to by the version of
its event. A removal is an ``items.removed`` event (a whole thread's checkpoints
and writes) or an ``item.recorded`` event of kind ``removed`` (the checkpoints it
names, their writes with them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from langchain_core.messages import AIMessage, BaseMessage
from langgraph.checkpoint.base import WRITES_IDX_MAP, Checkpoint
from langgraph.checkpoint.serde.base import SerializerProtocol

from turnledger.adapters._usage import model_called
from turnledger.adapters.langgraph.codec import (
    Blob,
    TurnCursor,
    dump_blob,
    encode_json,
    message_event,
    residual_of,
)
from turnledger.adapters.langgraph.format import (
    KIND_OF,
    built,
    compact,
    metadata_delta,
)
from turnledger.adapters.langgraph.header import (
    DEFAULT_V,
    encode_ts,
    encode_updated,
)
from turnledger.adapters.langgraph.state import (
    FRAMEWORK,
    StoredCheckpoint,
    ThreadState,
    Version,
)
from turnledger.ledger.events import (
    Event,
    ItemRecorded,
    ItemsRemoved,
    ModelCalled,
    SessionRewound,
    TurnCompleted,
)
from turnledger.policies.pricing import ModelPrice

KNOWN_KEYS: Final = frozenset(
    {"v", "id", "ts", "channel_values", "channel_versions", "versions_seen"}
    | {"updated_channels"}
)
"""Checkpoint keys the record models; any other key is kept as a blob."""

Events = list[Event]
Built = tuple[Events, dict[int, BaseMessage]]
"""What an encoder returns: the events to append, and the message objects (by the
version of their event) the fold keeps."""
Spec = list[Any]
Specs = list[Spec]


class RecordEncoder:
    """Encodes checkpoints and writes against a thread's fold.

    Args:
        serde: LangGraph's serializer for values no typed event models.
        messages_channel: The root-namespace channel whose messages are events.
        pricing: The rate sheet the model calls are priced with.
    """

    def __init__(
        self,
        serde: SerializerProtocol,
        messages_channel: str,
        pricing: Mapping[str, ModelPrice] | None = None,
    ) -> None:
        self.serde = serde
        self.messages_channel = messages_channel
        self.pricing = dict(pricing or {})

    def checkpoint(
        self,
        state: ThreadState,
        *,
        ns: str,
        parent_id: str | None,
        checkpoint: Checkpoint,
        md: dict[str, Any],
        new_versions: dict[str, Version],
    ) -> Built:
        """Encode a checkpoint as what changed since its parent."""
        parent = state.live(ns, parent_id) if parent_id else None
        cursor = state.cursor.copy()
        events: Events = []
        own: dict[int, BaseMessage] = {}
        values = checkpoint["channel_values"]
        head = state.order.get("")
        if ns == "" and parent_id is not None and head and head[-1] != parent_id:
            for rewound in self.branch(state, parent_id):
                events.append(rewound)
                cursor.resume(state.shown_at(rewound.to_version))
        vals: Specs = []
        versions = dict(checkpoint["channel_versions"])
        for channel, version in new_versions.items():
            if channel not in values:
                vals.append([channel, ["e"], version])
                continue
            spec = self.value_spec(state, ns, parent, channel, values[channel])
            if spec[0] in ("m", "s"):
                refs = self.message_refs(
                    state, spec[2], cursor, events, own, in_order=spec[0] == "s"
                )
                spec = [*spec[:2], refs, *spec[3:]]
                if spec[0] == "s":
                    spec.append(self.messages_channel)
            vals.append([channel, spec, version])
        seen = {k: dict(v) for k, v in checkpoint["versions_seen"].items()}
        record: dict[str, Any] = {
            "id": checkpoint["id"],
            "p": state.ref_checkpoint(ns, parent_id),
            "ts": encode_ts(checkpoint["id"], checkpoint["ts"]),
            "u": encode_updated(checkpoint.get("updated_channels"), vals),
            "md": _metadata(self.serde, parent, md),
            "vals": vals,
        }
        if checkpoint["v"] != DEFAULT_V:
            record["v"] = checkpoint["v"]
        if ns:
            record["ns"] = ns
        _add_versions(record, parent, versions, seen, new_versions)
        extra = {k: v for k, v in checkpoint.items() if k not in KNOWN_KEYS}
        if extra:
            record["x"] = dump_blob(self.serde, extra)
        events.append(_item(state, cursor.turn_id, "checkpoint", record))
        return events, own

    def branch(self, state: ThreadState, parent_id: str) -> list[SessionRewound]:
        """A fork's ``session.rewound`` to where its parent was recorded.

        A root checkpoint written from a parent that is not the thread's latest
        starts a branch: the history goes back to what it was when the parent
        was recorded (the messages of the parent's branch, a branch left
        earlier coming back as a redo), and the branch's new messages follow.
        The saver's own checkpoints and writes are untouched. Nothing when the
        parent is not stored here.
        """
        at = state.recorded_at.get(("", parent_id))
        if at is None:
            return []
        return [SessionRewound(to_version=at)]

    def model_call(self, message: AIMessage, turn_id: str) -> list[Event]:
        """``[model.called]`` of an AI message carrying ``usage_metadata``, else ``[]``.

        The model is ``response_metadata``'s ``model_name`` (OpenAI) or
        ``model`` (Anthropic, Ollama...), the provider its ``model_provider``.
        """
        usage = message.usage_metadata
        if not usage:
            return []
        meta = message.response_metadata or {}
        model = meta.get("model_name") or meta.get("model")
        provider = meta.get("model_provider")
        read = dict(usage.get("input_token_details") or {})
        written = dict(usage.get("output_token_details") or {})
        call: ModelCalled = model_called(
            turn_id=turn_id,
            provider=provider if isinstance(provider, str) else FRAMEWORK,
            model=model if isinstance(model, str) else None,
            pricing=self.pricing,
            input_tokens=usage.get("input_tokens", 0),
            output_tokens=usage.get("output_tokens", 0),
            cached_input_tokens=read.get("cache_read", 0),
            cache_write_tokens=read.get("cache_creation", 0),
            reasoning_tokens=written.get("reasoning", 0),
        )
        return [call]

    def value_spec(
        self,
        state: ThreadState,
        ns: str,
        parent: StoredCheckpoint | None,
        channel: str,
        value: Any,
    ) -> Spec:
        """How to store a channel's new value: full, or the items added to a list."""
        is_messages = (
            ns == ""
            and channel == self.messages_channel
            and isinstance(value, list)
            and all(isinstance(m, BaseMessage) for m in value)
        )
        base_version = None if parent is None else parent.versions.get(channel)
        if isinstance(value, list) and base_version is not None:
            base = state.value(ns, channel, base_version, self.serde)
            if isinstance(base, list) and extends(value, base):
                added = value[len(base) :]
                if is_messages:
                    return ["m", base_version, added]
                return ["a", base_version, dump_blob(self.serde, added)]
        if is_messages:
            return ["m", None, value]
        if ns == "" and isinstance(value, dict):
            held = self.typed_messages(
                ns, self.messages_channel, value.get(self.messages_channel)
            )
            if held is not None:  # an input such as {"messages": [HumanMessage]}
                rest = {k: v for k, v in value.items() if k != self.messages_channel}
                single = isinstance(value[self.messages_channel], BaseMessage)
                return ["s", dump_blob(self.serde, rest), held, single]
        blob = dump_blob(self.serde, value)
        return ["n"] if blob == NULL else ["b", blob]

    def message_refs(
        self,
        state: ThreadState,
        added: Sequence[BaseMessage],
        cursor: TurnCursor,
        events: Events,
        own: dict[int, BaseMessage],
        *,
        in_order: bool = False,
    ) -> Specs:
        """Refer to messages as typed events, recording the new ones."""
        refs: Specs = []
        for message in added:
            at = state.recorded_version(message)
            if at is None:
                at = next((v for v, m in own.items() if m is message), None)
            if at is not None:  # already an event: refer to it
                known = state.typed.get(at)
                if known is None:
                    known = events[at - state.next_version]
                residual = residual_of(message, known)
                if residual is None:
                    refs.append(dump_blob(self.serde, message))
                else:
                    own[at] = message  # the fold keeps this very object
                    refs.append([at, residual])
                continue
            # Writes can be saved out of order: a write's message becomes an event
            # only if it comes next in the conversation (else its checkpoint
            # records it, in the state's order).
            fits = not in_order or cursor.comes_next(message)
            event = message_event(message, cursor) if fits else None
            residual = None if event is None else residual_of(message, event)
            if event is None or residual is None:
                refs.append(dump_blob(self.serde, message))
                continue
            if isinstance(message, AIMessage):
                events.extend(self.model_call(message, cursor.turn_id))
            at = state.next_version + len(events)
            events.append(event)
            cursor.observe(event)
            own[at] = message
            refs.append([at, residual])
            if isinstance(message, AIMessage) and not message.tool_calls:
                events.append(
                    TurnCompleted(
                        turn_id=cursor.turn_id, iterations=cursor.assistant_messages
                    )
                )
        return refs

    def writes(
        self,
        state: ThreadState,
        *,
        ns: str,
        checkpoint_id: str,
        task_id: str,
        task_path: str,
        writes: Sequence[tuple[str, Any]],
    ) -> Built:
        """Encode a task's pending writes (those already stored are left out)."""
        stored = state.writes.get((ns, checkpoint_id), {})
        entries: Specs = []
        events: Events = []
        own: dict[int, BaseMessage] = {}
        cursor = state.cursor.copy()
        for idx, (channel, value) in enumerate(writes):
            at = WRITES_IDX_MAP.get(channel, idx)
            if at >= 0 and (task_id, at) in stored:
                continue
            messages = self.typed_messages(ns, channel, value)
            if messages is None:
                entries.append([at, channel, _short(dump_blob(self.serde, value))])
                continue
            refs = self.message_refs(
                state, messages, cursor, events, own, in_order=True
            )
            single = isinstance(value, BaseMessage)
            entries.append([at, channel, None, refs, single])
        if not entries:
            return [], {}
        record = {
            "c": state.ref_checkpoint(ns, checkpoint_id),
            "t": task_id,
            "p": task_path,
            "w": entries,
        }
        if ns:
            record["ns"] = ns
        event = _item(state, state.cursor.turn_id, "writes", record)
        return [*events, event], own

    def typed_messages(
        self,
        ns: str,
        channel: str,
        value: Any,
    ) -> list[BaseMessage] | None:
        """The messages of a write the typed events record, if it is one."""
        if ns or channel != self.messages_channel:
            return None
        if isinstance(value, BaseMessage):
            return [value]
        if isinstance(value, list) and all(isinstance(m, BaseMessage) for m in value):
            return value
        return None


def thread_removal(state: ThreadState) -> Built:
    """The removal of a thread's checkpoints and writes (``delete_thread``).

    One ``items.removed`` event over the thread's live events; nothing when the
    thread holds no checkpoint and no write.
    """
    if not state.has_checkpoints() and not state.writes:
        return [], {}
    removed = ItemsRemoved(
        first_version=state.live_from,
        last_version=state.head,
        framework=FRAMEWORK,
        reason="delete_thread",
    )
    return [removed], {}


def checkpoints_removal(
    state: ThreadState, doomed: Callable[[StoredCheckpoint], bool]
) -> Built:
    """The removal of the thread's checkpoints ``doomed`` picks (their writes too).

    One ``item.recorded`` event of kind ``removed`` naming them by namespace;
    nothing when ``doomed`` picks none.
    """
    picked = {
        ns: [i for i, c in by_id.items() if doomed(c)]
        for ns, by_id in state.checkpoints.items()
    }
    ids = {ns: found for ns, found in picked.items() if found}
    if not ids:
        return [], {}
    event = ItemRecorded(
        turn_id=state.cursor.turn_id,
        framework=FRAMEWORK,
        kind="removed",
        fields=encode_json({"ids": ids}),
        typed=False,
    )
    return [event], {}


def _item(
    state: ThreadState, turn_id: str, kind: str, record: dict[str, Any]
) -> ItemRecorded:
    """A record as the event the saver appends: in the compact form."""
    data = compact(kind, record, state.table)
    event = ItemRecorded(
        turn_id=turn_id,
        framework=FRAMEWORK,
        kind=KIND_OF[kind],
        fields=encode_json(data),
        typed=False,
    )
    built(event, record, data)
    return event


def _add_versions(
    record: dict[str, Any],
    parent: StoredCheckpoint | None,
    versions: dict[str, Version],
    seen: dict[str, dict[str, Version]],
    new_versions: dict[str, Version],
) -> None:
    """Put a checkpoint's versions in its record: what differs from the parent's.

    Without ``cv`` the changed versions are the values' (each value entry carries
    its version); with it, a value at the version ``cv`` lists carries none.
    """
    if parent is not None:
        changed = {k: v for k, v in versions.items() if parent.versions.get(k) != v}
        record |= {
            "d": 1,
            "vs": {k: v for k, v in seen.items() if parent.seen.get(k) != v},
        }
        if changed != new_versions:
            record["cv"] = changed
        if dropped := [k for k in parent.versions if k not in versions]:
            record["cvd"] = dropped
        if dropped := [k for k in parent.seen if k not in seen]:
            record["vsd"] = dropped
    else:
        record |= {"cv": versions, "vs": seen}
    if "cv" in record:
        for entry in record["vals"]:
            if versions.get(entry[0]) == entry[2]:
                del entry[2]


NULL: Final = ["null", ""]
"""The serializer's blob of ``None``, recorded as ``0`` in writes and ``["n"]``."""


def _short(blob: Blob) -> Blob | int:
    return 0 if blob == NULL else blob


def _metadata(
    serde: SerializerProtocol, parent: StoredCheckpoint | None, md: dict[str, Any]
) -> Blob | int | dict[str, Any]:
    """The metadata's blob, or how it follows the parent's (``metadata_delta``)."""
    delta = metadata_delta(None if parent is None else parent.metadata, md)
    return dump_blob(serde, md) if delta is None else delta


def extends(value: Sequence[Any], base: Sequence[Any]) -> bool:
    """Whether ``value`` starts with every item of ``base``."""
    if len(value) < len(base):
        return False
    try:
        return all(a is b or a == b for a, b in zip(value, base, strict=False))
    except Exception:  # noqa: BLE001 - a value whose == raises is simply not an extension
        return False
