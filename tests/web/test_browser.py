"""`turnledger serve` in a real Chromium: every page, the timeline's facts, the
scrubber, the live view, actions and the XSS payloads."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.web.recorded import AGENT, PAYLOAD, XSS
from turnledger.ledger.events import HistoryTrimmed, MemoryRecalled, ToolResultRecorded
from turnledger.ledger.store import open_store
from turnledger.pipeline.sessions import load_history
from turnledger.projections.costs import grand_total
from turnledger.projections.history.read import provider_messages
from turnledger.projections.queries import cost_records

pytestmark = pytest.mark.slow

LOAD_TIMEOUT = 30_000  # ms: generous, this is a wait, never a speed assertion


def visit(watched, url: str) -> None:
    watched.page.goto(url, wait_until="load", timeout=LOAD_TIMEOUT)


def settle_scrubber(watched) -> None:
    """Wait until the scrubber has shown its first position."""
    watched.page.wait_for_function(
        "document.getElementById('scrub-status') === null || "
        "document.getElementById('scrub-status').dataset.position !== undefined",
        timeout=LOAD_TIMEOUT,
    )


def events_of(recorded, name: str):
    with open_store(recorded.db) as store:
        return store.read_stream(recorded.sessions[name])


def test_every_page_loads_without_console_errors(recorded, server, page):
    s = recorded.sessions
    pages = {
        "sessions": "",
        "sessions-filtered": f"?agent={AGENT}&q=long",
        "timeline-demo": f"sessions/{s['demo']}",
        "timeline-long": f"sessions/{s['long']}",
        "timeline-long-page-3": f"sessions/{s['long']}?page=3",
        "timeline-orphan": f"sessions/{s['orphan']}",
        "timeline-crashed": f"sessions/{s['crashed']}",
        "memory": "memory?agent=demo&q=release",
        "costs": "costs",
    }
    for name, path in pages.items():
        visit(page, server + path)
        settle_scrubber(page)
        assert page.page.locator("h1").count() == 1, name
        page.shot(name)
        assert page.errors == [], (name, page.errors)
    assert page.dialogs == []


def test_timeline_shows_the_trim_the_bounded_result_and_the_recall(
    recorded, server, page
):
    events = [r.event for r in events_of(recorded, "demo")]
    trim = next(e for e in events if isinstance(e, HistoryTrimmed))
    bounded = next(
        e for e in events if isinstance(e, ToolResultRecorded) and e.truncated
    )
    recall = next(e for e in events if isinstance(e, MemoryRecalled) and e.entries)
    visit(page, f"{server}sessions/{recorded.sessions['demo']}")

    trim_text = page.page.locator(".badge.trim").first.inner_text()
    assert (
        f"dropped {trim.dropped_turns} turn(s), {trim.dropped_messages} message(s)"
        in trim_text
    )
    assert f"{trim.tokens_before} → {trim.tokens_after} tokens" in trim_text
    assert (
        page.page.locator(".step-history-trimmed .breadcrumb")
        .first.inner_text()
        .startswith("[earlier turns omitted")
    )

    bound_text = page.page.locator(".badge.bounded").first.inner_text()
    assert f"{bounded.original_chars} original, {bounded.kept_chars} kept" in bound_text
    marker = page.page.locator("mark.truncation").first
    assert marker.is_visible()
    assert re.fullmatch(
        r"\[\.\.\. \d+ characters truncated \.\.\.\]", marker.inner_text()
    )

    page.page.locator(".step-history-trimmed").first.scroll_into_view_if_needed()
    page.page.evaluate("window.scrollBy(0, -260)")
    page.shot("timeline-trim")  # docs/serve.png is a copy of this one

    link = page.page.locator("a.recall-link", has_text=recall.entries[0].key).first
    assert link.is_visible()
    link.click()
    page.page.wait_for_url(
        re.compile(r"/memory\?agent=demo#mem-"), timeout=LOAD_TIMEOUT
    )
    target = page.page.locator(":target")
    assert target.count() == 1
    assert target.locator(".key").inner_text() == recall.entries[0].key
    assert "The release is on Friday." in target.inner_text()
    assert page.errors == []


def test_scrubber_changes_the_visible_history(recorded, server, page):
    sid = recorded.sessions["demo"]
    events = events_of(recorded, "demo")
    visit(page, f"{server}sessions/{sid}")
    settle_scrubber(page)
    status = page.page.locator("#scrub-status")
    assert status.get_attribute("data-position") == str(events[-1].position)
    shown_at_end = page.page.locator("#scrub-history > li").count()

    index = 5
    page.page.locator("#scrubber").fill(str(index))
    page.page.wait_for_function(
        f"document.getElementById('scrub-status').dataset.position === '{events[index].position}'",
        timeout=LOAD_TIMEOUT,
    )
    with open_store(recorded.db) as store:
        expected = provider_messages(
            load_history(store, sid, at=events[index].position)
        )
        at_end = provider_messages(load_history(store, sid))
    assert shown_at_end == len(at_end)
    items = page.page.locator("#scrub-history > li")
    assert items.count() == len(expected) != len(at_end)
    for item, message in ((items.first, expected[0]), (items.last, expected[-1])):
        label = "trim" if message.kind == "breadcrumb" else message.role
        assert item.inner_text().startswith(label)
        if message.text:
            assert message.text.splitlines()[0] in item.inner_text()
    page.shot("scrubber-at-5")

    recall_index = next(
        i
        for i, r in enumerate(events)
        if isinstance(r.event, MemoryRecalled) and r.event.entries
    )
    before = events[recall_index - 1]
    page.page.locator("#scrubber").fill(str(recall_index - 1))
    page.page.wait_for_function(
        f"document.getElementById('scrub-status').dataset.position === '{before.position}'",
        timeout=LOAD_TIMEOUT,
    )
    upcoming = page.page.locator("#scrub-memory .next-recall").inner_text()
    assert f"the next turn ({events[recall_index].event.turn_id})" in upcoming
    assert events[recall_index].event.entries[0].key in upcoming
    assert page.errors == []


def test_live_view_shows_a_new_event(recorded, server, page):
    sid = recorded.sessions["crashed"]
    visit(page, f"{server}sessions/{sid}")
    assert page.page.locator("#live-events > li").count() == 0
    script = recorded.root / "live.toml"
    script.write_text(
        'model = "scripted-1"\n[[steps]]\ntext = "live and well"\n'
        "[steps.usage]\ninput_tokens = 1000\noutput_tokens = 100\n"
    )
    plain = recorded.root / "no-budgets.toml"  # the served config's budget is spent
    plain.write_text(
        '[pricing."scripted-1"]\ninput_per_million = 3.0\noutput_per_million = 15.0\n'
    )
    # `turnledger run` next to `serve`, as a user would run `chat` beside it.
    subprocess.run(
        [
            sys.executable,
            "-m",
            "turnledger.pipeline.cli",
            "--db",
            recorded.db,
            "--config",
            str(plain),
            "run",
            str(script),
            "--agent",
            AGENT,
            "--session",
            "crashed",
            "--turn",
            "are you live?",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=recorded.root,
    )
    # A wait for the event to appear (generous), not an assertion on speed.
    page.page.wait_for_selector("#live-events > li.live-event", timeout=LOAD_TIMEOUT)
    page.page.wait_for_function(
        "document.getElementById('live-events').innerText.includes('turn.completed')",
        timeout=LOAD_TIMEOUT,
    )
    text = page.page.locator("#live-events").inner_text()
    assert "turn.started" in text
    assert "assistant.message" in text
    page.shot("live")
    # The page folded onto its cached state equals the whole ledger's answer.
    with open_store(recorded.db) as store:
        costs = grand_total(cost_records(store, stream_id=sid))
        count = len(store.read_stream(sid))
    assert costs.cost_usd > 0
    visit(page, f"{server}sessions/{sid}")
    summary = page.page.locator(".summary").inner_text()
    assert f"${costs.cost_usd:.6f} over {costs.calls} call(s)" in summary
    assert page.page.locator("#event-count").inner_text() == str(count)
    assert page.errors == []


def test_xss_payloads_do_nothing(recorded, server, page):
    sid = recorded.sessions["xss"]
    for path in (
        f"sessions/{sid}",
        f"memory?agent={AGENT}",
        f"memory?agent={AGENT}&q=xss_note {PAYLOAD}",
        f"?q={PAYLOAD}",
    ):
        visit(page, server + path)
        settle_scrubber(page)
        p = page.page
        assert p.evaluate("typeof window.__xss") == "undefined", path
        assert p.locator("a#evil").count() == 0, path
        assert p.locator("img[src='x']").count() == 0, path
        assert p.locator("a[href^='javascript']").count() == 0, path
        assert p.locator("script:not([src])").count() == 0, path
    visit(page, f"{server}sessions/{sid}")
    settle_scrubber(page)
    text = page.page.locator("main").inner_text()
    for payload in XSS.values():
        assert payload in text  # shown as text: in user input, arguments, output
    assert page.page.locator(".tool-output", has_text=XSS["script"]).count() >= 1
    assert page.page.locator(".timeline .arguments", has_text="xss_note").count() == 1
    scrubbed = page.page.locator("#scrub-history").inner_text()
    assert XSS["onerror"] in scrubbed
    visit(page, f"{server}memory?agent={AGENT}")
    assert XSS["javascript"] in page.page.locator("main").inner_text()
    page.shot("xss")
    assert page.dialogs == []
    assert page.errors == []


def test_pairing_violation_and_crash_repair_are_marked(recorded, server, page):
    visit(page, f"{server}sessions/{recorded.sessions['orphan']}")
    violation = page.page.locator(".step.violation")
    assert violation.count() == 1
    assert "orphan_result ghost" in violation.locator(".badge.pairing").inner_text()
    visit(page, f"{server}sessions/{recorded.sessions['crashed']}")
    repairs = page.page.locator(".crash-repair")
    assert repairs.count() == 2  # the synthesized result and the interrupted turn
    assert "synthesized" in repairs.first.inner_text()
    visit(page, f"{server}?agent={AGENT}")
    rows = page.page.locator("table.sessions tbody tr")
    audit = {
        r.locator(".session-link").inner_text(): r.locator("td").nth(7).inner_text()
        for r in rows.all()
    }
    assert audit["orphan"] == "1 violation(s)"
    assert audit["long"] == "clean"
    assert page.errors == []


def test_a_long_session_is_paged(recorded, server, page):
    total = len(events_of(recorded, "long"))
    assert total >= 10_000
    visit(page, f"{server}sessions/{recorded.sessions['long']}")
    assert page.page.locator(".timeline .step").count() == 200
    pages = -(-total // 200)
    assert f"page 1 / {pages}" in page.page.locator(".pager").first.inner_text()
    page.page.locator(".pager a[rel=next]").first.click()
    page.page.wait_for_url(re.compile(r"page=2$"), timeout=LOAD_TIMEOUT)
    assert page.page.locator(".timeline .step").first.get_attribute("id") == "v201"
    assert page.errors == []


def test_costs_page_draws_the_chart_and_the_budget(recorded, server, page):
    visit(page, f"{server}costs")
    assert page.page.locator("#cost-chart rect.bar").count() >= 1
    assert page.page.locator("#budget-line").count() == 1
    assert "scripted-1" in page.page.locator("table[data-by=model]").inner_text()
    assert page.errors == []


def test_export_downloads_what_the_cli_exports(recorded, server, page):
    visit(page, f"{server}sessions/{recorded.sessions['demo']}")
    with page.page.expect_download(timeout=LOAD_TIMEOUT) as caught:
        page.page.locator("a.export", has_text="openai-chat").click()
    downloaded = json.loads(Path(caught.value.path()).read_text())
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "turnledger.pipeline.cli",
            "--db",
            recorded.db,
            "export",
            str(recorded.sessions["demo"]),
            "--format",
            "openai-chat",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=recorded.root,
    )
    assert downloaded == json.loads(done.stdout)


def test_forget_marks_the_entry_forgotten(recorded, server, page):
    visit(page, f"{server}memory?agent=demo")
    row = page.page.locator(
        "tr.memory-entry", has=page.page.locator(".key", has_text="editor")
    )
    assert row.locator(".content").inner_text() == "The user prefers the Helix editor."
    row.locator("button.forget").click()
    page.page.wait_for_selector("tr.memory-entry.forgotten", timeout=LOAD_TIMEOUT)
    row = page.page.locator("tr.memory-entry.forgotten")
    assert row.locator(".key").inner_text() == "editor"
    assert "forgotten" in row.inner_text()
    assert "Helix" not in row.inner_text()
    assert "forgotten at #" in row.locator(".provenance").inner_text()
    page.shot("memory-forgotten")
    assert page.errors == []


def test_without_allow_writes_no_action_is_offered(recorded, read_only_server, page):
    visit(page, f"{read_only_server}sessions/{recorded.sessions['demo']}")
    assert page.page.locator("a.export").count() == 0
    visit(page, f"{read_only_server}memory?agent=demo")
    assert page.page.locator("button.forget").count() == 0
    assert page.errors == []
