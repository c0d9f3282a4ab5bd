"""Fork and rewind from the web UI (``--allow-writes`` only), and fork lineage."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from uuid import UUID

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


def _event_count(page: str) -> int:
    found = re.search(r'<dd id="event-count">(\d+)</dd>', page)
    assert found, page[:2000]
    return int(found.group(1))


def test_a_forks_pages_show_its_source_prefix(tmp_path: Path):
    """A fork's session page, timeline JSON and scrubber follow its lineage.

    The page lists the source's events up to the fork point (marked as the
    source prefix) and then the fork's own, numbered through the lineage; the
    scrubber at the fork point shows the source's history there; a new event of
    the fork (a rewind) is added after them, the prefix still shown.
    """
    recorded = small_ledger(tmp_path)
    sid = recorded.sessions["demo"]
    process, address = start_server(recorded, "--allow-writes")
    base = f"http://127.0.0.1:{address['port']}/"
    try:
        with open_store(recorded.db) as store:
            source = store.read_stream(sid)
        turns = [
            r.event.turn_id for r in source if type(r.event).__name__ == "TurnStarted"
        ]
        first_input = next(
            r.event.user_input
            for r in source
            if type(r.event).__name__ == "TurnStarted"
        )
        forked = _post(base, f"sessions/{sid}/fork", f"at={turns[1]}&as=what-if")
        assert forked.status_code == 303, forked.text
        fork_stream = forked.headers["location"].rsplit("/", 1)[1]
        with open_store(recorded.db) as store:
            (fork,) = store.read_stream(UUID(fork_stream))
        assert isinstance(fork.event, SessionForked)
        inherited = fork.event.source_version
        assert 0 < inherited < len(source)

        page = httpx.get(f"{base}sessions/{fork_stream}").text
        assert _event_count(page) == inherited + 1
        assert page.count('class="badge source-prefix"') == inherited
        assert f'<a href="/sessions/{sid}">{sid}</a>' in page  # the source, linked
        assert first_input in page  # the source's first turn, on the fork's page
        for version in range(1, inherited + 2):
            assert f'id="v{version}"' in page
        timeline = httpx.get(f"{base}api/sessions/{fork_stream}/events?after=0").json()
        assert [e["version"] for e in timeline["events"]] == list(
            range(1, inherited + 2)
        )
        assert timeline["head"] == inherited + 1
        source_types = [
            e["type"]
            for e in httpx.get(f"{base}api/sessions/{sid}/events?after=0").json()[
                "events"
            ][:inherited]
        ]
        assert [e["type"] for e in timeline["events"][:inherited]] == source_types
        assert timeline["events"][-1]["type"] == "session.forked"

        at_fork = httpx.get(
            f"{base}api/sessions/{fork_stream}/at?index={inherited - 1}"
        ).json()
        at_source = httpx.get(
            f"{base}api/sessions/{sid}/at?index={inherited - 1}"
        ).json()
        assert at_fork["position"] == at_source["position"]
        assert at_fork["messages"] == at_source["messages"]
        assert at_fork["messages"]  # the source's history up to the fork point

        rewound = _post(
            base, f"sessions/{fork_stream}/rewind", f"to={turns[0]}&memory=keep"
        )
        assert rewound.status_code == 303, rewound.text
        again = httpx.get(f"{base}sessions/{fork_stream}").text
        assert _event_count(again) == inherited + 2
        assert again.count('class="badge source-prefix"') == inherited
        newer = httpx.get(
            f"{base}api/sessions/{fork_stream}/events?after={inherited + 1}"
        ).json()
        assert [(e["version"], e["type"]) for e in newer["events"]] == [
            (inherited + 2, "session.rewound")
        ]
        listing = httpx.get(base).text
        assert re.search(rf'href="/sessions/{sid}">fork</a> at position \d+', listing)
    finally:
        stop_server(process)
