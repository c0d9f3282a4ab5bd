"""Pydantic AI's conversation store on the ledger: ``TurnledgerConversationStore``.

One line::

    store = TurnledgerConversationStore("turnledger.db")
    conversation = await store.load(cid) or Conversation(conversation_id=cid)
    await store.save(await agent.run("hello", conversation=conversation))

It implements the five primitives of ``pydantic_ai.conversation_store``
(pydantic-ai 2.68). A conversation is the ledger stream of agent ``pydantic-ai``
(or ``agent=``) and session key ``conversation_id``. Each stored entry is recorded
where the providers can read it (a user prompt as ``turn.started``, a response as
``model.called`` with its usage, priced with ``pricing=``, then
``assistant.message``, a tool return or retry as ``tool_result.recorded``, a
system prompt or instructions as ``system_prompt.set`` once per change), then
an ``item.recorded`` ``entry`` holding the entry verbatim (its id, parent and the
message as pydantic-ai serialises it). Each save appends an ``item.recorded``
``record`` (head, usage, branches, the ``revision`` token...) in the same
transaction as its entries, and only if the stream is still where the record it
replaces was read: a stale revision raises ``ConversationConflict`` and writes
nothing. A fork is one record pointing at the source's entries (no entry is
copied); a branch moves the head and takes the entries it leaves out of the
history projection (``items.removed``; a branch back to them moves the head, and
the store reads them again, but ``turnledger history`` no longer shows them);
``delete_record`` appends
``items.removed`` ``delete``: the conversation no longer loads or lists, and the
ledger keeps its entries (they are not erased).
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Mapping, Sequence
from typing import Final
from uuid import UUID

from pydantic import TypeAdapter
from pydantic_ai.conversation_store import (
    ConversationConflict,
    ConversationEntry,
    ConversationRecord,
    ConversationStore,
)

from turnledger.adapters._ledger import LedgerHandle, LedgerTarget
from turnledger.adapters._usage import Instructions
from turnledger.adapters.pydantic_ai.events import (
    ENTRY,
    FRAMEWORK,
    RECORD,
    ConversationFold,
    entry_events,
)
from turnledger.ledger.errors import ConcurrencyError
from turnledger.ledger.events import Event, ItemRecorded, ItemsRemoved, SessionOpened
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import EventStore
from turnledger.policies.pricing import ModelPrice

DEFAULT_AGENT: Final = "pydantic-ai"
"""The agent alias conversations are recorded under unless ``agent=`` says otherwise."""

_RECORD: Final = TypeAdapter(ConversationRecord)
_ENTRY: Final = TypeAdapter(ConversationEntry)


class TurnledgerConversationStore(ConversationStore):
    """A Pydantic AI ``ConversationStore`` in the turnledger ledger.

    Args:
        ledger: The ledger: a path or URL (default ``./turnledger.db``), an
            ``EventStore`` or an ``AsyncLedger``.
        agent: The agent alias conversations are recorded under.
        pricing: The rate sheet model calls are priced with (the ``[pricing]``
            table, e.g. ``load_config().pricing``; a model it does not name
            costs 0).
    """

    def __init__(
        self,
        ledger: LedgerTarget = None,
        *,
        agent: str = DEFAULT_AGENT,
        pricing: Mapping[str, ModelPrice] | None = None,
    ) -> None:
        if not agent:
            msg = "Expected a non-empty agent alias, found ''"
            raise ValueError(msg)
        self.agent = agent
        self.pricing = dict(pricing or {})
        self._handle = LedgerHandle(ledger)
        self._entries: dict[str, tuple[ConversationEntry, UUID, int]] = {}
        self._scanned = 0
        self._folds: dict[UUID, ConversationFold] = {}
        self._folds_lock = threading.Lock()

    @property
    def store(self) -> EventStore:
        """The ledger's store."""
        return self._handle.store

    def stream_of(self, conversation_id: str) -> UUID:
        """Return the ledger stream of a conversation."""
        if not conversation_id:
            msg = "Expected a non-empty conversation id, found ''"
            raise ValueError(msg)
        return session_stream_id(self.agent, conversation_id)

    async def read_record(self, conversation_id: str) -> ConversationRecord | None:
        """The conversation's current record, or ``None``."""
        fold = await asyncio.to_thread(self._fold, self.stream_of(conversation_id))
        return _RECORD.validate_json(fold.record) if fold.record else None

    async def read_records(
        self, *, scope: str | None = None, limit: int | None = None
    ) -> Sequence[ConversationRecord]:
        """The stored records (of ``scope``), newest ``updated_at`` first."""
        records = await asyncio.to_thread(self._records)
        chosen = [r for r in records if scope is None or r.scope == scope]
        chosen.sort(key=lambda r: r.updated_at, reverse=True)
        return chosen[:limit]

    def _records(self) -> list[ConversationRecord]:
        out = []
        for r in self.store.iter_all(types=[SessionOpened]):
            opened = r.event
            if isinstance(opened, SessionOpened) and opened.agent == self.agent:
                fold = self._fold(r.stream_id)
                if fold.record:
                    out.append(_RECORD.validate_json(fold.record))
        return out

    async def write_record(
        self,
        record: ConversationRecord,
        *,
        new_entries: Sequence[ConversationEntry] = (),
        expected_revision: str | None,
    ) -> None:
        """Store the record and its new entries together, or nothing on a conflict.

        Raises:
            ConversationConflict: The stored revision is not ``expected_revision``,
                or the head names an entry neither stored nor new.
        """
        await asyncio.to_thread(
            self._write, record, list(new_entries), expected_revision
        )

    def _write(
        self,
        record: ConversationRecord,
        new_entries: list[ConversationEntry],
        expected_revision: str | None,
    ) -> None:
        cid = record.conversation_id
        stream = self.stream_of(cid)
        fold = self._fold(stream)
        if fold.revision != expected_revision:
            raise ConversationConflict(cid)
        new_ids = {e.id for e in new_entries}
        if record.head_id is not None and record.head_id not in new_ids:
            try:
                self._entry(record.head_id)
            except LookupError:
                raise ConversationConflict(cid) from None
        events: list[Event] = []
        if fold.version == 0:
            events.append(
                SessionOpened(agent=self.agent, session_key=cid, channel=FRAMEWORK)
            )
        version = fold.version + len(events)
        instructions = Instructions(fold.instructions)
        for entry in new_entries:
            events.extend(
                entry_events(
                    entry,
                    version + 1,
                    instructions=instructions,
                    pricing=self.pricing,
                )
            )
            data = _ENTRY.dump_json(entry).decode()
            events.append(_item(ENTRY, data, f"t{version + 1}"))
            version = fold.version + len(events)
        events.extend(self._left(fold, record, new_entries, stream))
        events.append(_item(RECORD, _RECORD.dump_json(record).decode(), "record"))
        try:
            self.store.append(stream, events, expected_version=fold.version)
        except ConcurrencyError:
            raise ConversationConflict(cid) from None

    def _left(
        self,
        fold: ConversationFold,
        record: ConversationRecord,
        new_entries: list[ConversationEntry],
        stream: UUID,
    ) -> list[Event]:
        """``items.removed`` for this stream's entries the new head's history leaves."""
        if fold.head is None:
            return []
        kept = {e.id for e in new_entries}
        parents = {e.id: e.parent_id for e in new_entries}
        cursor = record.head_id
        while cursor is not None:
            kept.add(cursor)
            cursor = (
                parents[cursor] if cursor in parents else self._entry(cursor).parent_id
            )
        removed: list[Event] = []
        cursor = fold.head
        while cursor is not None and cursor not in kept:
            entry, where, first, last = self._located(cursor)
            if where == stream:
                removed.append(
                    ItemsRemoved(
                        first_version=first,
                        last_version=last,
                        framework=FRAMEWORK,
                        reason="branch",
                    )
                )
            cursor = entry.parent_id
        return removed[::-1]

    async def delete_record(
        self, conversation_id: str, *, expected_revision: str
    ) -> None:
        """Append ``items.removed`` ``delete``; the ledger keeps the entries.

        Raises:
            ConversationConflict: No record with ``expected_revision`` is stored.
        """
        await asyncio.to_thread(self._delete, conversation_id, expected_revision)

    def _delete(self, cid: str, expected_revision: str) -> None:
        stream = self.stream_of(cid)
        fold = self._fold(stream)
        if fold.record is None or fold.revision != expected_revision:
            raise ConversationConflict(cid)
        removal = ItemsRemoved(
            first_version=1,
            last_version=fold.version,
            framework=FRAMEWORK,
            reason="delete",
        )
        try:
            self.store.append(stream, [removal], expected_version=fold.version)
        except ConcurrencyError:
            raise ConversationConflict(cid) from None

    async def read_entry(self, entry_id: str) -> ConversationEntry:
        """The entry with this id (``LookupError`` when the ledger has none)."""
        return await asyncio.to_thread(self._entry, entry_id)

    async def read_history(
        self, head_id: str | None, *, limit: int | None = None
    ) -> list[ConversationEntry]:
        """The entries up to ``head_id`` (the last ``limit``), in one worker call."""
        return await asyncio.to_thread(self._history, head_id, limit)

    def _history(
        self, head_id: str | None, limit: int | None
    ) -> list[ConversationEntry]:
        entries: list[ConversationEntry] = []
        cursor = head_id
        while cursor is not None and (limit is None or len(entries) < limit):
            entry = self._entry(cursor)
            entries.append(entry)
            cursor = entry.parent_id
        entries.reverse()
        return entries

    def _entry(self, entry_id: str) -> ConversationEntry:
        return self._indexed(entry_id)[0]

    def _indexed(self, entry_id: str) -> tuple[ConversationEntry, UUID, int]:
        """An entry, its stream and the version of its entry event."""
        found = self._entries.get(entry_id)
        if found is None:
            self._scan()
            found = self._entries.get(entry_id)
        if found is None:
            msg = f"Expected entry {entry_id!r} in the ledger, found none"
            raise LookupError(msg)
        return found

    def _located(self, entry_id: str) -> tuple[ConversationEntry, UUID, int, int]:
        """An entry, its stream and the versions of the events recording it."""
        entry, stream, last = self._indexed(entry_id)
        first = last
        for r in self.store.read_stream(stream, after=max(0, last - 64), until=last)[
            ::-1
        ]:
            if r.version < last and isinstance(r.event, ItemRecorded):
                break
            first = r.version
        return entry, stream, first, last

    def _scan(self) -> None:
        """Index the entries recorded since the last scan (entries never change)."""
        for r in self.store.iter_all(after=self._scanned, types=[ItemRecorded]):
            event = r.event
            self._scanned = r.position
            if (
                isinstance(event, ItemRecorded)
                and event.framework == FRAMEWORK
                and event.kind == ENTRY
            ):
                entry = _ENTRY.validate_json(event.fields)
                self._entries[entry.id] = (entry, r.stream_id, r.version)

    def _fold(self, stream: UUID) -> ConversationFold:
        """The conversation's fold, caught up with the ledger (a copy of its own).

        The folds seen are kept: each call reads only the events after the last
        one folded (another process's too), not the whole stream.
        """
        with self._folds_lock:
            fold = dataclasses.replace(self._folds.get(stream) or ConversationFold())
        for r in self.store.read_stream(stream, after=fold.version):
            fold.apply(r)
        with self._folds_lock:
            known = self._folds.get(stream)
            if known is None or known.version < fold.version:
                self._folds[stream] = dataclasses.replace(fold)
        return fold

    def close(self) -> None:
        """Stop using the ledger (the last user of a shared ledger closes it)."""
        self._handle.release()


def _item(kind: str, data: str, turn_id: str) -> ItemRecorded:
    return ItemRecorded(
        turn_id=turn_id,
        framework=FRAMEWORK,
        kind=kind,
        fields=data,
        typed=kind == ENTRY,
    )
