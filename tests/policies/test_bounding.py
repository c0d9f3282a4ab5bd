"""Tool-result bounding: properties and the reference's §6.6 examples."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.policies.strategies_history import image_outputs
from turnledger.policies.bounding import (
    DEFAULT_MAX_CHARS,
    BoundedResult,
    BoundingError,
    bound_tool_result,
    make_result_bounder,
    rebound_recorded,
    truncation_notice,
)
from turnledger.policies.images import MARKER_PATTERN

limits = st.integers(0, 60)


def markers(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in MARKER_PATTERN.finditer(text)]


def expected_cuts(output: str, max_chars: int) -> tuple[int, int]:
    """The cut points, computed from every marker span (no shortcut)."""
    head = max_chars * 2 // 3
    tail = len(output) - (max_chars - head)
    for start, end in markers(output):
        if start < head < end:
            head = start
        if start < tail < end:
            tail = end
    return head, tail


# --- properties -------------------------------------------------------------


@settings(max_examples=80)
@given(image_outputs(), limits)
def test_bounding_is_head_notice_tail_with_cuts_outside_markers(output, max_chars):
    """Over the limit: head + notice + tail, cut exactly where the spec says."""
    bounded = bound_tool_result(output, max_chars)
    if max_chars == 0 or len(output) <= max_chars:
        assert bounded == BoundedResult(
            text=output,
            original_chars=len(output),
            kept_chars=len(output),
            elided_chars=0,
            truncated=False,
        )
        return
    head, tail = expected_cuts(output, max_chars)
    assert head < tail
    assert (
        bounded.text == output[:head] + truncation_notice(tail - head) + output[tail:]
    )
    assert bounded.elided_chars == tail - head
    assert bounded.kept_chars + bounded.elided_chars == bounded.original_chars
    assert bounded.truncated


@settings(max_examples=80)
@given(image_outputs(), limits)
def test_bounding_never_exceeds_the_limit_by_more_than_the_notice(output, max_chars):
    """len(text) <= max + len(notice), and kept characters <= max."""
    bounded = bound_tool_result(output, max_chars)
    if bounded.truncated:
        notice = truncation_notice(bounded.elided_chars)
        assert bounded.kept_chars <= max_chars
        assert len(bounded.text) <= max_chars + len(notice)


@settings(max_examples=80)
@given(image_outputs(), limits)
def test_bounding_never_splits_an_image_marker(output, max_chars):
    """Every marker of the output is kept whole or elided whole."""
    bounded = bound_tool_result(output, max_chars)
    if not bounded.truncated:
        return
    head, tail = expected_cuts(output, max_chars)
    whole = [output[s:e] for s, e in markers(output) if e <= head or s >= tail]
    found = [bounded.text[s:e] for s, e in markers(bounded.text)]
    assert sorted(found) == sorted(whole)


@settings(max_examples=80)
@given(st.text(max_size=80), limits)
def test_the_factory_bounds_like_the_function(output, max_chars):
    """make_result_bounder(max) is bound_tool_result(_, max)."""
    assert make_result_bounder(max_chars)(output) == bound_tool_result(
        output, max_chars
    )


# --- examples -------------------------------------------------------------------


def test_head_two_thirds_tail_one_third_with_the_reference_notice():
    """max 9: 6 head characters, 3 tail characters, N = elided characters."""
    bounded = bound_tool_result("abcdefghijklmnop", 9)
    assert bounded.text == "abcdef\n\n[... 7 characters truncated ...]\n\nnop"
    assert (bounded.original_chars, bounded.kept_chars, bounded.elided_chars) == (
        16,
        9,
        7,
    )


def test_the_default_limit_is_fifty_thousand():
    """ZeroClaw's default_max_tool_result_chars."""
    assert DEFAULT_MAX_CHARS == 50_000
    assert not bound_tool_result("x" * 50_000).truncated
    bounded = bound_tool_result("x" * 50_001)
    assert bounded.text.startswith("x" * 33_333 + "\n\n[... 1 characters truncated")
    assert bounded.text.endswith("...]\n\n" + "x" * 16_667)


def test_limits_count_characters_not_bytes():
    """[gap fixed] 60 two-byte characters fit a 60-character limit."""
    assert not bound_tool_result("é" * 60, 60).truncated
    bounded = bound_tool_result("é" * 61, 60)
    assert bounded.text == "é" * 40 + truncation_notice(1) + "é" * 20


def test_a_marker_at_the_head_cut_moves_the_cut_back_to_its_bracket():
    """The head ends before the marker instead of inside it."""
    output = "abcd[IMAGE:/tmp/a.png]" + "z" * 20
    bounded = bound_tool_result(output, 12)  # head 8 falls inside the marker
    assert bounded.text == "abcd" + truncation_notice(len(output) - 4 - 4) + "z" * 4


def test_a_marker_at_the_tail_cut_moves_the_cut_past_its_bracket():
    """The tail starts after the marker instead of inside it."""
    output = "a" * 20 + "[IMAGE:/tmp/a.png]xy"
    bounded = bound_tool_result(output, 9)  # tail start falls inside the marker
    assert bounded.text == "a" * 6 + truncation_notice(len(output) - 6 - 2) + "xy"


