"""The OpenAI Agents SDK's session on the ledger: ``TurnledgerSession``.

One line::

    session = TurnledgerSession("user_42", "turnledger.db")
    await Runner.run(agent, "hello", session=session)

A session is the ledger stream of agent ``openai-agents`` (or ``agent=``) and
session key ``session_id``; items become typed events and come back exactly
(:mod:`turnledger.adapters.openai_agents.items`). ``pop_item`` and
``clear_session`` append an ``items.removed`` event: the items leave the history
(this session's and the history projection's), the ledger keeps them. Every call
is async and durable when it returns (appends are group-committed with other
sessions on the same ledger). The session keeps its items folded in memory and
advances them with what it appends; ``get_items`` first checks the stream's head
(on a local SQLite ledger one indexed lookup on the event loop's thread, else a
read in a worker thread) and reads only events it has not folded yet. Several
instances, in several processes, may share one session: an append made on a stale
view is refused by the stream version, re-read and retried.

A session sees items only: the instructions and the model calls' ``Usage`` are
recorded when the run is given the session's hooks
(``Runner.run(agent, text, session=session, hooks=session.run_hooks())``):
each model call's system prompt as ``system_prompt.set`` (once per change) and
its usage as ``model.called`` (priced with ``pricing=``), durable when the hook
returns (see :mod:`turnledger.adapters.openai_agents.hooks`). Without the hooks
neither is recorded.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final
from weakref import WeakKeyDictionary

from agents.memory import SessionABC
from agents.memory.session_settings import (
    SessionSettings,
    coerce_session_settings,
    resolve_session_limit,
)

from turnledger.adapters._ledger import (
    LedgerHandle,
    LedgerTarget,
    finish_despite_cancel,
)
from turnledger.adapters._usage import Instructions, model_called
from turnledger.adapters.openai_agents.fold import (
    Folded,
    FoldedItem,
    Versioned,
    fold_items,
)
from turnledger.adapters.openai_agents.items import (
    FRAMEWORK,
    Recording,
    decode_item,
    is_call,
    is_output,
    normalize,
    record_items,
)
from turnledger.ledger.errors import ConcurrencyError
from turnledger.ledger.events import (
    AssistantMessage,
    Event,
    ItemsRemoved,
    SessionOpened,
    TurnStarted,
)
from turnledger.ledger.ids import session_stream_id
from turnledger.policies.pricing import ModelPrice

if TYPE_CHECKING:
    from agents.items import ModelResponse, TResponseInputItem

    from turnledger.adapters.openai_agents.hooks import LedgerRunHooks

DEFAULT_AGENT: Final = "openai-agents"
"""The agent alias sessions are recorded under unless ``agent=`` says otherwise."""

_RETRIES: Final = 16


class TurnledgerSession(SessionABC):
    """A ``Session`` of the OpenAI Agents SDK stored in the turnledger ledger.

    Args:
        session_id: The session key (not empty).
        ledger: The ledger: a path or URL (default ``./turnledger.db``), an
            ``EventStore`` or an ``AsyncLedger``.
        agent: The agent alias the session is recorded under.
        session_settings: Default settings (``limit``) for ``get_items``.
        pricing: The rate sheet model calls are priced with (the ``[pricing]``
            table, e.g. ``load_config().pricing``; a model it does not name
            costs 0).

    Raises:
        ValueError: ``session_id`` or ``agent`` is empty.
    """

    def __init__(
        self,
        session_id: str,
        ledger: LedgerTarget = None,
        *,
        agent: str = DEFAULT_AGENT,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        pricing: Mapping[str, ModelPrice] | None = None,
    ) -> None:
        if not session_id or not agent:
            msg = (
                "Expected a non-empty session id and agent, "
                f"found {session_id!r} and {agent!r}"
            )
            raise ValueError(msg)
        self.session_id = session_id
        self.agent = agent
        self.session_settings = (
            coerce_session_settings(session_settings)
            if session_settings is not None
            else SessionSettings()
        )
        self.stream_id = session_stream_id(agent, session_id)
        self.pricing = dict(pricing or {})
        self._instructions = Instructions()
        self._handle = LedgerHandle(ledger)
        self._version = 0
        self._items: list[FoldedItem] = []
        self._tool_names: dict[str, str] = {}
        self._turn = "t0"
        self._closed = False
        self._locks: WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            WeakKeyDictionary()
        )
        self._locks_guard = threading.Lock()

    def _check_open(self) -> None:
        if self._closed:
            msg = "TurnledgerSession is closed"
            raise RuntimeError(msg)

    async def _refresh(self) -> None:
        """Fold what was appended to the stream since this instance last looked.

        When the stream's head can be read at once and is the version already
        folded, nothing is read.
        """
        self._check_open()
        head = self._handle.head(self.stream_id)
        if head is not None and head <= self._version:
            return
        new = await self._handle.read_stream(self.stream_id, after=self._version)
        if new:
            self._fold(new)

    def _fold(self, events: Sequence[Folded]) -> None:
        """Fold events not folded yet (a read and a write may both bring them)."""
        new = [e for e in events if e.version > self._version]
        if not new:
            return
        fold_items(self._items, new, self._tool_names)
        for record in new:
            if isinstance(record.event, TurnStarted):
                self._turn = record.event.turn_id
            self._instructions.see(record.event)
        self._version = new[-1].version

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """Return the session's items, oldest first.

        Args:
            limit: The latest ``limit`` items (default ``session_settings.limit``;
                ``None`` or a negative number: all). When the limit cuts the
                history, a tool output whose call is not before it among them is
                left out (it may then hold fewer than ``limit`` items), so a
                limited history never hands the model an output without its call.
        """
        await self._refresh()
        count = resolve_session_limit(limit, self.session_settings)
        chosen = self._items
        if count is not None and count >= 0:
            chosen = chosen[-count:] if count else []
        items = [decode_item(i.data) for i in chosen]
        if count is not None and count >= 0 and len(chosen) < len(self._items):
            items = _without_cut_outputs(items)
        return items  # type: ignore[return-value]

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append items; durable when this returns.

        Raises:
            ItemError: An item is not a JSON object.
        """
        self._check_open()
        if not items:
            return
        normalized = [normalize(item) for item in items]
        await finish_despite_cancel(self._write(lambda: self._recording(normalized)))

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove the most recent item and return it (``None`` when empty).

        The removal is an ``items.removed`` event over the events that recorded
        the item; items recorded by the same event (an assistant message and its
        other calls) are recorded again after it.
        """
        popped: list[Any] = []

        def events() -> list[Event]:
            popped.clear()
            if not self._items:
                return []
            last = self._items[-1]
            siblings = [i for i in self._items if i.version == last.version]
            popped.append(decode_item(last.data))
            removal: list[Event] = [
                ItemsRemoved(
                    first_version=last.version,
                    last_version=last.last_version,
                    framework=FRAMEWORK,
                    reason="pop_item",
                )
            ]
            again = [decode_item(i.data) for i in siblings[:-1]]
            return removal + self._record(again, offset=1)

        await finish_despite_cancel(self._write(events, fresh=True))
        return popped[0] if popped else None

    async def clear_session(self) -> None:
        """Remove every item (one ``items.removed`` event; the ledger keeps them)."""

        def events() -> list[Event]:
            if not self._items:
                return []
            return [
                ItemsRemoved(
                    first_version=1,
                    last_version=self._version,
                    framework=FRAMEWORK,
                    reason="clear_session",
                )
            ]

        await finish_despite_cancel(self._write(events, fresh=True))

    def run_hooks(self) -> LedgerRunHooks:
        """The run hooks recording the instructions and model calls in this session."""
        from turnledger.adapters.openai_agents.hooks import (  # noqa: PLC0415
            LedgerRunHooks,
        )

        return LedgerRunHooks(self._record_instructions, self._record_response)

    async def _record_instructions(self, text: str) -> None:
        """Append ``system_prompt.set`` when ``text`` is not the one in effect."""

        def events() -> list[Event]:
            current = Instructions(self._instructions.digest)
            return [*self._opening(), *current.change(text, turn_id=self._turn)]

        await finish_despite_cancel(self._write(events, fresh=True))

    async def _record_response(
        self, model: str | None, response: ModelResponse
    ) -> None:
        """Append the ``model.called`` of a model response."""
        usage = response.usage

        def events() -> list[Event]:
            call = model_called(
                turn_id=self._turn,
                provider=FRAMEWORK,
                model=model,
                pricing=self.pricing,
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cached_input_tokens=usage.input_tokens_details.cached_tokens,
                reasoning_tokens=usage.output_tokens_details.reasoning_tokens,
            )
            return [*self._opening(), call]

        await finish_despite_cancel(self._write(events, fresh=True))

    def _record(self, items: list[dict[str, Any]], offset: int = 0) -> list[Event]:
        return self._recording(items, offset).events

    def _recording(self, items: list[dict[str, Any]], offset: int = 0) -> Recording:
        """The events recording ``items`` after the current view (opening first)."""
        opening = self._opening()
        recording = record_items(
            items,
            turn_id=self._turn,
            first_version=self._version + len(opening) + offset + 1,
            tool_names=dict(self._tool_names),
        )
        if not opening:
            return recording
        placed = [(a + 1, b + 1, data) for a, b, data in recording.placed]
        return Recording([*opening, *recording.events], recording.turn_id, placed)

    def _opening(self) -> list[Event]:
        if self._version:
            return []
        return [
            SessionOpened(
                agent=self.agent, session_key=self.session_id, channel=FRAMEWORK
            )
        ]

    async def _write(self, build: Any, *, fresh: bool = False) -> None:
        """Append what ``build`` returns, retrying on a conflict.

        ``build`` returns the events, or a :class:`Recording` (the items it
        records are then folded as they are, not mapped back from the events).
        The append expects the version this instance last saw: when another
        writer moved the stream on, it is refused, the view is refreshed and
        ``build`` runs again on it. With ``fresh`` (``build`` decides on the
        current items: a pop, a clear) the view is refreshed first.

        Callers run it to its end even when cancelled (see
        :func:`~turnledger.adapters._ledger.finish_despite_cancel`).
        """
        async with self._loop_lock():
            self._check_open()
            if fresh:
                await self._refresh()
            attempted = self._version
            for _ in range(_RETRIES):
                built: list[Event] | Recording = build()
                events = built.events if isinstance(built, Recording) else built
                if not events:
                    return
                attempted = self._version
                try:
                    result = await self._handle.ledger.append(
                        self.stream_id, events, expected_version=attempted
                    )
                except ConcurrencyError:
                    await self._refresh()
                    continue
                first = result.first_version
                if isinstance(built, Recording):
                    self._fold_recording(first, built)
                else:
                    self._fold([Versioned(first + i, e) for i, e in enumerate(events)])
                return
        head = await self._handle.ledger.stream_version(self.stream_id)
        raise ConcurrencyError(self.stream_id, attempted, head)

    def _fold_recording(self, first: int, recording: Recording) -> None:
        """Fold this instance's own append at ``first`` from its recording.

        A read may have folded the append already (it is then skipped whole: an
        append commits all its events or none).
        """
        if first <= self._version:
            return
        self._items.extend(
            FoldedItem(first + a, first + b, data) for a, b, data in recording.placed
        )
        for event in recording.events:
            if isinstance(event, TurnStarted):
                self._turn = event.turn_id
            elif isinstance(event, AssistantMessage):
                for call in event.tool_calls:
                    self._tool_names[call.id] = call.name
        self._version = first + len(recording.events) - 1

    def _loop_lock(self) -> asyncio.Lock:
        """The lock serializing this instance's writes on the running loop."""
        loop = asyncio.get_running_loop()
        with self._locks_guard:
            lock = self._locks.get(loop)
            if lock is None:
                lock = self._locks[loop] = asyncio.Lock()
        return lock

    def close(self) -> None:
        """Stop using the ledger (the last session on a shared ledger closes it)."""
        self._closed = True
        self._handle.release()

    async def aclose(self) -> None:
        """:meth:`close`, from async code, off the event loop."""
        self._closed = True
        await asyncio.to_thread(self._handle.release)


def _without_cut_outputs(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Drop each output whose call does not come before it."""
    seen: set[object] = set()
    kept = []
    for item in items:
        if is_call(item):
            seen.add(item["call_id"])
        elif is_output(item) and item["call_id"] not in seen:
            continue
        kept.append(item)
    return kept
