"""`turnledger serve` over real HTTP: the token, the Host check, headers, writes,
and the command line's refusals."""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest

from tests.web.conftest import start_server, stop_server

CLI = [sys.executable, "-m", "turnledger.pipeline.cli"]
ANY_ADDRESS = "0.0.0.0"  # noqa: S104 - binding every address is the case under test


@pytest.fixture(scope="module")
def guarded(recorded):
    """A server on every address, guarded by a token from the environment."""
    process, address = start_server(
        recorded,
        "--host",
        ANY_ADDRESS,
        env={"TURNLEDGER_SERVE_TOKEN": "s3cret-token"},
    )
    assert address["token_required"] is True
    yield f"http://127.0.0.1:{address['port']}/"
    stop_server(process)


def test_a_non_loopback_bind_without_a_token_is_refused(recorded):
    done = subprocess.run(
        [*CLI, "--db", recorded.db, "serve", "--host", ANY_ADDRESS, "--port", "0"],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "Expected --token (or $TURNLEDGER_SERVE_TOKEN)" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_port_in_use_is_a_clean_error(recorded, read_only_server):
    port = read_only_server.rsplit(":", 1)[1].strip("/")
    done = subprocess.run(
        [*CLI, "--db", recorded.db, "serve", "--port", port],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("turnledger: ")
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("path", ["", "costs", "static/app.js", "healthz"])
def test_every_request_needs_the_token(guarded, path):
    assert httpx.get(guarded + path).status_code == 401
    assert (
        httpx.get(guarded + path, headers={"Authorization": "Bearer wrong"}).status_code
        == 401
    )
    ok = httpx.get(guarded + path, headers={"Authorization": "Bearer s3cret-token"})
    assert ok.status_code == 200


def test_a_token_in_the_query_sets_a_cookie(guarded):
    with httpx.Client() as client:
        first = client.get(guarded + "?token=s3cret-token")
        assert first.status_code == 200
        assert "turnledger_token=s3cret-token" in first.headers["set-cookie"]
        assert "HttpOnly" in first.headers["set-cookie"]
        assert client.get(guarded + "costs").status_code == 200


def test_without_a_token_only_loopback_hosts_are_answered(read_only_server):
    assert httpx.get(read_only_server).status_code == 200
    rebound = httpx.get(read_only_server, headers={"Host": "evil.example:8765"})
    assert rebound.status_code == 421
    for host in ("localhost:8765", "[::1]:8765", "127.0.0.1"):
        assert httpx.get(read_only_server, headers={"Host": host}).status_code == 200
    assert (
        httpx.get(read_only_server, headers={"Host": "[::1].evil:80"}).status_code
        == 421
    )


def test_pages_carry_the_security_headers(read_only_server):
    answer = httpx.get(read_only_server)
    csp = answer.headers["content-security-policy"]
    assert "script-src 'self'" in csp
    assert "unsafe-inline" not in csp
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.headers["x-frame-options"] == "DENY"


def test_actions_are_refused_without_allow_writes(recorded, read_only_server):
    sid = recorded.sessions["demo"]
    export = httpx.get(f"{read_only_server}sessions/{sid}/export?format=anthropic")
    assert export.status_code == 403
    forget = httpx.post(
        f"{read_only_server}memory/forget",
        content="agent=demo&key=release_day",
        headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "Origin": read_only_server.rstrip("/"),
        },
    )
    assert forget.status_code == 403


def test_a_cross_site_forget_is_refused(recorded, server):
    forget = httpx.post(
        f"{server}memory/forget",
        content="agent=demo&key=release_day",
        headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "Origin": "http://evil.example",
        },
    )
    assert forget.status_code == 403
    page = httpx.get(f"{server}memory?agent=demo")
    assert "The release is on Friday." in page.text


def test_bad_paths_and_queries_are_answered_cleanly(server):
    assert httpx.get(server + "sessions/not-a-uuid").status_code == 404
    missing = "00000000-0000-0000-0000-000000000000"
    assert httpx.get(f"{server}sessions/{missing}").status_code == 404
    assert httpx.get(f"{server}api/sessions/{missing}/at?index=0").status_code == 404
    assert httpx.get(server + "?page=banana").status_code == 200
    for odd in ("\u00b2", "\u0663", "9" * 5_000):  # a digit to str.isdigit, not int
        assert httpx.get(server, params={"page": odd}).status_code == 200


