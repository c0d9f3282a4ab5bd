"""Fork and rewind from the web UI (``--allow-writes`` only), and fork lineage."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import httpx

from tests.web.conftest import Recorded, start_server, stop_server
from turnledger.ledger.events import SessionForked, SessionRewound
from turnledger.ledger.store import open_store
from turnledger.pipeline.sessions import list_sessions

CLI = [sys.executable, "-m", "turnledger.pipeline.cli"]


def small_ledger(tmp_path: Path) -> Recorded:
    """A ledger holding the demo session, recorded by the real engine."""
    db = str(tmp_path / "turnledger.db")
    config = tmp_path / "turnledger.toml"
    config.write_text("")
    done = subprocess.run(
        [*CLI, "--db", db, "--config", str(config), "demo"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    with open_store(db) as store:
        (demo,) = list_sessions(store)
    return Recorded(
        root=tmp_path, db=db, config=config, sessions={"demo": demo.stream_id}
    )


def _post(base: str, path: str, body: str) -> httpx.Response:
    return httpx.post(
        f"{base}{path}",
        content=body,
        headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "Origin": base.rstrip("/"),
        },
    )


def test_fork_and_rewind_from_the_session_page(tmp_path: Path):
    """A fork is one event and its lineage is shown; a rewind is one event."""
    recorded = small_ledger(tmp_path)
    sid = recorded.sessions["demo"]
    process, address = start_server(recorded, "--allow-writes")
    base = f"http://127.0.0.1:{address['port']}/"
    try:
        page = httpx.get(f"{base}sessions/{sid}").text
        assert 'action="/sessions/' in page
        assert 'class="fork"' in page
        with open_store(recorded.db) as store:
            turns = [
                r.event.turn_id
                for r in store.read_stream(sid)
                if type(r.event).__name__ == "TurnStarted"
            ]
            before = store.max_position()
        forked = _post(base, f"sessions/{sid}/fork", f"at={turns[1]}&as=what-if")
        assert forked.status_code == 303, forked.text
        fork_stream = forked.headers["location"].rsplit("/", 1)[1]
        with open_store(recorded.db) as store:
            written = store.read_all(after=before)
            assert [type(r.event) for r in written] == [SessionForked]
        listing = httpx.get(base).text
        assert re.search(rf'href="/sessions/{sid}">fork</a> at position \d+', listing)
        rewound = _post(
            base, f"sessions/{fork_stream}/rewind", f"to={turns[0]}&memory=keep"
        )
        assert rewound.status_code == 303, rewound.text
        with open_store(recorded.db) as store:
            last = store.read_all(after=before)[-1]
            assert isinstance(last.event, SessionRewound)
            assert str(last.stream_id) == fork_stream
        bad = _post(base, f"sessions/{sid}/fork", "at=no-such-turn")
        assert bad.status_code == 400
        assert "no-such-turn" in bad.text
    finally:
        stop_server(process)


def test_fork_and_rewind_need_allow_writes(tmp_path: Path):
    """Without --allow-writes the forms are absent and the actions refused."""
    recorded = small_ledger(tmp_path)
    sid = recorded.sessions["demo"]
    process, address = start_server(recorded)
    base = f"http://127.0.0.1:{address['port']}/"
    try:
        assert 'class="fork"' not in httpx.get(f"{base}sessions/{sid}").text
        with open_store(recorded.db) as store:
            before = store.max_position()
        for path, body in (
            (f"sessions/{sid}/fork", "at=1"),
            (f"sessions/{sid}/rewind", "to=1"),
        ):
            assert _post(base, path, body).status_code == 403
        cross = httpx.post(
            f"{base}sessions/{sid}/fork",
            content="at=1",
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        assert cross.status_code == 403
        with open_store(recorded.db) as store:
            assert store.max_position() == before
    finally:
        stop_server(process)
