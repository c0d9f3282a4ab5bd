"""The web UI's fixtures: one recorded ledger, `turnledger serve` processes, Chromium.

The ledger is recorded once per test session by the real engine (the demo, a
10,000+ event session, the XSS, crash-repair and orphan-result sessions). Servers
are real ``turnledger serve`` processes on free ports; the browser is Debian's
chromium driven by Playwright (never a downloaded browser).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from uuid import UUID

import pytest
import structlog

from tests.web.recorded import record_everything
from turnledger.ledger.store import open_store

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "test-output" / "web"
LONG_TURNS = 1_000
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
]


@dataclass
class Recorded:
    root: Path
    db: str
    config: Path
    sessions: dict[str, UUID]


@pytest.fixture(scope="session")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    root = tmp_path_factory.mktemp("web-ledger")
    db = str(root / "turnledger.db")
    config = root / "turnledger.toml"
    config.write_text("[budgets]\nenabled = true\ndaily_limit_usd = 0.05\n")
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING)
    )
    try:
        with open_store(db) as store, ThreadPoolExecutor(1) as worker:
            # A thread of its own: the engine runs asyncio, and Playwright's sync
            # API may already hold an event loop in this one.
            sessions = worker.submit(
                record_everything, store, root, db, turns=LONG_TURNS
            ).result()
    finally:
        structlog.reset_defaults()
    return Recorded(root=root, db=db, config=config, sessions=sessions)


def start_server(
    recorded: Recorded, *flags: str, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[str], dict]:
    """Start `turnledger serve --port 0 --json FLAGS`; return it and its address."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "turnledger.pipeline.cli",
            "--db",
            recorded.db,
            "--config",
            str(recorded.config),
            "serve",
            "--port",
            "0",
            "--json",
            *flags,
        ],
        cwd=recorded.root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line:
        process.kill()
        _, err = process.communicate()
        pytest.fail(f"turnledger serve did not start: {err[-2000:]}")
    return process, json.loads(line)


def stop_server(process: subprocess.Popen[str]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            stream.close()


@pytest.fixture(scope="session")
def server(recorded: Recorded) -> Iterator[str]:
    """A server with --allow-writes; yields its base URL (ending in /)."""
    process, address = start_server(recorded, "--allow-writes")
    yield address["url"]
    stop_server(process)


@pytest.fixture(scope="session")
def read_only_server(recorded: Recorded) -> Iterator[str]:
    """A server without --allow-writes."""
    process, address = start_server(recorded)
    yield address["url"]
    stop_server(process)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    # Module scope: Playwright's sync API keeps an event loop running in this
    # thread while it is open, so it must close before any later test module
    # calls asyncio.run (a session-scoped browser broke them).
    sync_api = pytest.importorskip("playwright.sync_api")
    executable = shutil.which("chromium")
    if executable is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(
                "chromium must be installed under CI=true (apt-get install chromium)"
            )
        pytest.skip("no chromium on PATH")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=executable, headless=True, args=CHROMIUM_ARGS
        )
        yield launched
        launched.close()


@dataclass
class Watched:
    """A page and what it reported: console errors, page errors, dialogs."""

    page: object
    errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)

    def shot(self, name: str) -> Path:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=False)
        return path


@pytest.fixture
def page(browser) -> Iterator[Watched]:
    # bypass_csp: the tests prove escaping alone stops the payloads (the CSP
    # header, checked in test_serve_http, is a second wall), and Playwright's
    # wait_for_function evaluates strings, which the app's CSP forbids.
    context = browser.new_context(
        viewport={"width": 1280, "height": 900}, accept_downloads=True, bypass_csp=True
    )
    opened = context.new_page()
    watched = Watched(page=opened)
    opened.on(
        "console",
        lambda m: (
            watched.errors.append(f"console: {m.text}") if m.type == "error" else None
        ),
    )
    opened.on("pageerror", lambda e: watched.errors.append(f"pageerror: {e}"))

    def on_dialog(dialog) -> None:
        watched.dialogs.append(dialog.message)
        dialog.dismiss()

    opened.on("dialog", on_dialog)
    yield watched
    context.close()