def test_the_scrubber_api_reads_only_ascii_indexes(recorded, server):
    sid = recorded.sessions["demo"]
    at = f"{server}api/sessions/{sid}/at"
    for odd in ("\u00b2", "\u0663"):
        bad = httpx.get(at, params={"index": odd})
        assert bad.status_code == 400
        assert "Expected an index" in bad.json()["error"]
    last = httpx.get(at, params={"index": "9" * 5_000})
    assert last.status_code == 200
    assert last.json() == httpx.get(at, params={"index": "999999"}).json()
    assert (
        httpx.get(at, params={"index": "0003"}).json()
        == httpx.get(at, params={"index": "3"}).json()
    )
    events = f"{server}api/sessions/{sid}/events"
    assert httpx.get(events, params={"after": "\u00b2"}).status_code == 200


def test_the_scrubber_api_refuses_a_bad_index(recorded, server):
    sid = recorded.sessions["demo"]
    bad = httpx.get(f"{server}api/sessions/{sid}/at?index=-1")
    assert bad.status_code == 400
    assert "Expected an index" in bad.json()["error"]


def test_serves_a_postgresql_ledger(postgres_url, tmp_path, monkeypatch):
    # Memory files of a PostgreSQL ledger go to the working directory.
    monkeypatch.chdir(tmp_path)
    from tests.web.conftest import Recorded
    from turnledger.ledger.ids import session_stream_id

    config = tmp_path / "turnledger.toml"
    config.write_text("")
    subprocess.run(
        [*CLI, "--db", postgres_url, "--config", str(config), "demo"],
        capture_output=True,
        check=True,
        cwd=tmp_path,
        timeout=300,
    )
    stream = session_stream_id("demo", "demo-1")
    served = Recorded(root=tmp_path, db=postgres_url, config=config, sessions={})
    process, address = start_server(served)
    try:
        listing = httpx.get(address["url"])
        assert listing.status_code == 200
        assert f"/sessions/{stream}" in listing.text
        timeline = httpx.get(f"{address['url']}sessions/{stream}")
        assert timeline.status_code == 200
        assert "history.trimmed" in timeline.text
        assert "characters truncated" in timeline.text
        at = httpx.get(f"{address['url']}api/sessions/{stream}/at?index=3").json()
        assert at["index"] == 3
        assert at["messages"][0]["role"] == "user"
    finally:
        stop_server(process)


def test_a_non_ascii_token_offered_is_refused_not_a_crash(guarded):
    answer = httpx.get(guarded + "?token=%C3%A9t%C3%A9-s3cret")
    assert answer.status_code == 401
    bearer = httpx.get(
        guarded, headers={"Authorization": "Bearer \u00e9t\u00e9".encode()}
    )
    assert bearer.status_code == 401


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--token", "short"], "Expected a token of 8 to 512 printable ASCII"),
        (
            ["--token", "has a space in it"],
            "Expected a token of 8 to 512 printable ASCII",
        ),
        (["--port", "70000"], "Expected a port from 0 to 65535, found 70000"),
        (["--port", "-1"], "Expected a port from 0 to 65535, found -1"),
    ],
)
def test_unusable_serve_flags_exit_2_with_one_line(recorded, flags, expected):
    done = subprocess.run(
        [*CLI, "--db", recorded.db, "serve", *flags],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert expected in done.stderr


def test_an_unusable_ledger_is_refused_before_serving(tmp_path):
    broken = tmp_path / "not-a-ledger.db"
    broken.write_bytes(b"this is not a SQLite database file at all" * 100)
    done = subprocess.run(
        [*CLI, "--db", str(broken), "serve", "--port", "0"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("turnledger: ")
    assert done.stderr.count("\n") == 1
    assert "Traceback" not in done.stderr
    assert done.stdout == ""  # nothing claimed to be serving
