"""Properties of the web UI's pure helpers: escaping, the Host rule, filters."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st
from markupsafe import escape

from turnledger.pipeline.sessions import SessionRef
from turnledger.pipeline.web import is_loopback
from turnledger.pipeline.web.app import _host_name
from turnledger.pipeline.web.queries import anchor, filter_sessions
from turnledger.pipeline.web.state import marked
from turnledger.policies.bounding import truncation_notice

MARK = re.compile(r'<mark class="truncation">(.*?)</mark>')
texts = st.text(alphabet=st.characters(codec="utf-8"), max_size=200)


@given(parts=st.lists(st.tuples(texts, st.integers(0, 10**6)), max_size=4), tail=texts)
def test_marked_is_the_escaped_text_with_each_notice_highlighted(parts, tail):
    text = "".join(head + truncation_notice(n) for head, n in parts) + tail
    html = str(marked(text))
    assert MARK.sub(lambda m: m.group(1), html) == str(escape(text))
    assert len(MARK.findall(html)) >= len(parts)
    assert "<" not in MARK.sub("", html)  # no tag but our own marks


@given(texts)
def test_anchors_are_safe_ids(key):
    made = anchor("agent", key)
    assert re.fullmatch(r"mem-[0-9a-f]{16}", made)
    assert made == anchor("agent", key) != anchor("other", key)


@given(
    st.sampled_from(["127.0.0.1", "localhost", "::1", "127.8.9.10"]),
    st.integers(1, 65535),
)
def test_loopback_hosts_with_ports_are_loopback(host, port):
    header = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    assert is_loopback(_host_name(header))
    assert is_loopback(_host_name(header.rsplit(":", 1)[0]))


def test_rebinding_names_are_refused():
    for header in (
        "evil.example",
        "evil.example:8765",
        "[::1].evil:80",
        "127.0.0.1.nip.io:80",
        "localhost.evil",
    ):
        assert not is_loopback(_host_name(header)), header


refs = st.builds(
    SessionRef,
    stream_id=st.uuids(),
    agent=st.sampled_from(["ops", "demo", "web"]),
    key=st.text(max_size=12),
    channel=st.sampled_from(["", "cli", "telegram"]),
)


@given(
    st.lists(refs, max_size=20),
    st.sampled_from(["", "ops", "web"]),
    st.text(max_size=3),
)
def test_filter_keeps_order_and_exactly_the_matches(sessions, agent, text):
    chosen = filter_sessions(sessions, agent=agent, text=text)
    assert chosen == [s for s in sessions if s in chosen]  # order kept
    needle = text.casefold()
    for s in sessions:
        matches = (not agent or s.agent == agent) and (
            not needle
            or any(needle in f.casefold() for f in (s.key, s.agent, s.channel))
        )
        assert (s in chosen) == matches
    assert filter_sessions(sessions) == sessions
