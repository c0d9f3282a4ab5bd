"""Re-run a recorded session offline through the real engine, under other policies.

:func:`rerun_session` reads a session's recorded turns and drives the real
:class:`~turnledger.pipeline.engine.TurnEngine` (built by
:func:`~turnledger.pipeline.bootstrap.bootstrap`) over their user inputs into a
scratch SQLite ledger in a temporary directory (deleted after). The model and
the tools replay the recorded outputs (:mod:`.recorded`):
nothing reaches the network and no tool runs; a turn whose process died is
left open at the same call, and the next turn repairs it, as recorded.

A session's time travel is replayed as recorded: a fork is re-run as its
lineage (the source's turns up to the fork point in the source's session, then
the same ``session.forked`` event, then the fork's turns; forks of forks alike),
and a ``session.rewound`` event is appended where it was recorded, between the
same turns. The comparison covers every turn of the lineage.

Before each turn the agent's memory events recorded before that turn's start
are copied into the scratch ledger, so recall sees the memory as it was then
(autosave is off in the re-run: its recorded events are among those copied;
so are the ``memory.superseded`` events of a rewind). The recorded ledger is
only read. A session whose turns hold outputs without recorded model calls
(imported, or written by an adapter) is refused before anything runs
(:func:`~.recorded.check_rerunnable`). Results recorded bounded are rebounded
the way the export path does (never bounded twice). The per-turn comparison is in
:mod:`turnledger.pipeline.timetravel.rerun.diff`.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING
from uuid import UUID

import msgspec

from turnledger.ledger.events import (
    SessionForked,
    SessionOpened,
    SessionRewound,
    ToolResultRecorded,
    TurnFailed,
    TurnStarted,
)
from turnledger.ledger.ids import memory_stream_id
from turnledger.pipeline.bootstrap import Runtime, bootstrap
from turnledger.pipeline.config import Config
from turnledger.pipeline.config.sections import MemoryConfig
from turnledger.pipeline.timetravel.rerun.diff import (
    RerunReport,
    TurnFacts,
    compare,
    facts,
)
from turnledger.pipeline.timetravel.rerun.recorded import (
    NotRerunnableError,
    RecordedTurn,
    ReplayProvider,
    ReplayTool,
    RerunCrash,
    TurnCursor,
    check_rerunnable,
    recorded_turns,
    replay_tools,
)
from turnledger.policies.bounding import make_result_bounder
from turnledger.projections.lineage import Segment, lineage, segments

if TYPE_CHECKING:
    from turnledger.ledger.store import EventStore
    from turnledger.pipeline.sessions import SessionRef

__all__ = [
    "NotRerunnableError",
    "RecordedTurn",
    "ReplayProvider",
    "ReplayTool",
    "rerun_session",
]


def rerun_config(config: Config, data_dir: Path) -> Config:
    """``config``'s policies over a scratch data directory (no configured backends).

    Kept: ``[runtime]``, ``[recall]``, ``[pricing]``, ``[budgets]``. Left at
    their defaults: memory backends and agents (the scratch SQLite store),
    embeddings, telemetry; autosave and hygiene are off.
    """
    return Config(
        data_dir=str(data_dir),
        runtime=config.runtime,
        recall=config.recall,
        pricing=config.pricing,
        budgets=config.budgets,
        memory=MemoryConfig(autosave=False, hygiene_hours=0.0),
    )


def _copy_memory(
    store: EventStore, scratch: EventStore, agent: str, before: int, done: int
) -> int:
    """Copy the agent's memory events recorded before ``before``; return the count."""
    stream = memory_stream_id(agent)
    pending = [
        r.event for r in store.read_stream(stream, after=done) if r.position < before
    ]
    if pending:
        scratch.append(stream, pending, expected_version=done)
    return done + len(pending)


def _repairs(event: object) -> bool:
    """Whether an event is part of the repair of a turn that died."""
    if isinstance(event, TurnFailed):
        return event.kind == "interrupted"
    return isinstance(event, ToolResultRecorded) and event.provenance == "synthesized"