def test_a_cut_on_a_marker_boundary_is_not_moved():
    """Cutting right before '[' or right after ']' splits nothing."""
    output = "abcdef[IMAGE:x]" + "z" * 20
    bounded = bound_tool_result(output, 9)  # head 6 is exactly at '['
    assert bounded.text.startswith("abcdef\n\n")


def test_an_unclosed_marker_is_plain_text():
    """'[IMAGE:' without ']' is not a marker and can be cut."""
    output = "ab[IMAGE:/tmp/a.png and more text that never closes"
    bounded = bound_tool_result(output, 12)
    assert bounded.text.startswith("ab[IMAGE\n\n")


def test_zero_disables_bounding():
    """max 0: returned as is."""
    assert bound_tool_result("x" * 100_000, 0).text == "x" * 100_000


def test_a_negative_limit_is_refused_by_the_function_and_the_factory():
    """The message says what was expected and what was found."""
    message = r"^Expected max_chars >= 0 \(0 disables bounding\), found -1$"
    with pytest.raises(BoundingError, match=message):
        bound_tool_result("x", -1)
    with pytest.raises(BoundingError, match=message):
        make_result_bounder(-1)


# --- bound once (issue #11 item 6) -------------------------------------------

NOTICE_RE = re.compile(r"\n\n\[\.\.\. (\d+) characters truncated \.\.\.\]\n\n")
plain_outputs = st.text(alphabet=st.characters(blacklist_characters="["), max_size=400)


@settings(max_examples=200)
@given(st.one_of(plain_outputs, image_outputs()), st.integers(1, 120))
def test_export_of_a_recorded_result_has_one_marker_and_the_original_count(
    output, max_chars
):
    """export(record(result)): one marker, the original elided count, bounded length."""
    recorded = bound_tool_result(output, max_chars)
    exported = make_result_bounder(max_chars, recorded=True)(recorded.text)
    assert exported.text == recorded.text
    notices = NOTICE_RE.findall(exported.text)
    if len(output) <= max_chars:
        assert notices == []
        assert exported.text == output
        return
    assert notices == [str(len(output) - recorded.kept_chars)]
    assert exported.elided_chars == recorded.elided_chars
    assert exported.original_chars == len(output)
    marker = len(truncation_notice(exported.elided_chars))
    assert len(exported.text) <= max_chars + marker


@settings(max_examples=200)
@given(plain_outputs, st.integers(1, 120), st.integers(1, 120))
def test_a_smaller_export_limit_cuts_further_under_one_notice(output, record, export):
    """Over a smaller limit the head and tail shrink; the one notice states the total."""
    recorded = bound_tool_result(output, record)
    exported = rebound_recorded(recorded.text, export)
    assert exported.original_chars == len(output)
    if len(output) <= min(record, export):
        assert exported.text == output
        return
    notices = NOTICE_RE.findall(exported.text)
    assert notices == [str(exported.elided_chars)]
    head, _, tail = NOTICE_RE.split(exported.text)
    # What is kept is a prefix and a suffix of the original output, within limits.
    assert output.startswith(head)
    assert output.endswith(tail)
    assert len(head) + len(tail) == len(output) - exported.elided_chars
    assert len(head) + len(tail) <= min(record, export) or (
        exported.text == recorded.text and len(head) + len(tail) <= export
    )
    assert len(exported.text) <= export + len(truncation_notice(exported.elided_chars))


def test_the_issue_example_keeps_the_recorded_count():
    """63,590 elided when recorded stays 63,590 in the export (not 40)."""
    output = "x" * 113_590
    recorded = bound_tool_result(output, 50_000)
    assert recorded.elided_chars == 63_590
    exported = make_result_bounder(50_000, recorded=True)(recorded.text)
    assert exported.text == recorded.text
    assert NOTICE_RE.findall(exported.text) == ["63590"]
    # The raw bounder would have cut the notice itself: the bug of the issue.
    assert NOTICE_RE.findall(bound_tool_result(recorded.text, 50_000).text) != ["63590"]


def test_several_notices_are_not_taken_for_a_recorded_result():
    """Two notices are ambiguous: the text is bounded as a raw output."""
    text = "a" * 30 + truncation_notice(5) + "b" * 30 + truncation_notice(7) + "c" * 30
    assert rebound_recorded(text, 40) == bound_tool_result(text, 40)


def test_a_recorded_result_bounded_again_under_a_smaller_limit():
    """Re-bounding cuts the kept head and tail further; one notice, the true total."""
    recorded = bound_tool_result("a" * 300 + "b" * 300, 100)
    again = rebound_recorded(recorded.text, 40)
    assert again.truncated
    assert again.kept_chars == 40
    assert again.original_chars == 600
    assert again.elided_chars == 560
    assert again.text.count("characters truncated") == 1
    assert again.text.startswith("a")
    assert again.text.endswith("b")
    assert truncation_notice(560) in again.text
