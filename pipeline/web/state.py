"""What every request of the web UI shares: settings, caches, memory, templates."""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import wraps
from pathlib import Path
from typing import Any, Final, ParamSpec, TypeVar

import jinja2
from markupsafe import Markup, escape

from turnledger.ledger.store import EventStore
from turnledger.pipeline.config import Config
from turnledger.pipeline.memory import MemoryService
from turnledger.pipeline.web.queries import SessionCache, anchor
from turnledger.policies.scrubbing import scrub_text
from turnledger.policies.structured_scrubbing import scrub_json_text

HERE: Final = Path(__file__).resolve().parent

LEDGER_READERS: Final = 8
"""Requests that read the ledger at once; the rest wait their turn.

The ledger's connection pools hold 10 (PostgreSQL) to 15 (SQLite) connections
and give up after a few seconds; the server's thread pool runs 40 requests at
once, so without this gate a burst of requests could time out on the pool.
"""

R = TypeVar("R")
P = ParamSpec("P")


@dataclass(frozen=True)
class WebSettings:
    """What the app serves and how.

    Attributes:
        store: The ledger (opened and closed by the caller).
        config: The configuration (memory backends, budgets).
        ledger_url: Where the ledger is (memory files live beside it).
        allow_writes: Whether export and ``memory forget`` are offered.
        token: The access token ("" for none: loopback only).
        host: The address bound.
    """

    store: EventStore
    config: Config
    ledger_url: str
    allow_writes: bool = False
    token: str = ""
    host: str = "127.0.0.1"


_TRUNCATION: Final = re.compile(r"\[\.\.\. \d+ characters truncated \.\.\.\]")


def marked(text: str) -> Markup:
    """Escape ``text`` and highlight each bounding notice in it (``<mark>``)."""
    parts: list[str] = []
    last = 0
    for found in _TRUNCATION.finditer(text):
        parts.append(escape(text[last : found.start()]))
        parts.append(f'<mark class="truncation">{escape(found.group())}</mark>')
        last = found.end()
    parts.append(escape(text[last:]))
    return Markup("".join(parts))  # noqa: S704 - every piece was escaped above


def _money(value: float) -> str:
    return f"${value:.6f}"


def environment() -> jinja2.Environment:
    """The template environment: every ``{{ }}`` is HTML-escaped."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["scrub"] = lambda text: scrub_text(str(text or ""))
    env.filters["scrub_json"] = lambda text: scrub_json_text(str(text or ""))
    env.filters["money"] = _money
    env.filters["marked"] = marked
    env.filters["short"] = lambda digest: str(digest)[:12]
    env.globals["anchor"] = anchor
    return env


class WebState:
    """Shared by the requests of one app.

    Args:
        settings: What the app serves.
    """

    def __init__(self, settings: WebSettings) -> None:
        self.settings = settings
        self.store = settings.store
        self.cache = SessionCache(settings.store)
        self.templates = environment()
        self._memory_lock = threading.Lock()
        self._memory: MemoryService | None = None
        self.readers = threading.BoundedSemaphore(LEDGER_READERS)
        self._pages_lock = threading.Lock()
        self._pages: OrderedDict[tuple[Any, ...], str] = OrderedDict()

    @contextmanager
    def memory(self) -> Iterator[MemoryService]:
        """The memory service ``turnledger memory`` uses, one caller at a time."""
        with self._memory_lock:
            if self._memory is None:
                self._memory = MemoryService(
                    self.store,
                    self.settings.config,
                    ledger_url=self.settings.ledger_url,
                )
            yield self._memory

    def render(self, name: str, **context: Any) -> str:
        """Render a template with the shared context."""
        template = self.templates.get_template(name)
        return template.render(allow_writes=self.settings.allow_writes, **context)

    def cached_page(self, key: tuple[Any, ...], build: Callable[[], str]) -> str:
        """A rendered page by key (keys include the ledger version they show)."""
        with self._pages_lock:
            hit = self._pages.get(key)
            if hit is not None:
                self._pages.move_to_end(key)
                return hit
        page = build()
        with self._pages_lock:
            self._pages[key] = page
            while len(self._pages) > 128:
                self._pages.popitem(last=False)
        return page

    def gated(self, function: Callable[P, R]) -> Callable[P, R]:
        """``function``, run only while one of the :data:`LEDGER_READERS` is free."""

        @wraps(function)
        def run(*args: P.args, **kwargs: P.kwargs) -> R:
            with self.readers:
                return function(*args, **kwargs)

        return run

    def close(self) -> None:
        """Close the memory service."""
        with self._memory_lock:
            if self._memory is not None:
                self._memory.close()
                self._memory = None