class _Replay:
    """The re-run's state across the lineage's segments."""

    def __init__(
        self,
        store: EventStore,
        runtime: Runtime,
        ref: SessionRef,
        turns: list[RecordedTurn],
    ) -> None:
        self.store = store
        self.runtime = runtime
        self.ref = ref
        self.index = {t.turn_id: i for i, t in enumerate(turns)}
        self.turns = turns
        self.copied = 0

    async def segment(
        self, segment: Segment, provider: ReplayProvider, cursor: TurnCursor
    ) -> None:
        """Re-run one stream's part of the lineage, its time travel included."""
        scratch = self.runtime.store
        stream = segment.stream_id
        agent, key, channel = self.ref.agent, self.ref.key, self.ref.channel
        for recorded in segment.events:
            event = recorded.event
            if isinstance(event, SessionForked):
                await asyncio.to_thread(self._fork, stream, event)
                agent, key, channel = event.agent, event.session_key, event.channel
            elif isinstance(event, SessionRewound):
                await asyncio.to_thread(self._append, stream, event)
            elif isinstance(event, TurnStarted) and event.turn_id in self.index:
                index = self.index[event.turn_id]
                turn = self.turns[index]
                self.copied = await asyncio.to_thread(
                    _copy_memory, self.store, scratch, agent, turn.position, self.copied
                )
                provider.begin(index)
                cursor.begin(index)
                # Died as recorded (RerunCrash): the turn stays open, the next
                # turn of the session repairs it.
                with contextlib.suppress(RerunCrash):
                    await self.runtime.engine.run_turn(
                        agent,
                        key,
                        event.user_input,
                        origin=event.origin,
                        channel=channel,
                        attachments=turn.media,
                    )
            elif _repairs(event):
                # The repair of a turn that died is made when the session is
                # next opened; a fork may cut the segment before its next turn.
                await self.runtime.engine.open_session(agent, key, channel=channel)
            elif isinstance(event, SessionOpened):
                # Opened as recorded (a fork may be made before its first turn).
                await asyncio.to_thread(self._append, stream, event)
                agent, key, channel = event.agent, event.session_key, event.channel

    def _append(self, stream: UUID, event: SessionOpened | SessionRewound) -> None:
        """Append a recorded opening or rewind where it was, between turns."""
        scratch = self.runtime.store
        scratch.append(stream, [event], expected_version=scratch.stream_version(stream))

    def _fork(self, stream: UUID, forked: SessionForked) -> None:
        """The same fork in the scratch ledger, at its source's re-run version."""
        scratch = self.runtime.store
        source = scratch.read_stream(
            UUID(forked.source_stream), after=forked.source_version - 1, limit=1
        )
        at = source[0].position if source else scratch.max_position()
        event = msgspec.structs.replace(forked, source_position=at)
        scratch.append(stream, [event], expected_version=0)


async def _drive(
    store: EventStore,
    ref: SessionRef,
    chain: list[Segment],
    config: Config,
    scratch: Path,
) -> tuple[list[TurnFacts], list[list[bool]]]:
    turns = recorded_turns([r for s in chain for r in s.events])
    provider = ReplayProvider(turns)
    cursor = TurnCursor(turns)
    url = str(scratch / "rerun.db")
    async with bootstrap(
        config, provider=provider, ledger_url=url, tools=replay_tools(turns, cursor)
    ) as runtime:
        # Recorded results may carry their bound already: rebound, never twice.
        runtime.engine.tools._bound = make_result_bounder(  # noqa: SLF001 - see above
            config.runtime.max_tool_result_chars, recorded=True
        )
        replay = _Replay(store, runtime, ref, turns)
        for segment in chain:
            await replay.segment(segment, provider, cursor)
        rerun = recorded_turns(lineage(runtime.store, ref.stream_id))
    # The engine picks new turn ids: turns correspond in lineage order.
    return [facts(t.events) for t in rerun], provider.pairing


def rerun_session(store: EventStore, ref: SessionRef, config: Config) -> RerunReport:
    """Re-run a recorded session's turns offline under ``config``'s policies.

    A fork re-runs its lineage (its source's turns up to the fork point first);
    recorded rewinds are replayed between the same turns.

    Args:
        store: The recorded ledger (only read).
        ref: The session.
        config: The policies (runtime limits, recall, pricing, budgets).

    Returns:
        The per-turn comparison of the recorded turns with the re-run.

    Raises:
        NotRerunnableError: A turn holds outputs without recorded model calls
            (an imported transcript, an adapter's session): nothing is re-run
            or compared.
    """
    chain = segments(store, ref.stream_id)
    turns = recorded_turns([r for s in chain for r in s.events])
    check_rerunnable(f"{ref.agent}/{ref.key}", ref.channel, turns)
    with tempfile.TemporaryDirectory(prefix="turnledger-rerun-") as tmp:
        scratch = Path(tmp)
        policies = rerun_config(config, scratch / "data")
        rerun, pairing = asyncio.run(_drive(store, ref, chain, policies, scratch))
    return compare(
        ref,
        recorded=[facts(t.events) for t in turns],
        turn_ids=[t.turn_id for t in turns],
        rerun=rerun,
        pairing=pairing,
        runtime=policies.runtime,
    )
