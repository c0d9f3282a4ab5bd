"""The composition root: one place that builds the runtime from a configuration.

Every entry point (the CLI, the demo, the benchmarks, the tests, the README's
Python example) gets its engine here, so the ledger, the views, the memory
service, the tools and the strategy are wired one way (cosmicpython's
``bootstrap``)::

    async with bootstrap(Config(ledger="example.db"), provider=provider) as runtime:
        outcome = await runtime.engine.run_turn("ops", "s1", "hello")

Closing the runtime catches the session-history view up (so the next process
opens its sessions from snapshots), then closes the memory stores, the writer
and the ledger, in that order.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Final, Self

from turnledger.ledger.aio import AsyncLedger
from turnledger.ledger.file_keys import cipher_key_of
from turnledger.ledger.location import SQLITE_SCHEME
from turnledger.ledger.store import EventStore, open_store
from turnledger.pipeline.config import Config
from turnledger.pipeline.engine import DEFAULT_SYSTEM_PROMPT, TurnEngine
from turnledger.pipeline.media import MediaStore
from turnledger.pipeline.memory import MemoryService
from turnledger.pipeline.memory.strategy import strategy_for
from turnledger.pipeline.providers.base import Provider
from turnledger.pipeline.telemetry import export_run
from turnledger.pipeline.tools.base import Tool
from turnledger.pipeline.tools.registry import default_tools
from turnledger.projections.history import SESSION_HISTORY
from turnledger.projections.queries import SessionHistories
from turnledger.projections.runner import ProjectionRunner
from turnledger.projections.views import SQLiteViewStore, ViewStore, bind_views

VIEWS_ENV: Final = "TURNLEDGER_VIEWS"
"""The environment variable naming the view store."""

_POSTGRES: Final = ("postgresql://", "postgres://")


def views_location(config: Config, ledger_url: str, chosen: str | None = None) -> str:
    """Return where a ledger's views live.

    ``chosen`` (e.g. ``--views``), else ``$TURNLEDGER_VIEWS``, else the
    configuration's ``views`` key, else the PostgreSQL ledger itself, else a
    ``.views.db`` file beside a SQLite ledger.
    """
    picked = chosen or os.environ.get(VIEWS_ENV) or config.views
    if picked:
        return picked
    if ledger_url.startswith(_POSTGRES):
        return ledger_url
    path = Path(ledger_url.removeprefix(SQLITE_SCHEME))
    return str(path.with_name(path.stem + ".views.db"))


def open_view_store(where: str, *, cipher_key: str | None = None) -> ViewStore:
    """Open a view store: PostgreSQL for a URL, else a SQLite file.

    ``cipher_key`` (the ledger's: ``ledger.file_keys.cipher_key_of``; None reads
    ``TURNLEDGER_CIPHER_KEY``) encrypts a SQLite file (SQLCipher).
    """
    if where.startswith(_POSTGRES):
        # PostgreSQL support is an optional extra: import it only when used.
        from turnledger.projections.views.postgres import PostgresViewStore  # noqa: PLC0415

        return PostgresViewStore(where)
    return SQLiteViewStore(where, cipher_key=cipher_key)


class Runtime:
    """A wired runtime: the engine and what it stands on.

    Attributes:
        config: The configuration it was built from.
        store: The ledger.
        ledger: The async facade the engine appends through.
        views: The view store the runner keeps current.
        runner: The projection runner over ``views``.
        histories: The session-history query API (snapshot + tail).
        memory: The memory service.
        media: Attachment files under the data directory, bounded by
            ``[runtime] max_media_bytes``; ``attachment_event`` of what its
            ``load``/``ingest`` store is what ``engine.run_turn(...,
            attachments=...)`` takes.
        engine: The turn engine.
    """

    def __init__(
        self,
        *,
        config: Config,
        store: EventStore,
        ledger: AsyncLedger,
        views: ViewStore,
        memory: MemoryService,
        engine: TurnEngine,
        owns_store: bool,
        owns_ledger: bool = True,
        owns_memory: bool = True,
    ) -> None:
        self.config = config
        self.store = store
        self.ledger = ledger
        self.views = views
        self.runner = ProjectionRunner(store, views, [SESSION_HISTORY])
        self.histories = engine.sessions.histories
        self.memory = memory
        self.engine = engine
        self.media = MediaStore(
            config.data_dir, max_bytes=config.runtime.max_media_bytes
        )
        self._owns_store = owns_store
        self._owns_ledger = owns_ledger
        self._owns_memory = owns_memory
        self._closed = False
        self._started_at = store.max_position()  # telemetry exports what follows

    async def aclose(self) -> None:
        """Catch the history view up, then close memory, writer, views, ledger.

        A writer or memory service passed to :func:`bootstrap` is left open
        (its owner closes it).
        """
        if self._closed:
            return
        self._closed = True
        try:
            if self._owns_ledger:
                await self.ledger.aclose()
            await asyncio.to_thread(self.runner.catch_up)
            await asyncio.to_thread(
                export_run, self.store, self.config.telemetry, after=self._started_at
            )
        finally:
            if self._owns_memory:
                self.memory.close()
            self.views.close()
            if self._owns_store:
                self.store.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        _exc_type: type[BaseException] | None,
        _exc: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def bootstrap(
    config: Config,
    *,
    provider: Provider,
    store: EventStore | None = None,
    ledger_url: str | None = None,
    views: str | None = None,
    tools: Mapping[str, Tool] | None = None,
    system_prompt: str = DEFAULT_SYSTEM_PROMPT,
    consolidate_agent: str | None = None,
    ledger: AsyncLedger | None = None,
    memory: MemoryService | None = None,
) -> Runtime:
    """Build the runtime a configuration describes.

    Args:
        config: The configuration.
        provider: The model endpoint.
        store: An open ledger to use (default: open ``ledger_url``; the runtime
            then closes it).
        ledger_url: The ledger (default: the configuration's ``ledger``).
        views: Where views live (default: :func:`views_location`).
        tools: The tools (default: the built-in memory, knowledge and file tools).
        system_prompt: The system prompt the engine sends.
        consolidate_agent: Run this agent's memory strategy after each turn
            (one extra provider call per turn); ``None`` runs none.
        ledger: The async writer to append through, over ``store`` (default:
            a new one). Tests pass one that injects faults, or share one
            between runtimes; the caller closes it.
        memory: The memory service to use, over ``store`` (default: a new one
            for ``config``); runtimes with different configurations share
            one this way. The caller closes it.

    Returns:
        The runtime; use it as an async context manager, or ``await aclose()``.
    """
    url = ledger_url or config.ledger_url()
    owns_store = store is None
    ledger_store = (
        store
        if store is not None
        else open_store(url, erasable=True if config.privacy.erasable else None)
    )
    try:  # a view file refused (another key, in clear...): the ledger closed
        view_store = open_view_store(
            views_location(config, url, views), cipher_key=cipher_key_of(ledger_store)
        )
    except BaseException:
        if owns_store:
            ledger_store.close()
        raise
    try:
        bind_views(view_store, ledger_store)  # another ledger's views: emptied
    except BaseException:
        view_store.close()
        if owns_store:
            ledger_store.close()
        raise
    service = (
        memory
        if memory is not None
        else MemoryService(
            ledger_store, config, ledger_url=url, shredding=config.memory.shredding
        )
    )
    strategy = (
        strategy_for(consolidate_agent, service, provider)
        if consolidate_agent is not None
        else None
    )
    writer = (
        ledger if ledger is not None else AsyncLedger(ledger_store, close_store=False)
    )
    engine = TurnEngine(
        ledger=writer,
        provider=provider,
        memory=service,
        tools=default_tools() if tools is None else tools,
        config=config,
        system_prompt=system_prompt,
        strategy=strategy,
        histories=SessionHistories(ledger_store, view_store),
    )
    return Runtime(
        config=config,
        store=ledger_store,
        ledger=writer,
        views=view_store,
        memory=service,
        engine=engine,
        owns_store=owns_store,
        owns_ledger=ledger is None,
        owns_memory=memory is None,
    )
