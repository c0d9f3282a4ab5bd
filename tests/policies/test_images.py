"""Image-path promotion: properties and the reference's §6.7 examples."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from turnledger.policies.images import (
    LISTING_TOOLS,
    MARKER_PATTERN,
    PromotionDecision,
    marker_span_at,
    promote_image_paths,
)

EXISTING = frozenset(
    {
        "/data/a.png",
        "/srv/out/B.JPG",
        "C:\\img\\c.webp",
        "D:/x/d.gif",
        "\\\\nas\\share\\e.bmp",
    }
)
MISSING = ("/data/missing.png", "/opt/f.jpeg")


def exists(path: str) -> bool:
    return path in EXISTING


outputs = st.lists(
    st.one_of(
        st.sampled_from(sorted(EXISTING) + list(MISSING)),
        st.sampled_from([" ", "\n", ". ", "see ", "[IMAGE:", "]", "x", "/", "\\"]),
        st.sampled_from(sorted(EXISTING)).map(lambda p: f"[IMAGE:{p}]"),
    ),
    max_size=10,
).map("".join)
tools = st.sampled_from(
    [None, "image_gen", "file_download", "Content_Search", "glob_search"]
)


def marker_paths(text: str) -> list[str]:
    return [m.group(1) for m in MARKER_PATTERN.finditer(text)]


# --- properties -------------------------------------------------------------


@settings(max_examples=80)
@given(outputs, tools)
def test_promotion_is_idempotent(output, tool):
    """Promoting a promoted output changes nothing more."""
    once = promote_image_paths(output, exists, tool_name=tool)
    twice = promote_image_paths(once.text, exists, tool_name=tool)
    assert twice.text == once.text
    assert twice.promoted == ()


@settings(max_examples=80)
@given(outputs, tools)
def test_only_existing_files_become_markers_and_none_is_duplicated(output, tool):
    """New markers name existing files, each at most once per output."""
    decision = promote_image_paths(output, exists, tool_name=tool)
    before = marker_paths(output)
    after = marker_paths(decision.text)
    added = list(after)
    for path in before:
        added.remove(path)
    assert sorted(added) == sorted(decision.promoted)
    assert set(decision.promoted) <= EXISTING
    assert not set(decision.promoted) & set(before)
    assert len(set(decision.promoted)) == len(decision.promoted)


@settings(max_examples=80)
@given(outputs, tools)
def test_promotion_only_adds_marker_brackets(output, tool):
    """Removing the added '[IMAGE:' and ']' gives the output back."""
    decision = promote_image_paths(output, exists, tool_name=tool)
    text = decision.text
    for path in decision.promoted:
        text = text.replace(f"[IMAGE:{path}]", path, 1)
    assert text == output


@settings(max_examples=80)
@given(outputs, st.sampled_from(["content_search", "GLOB_SEARCH", "Find_Files"]))
def test_listing_tools_are_never_promoted(output, tool):
    """Path-listing tools (built in or extra, any case) are left alone."""
    decision = promote_image_paths(
        output, exists, tool_name=tool, extra_listing_tools=["find_files"]
    )
    assert decision == PromotionDecision(
        text=output, promoted=(), skipped_listing_tool=True
    )


# --- examples -------------------------------------------------------------------


def test_posix_windows_and_unc_paths_are_promoted():
    """Every absolute form, any extension case."""
    output = (
        "saved /data/a.png, /srv/out/B.JPG and C:\\img\\c.webp;\n"
        "also D:/x/d.gif and \\\\nas\\share\\e.bmp."
    )
    decision = promote_image_paths(output, exists, tool_name="image_gen")
    assert decision.text == (
        "saved [IMAGE:/data/a.png], [IMAGE:/srv/out/B.JPG] and [IMAGE:C:\\img\\c.webp];\n"
        "also [IMAGE:D:/x/d.gif] and [IMAGE:\\\\nas\\share\\e.bmp]."
    )
    assert decision.promoted == (
        "/data/a.png",
        "/srv/out/B.JPG",
        "C:\\img\\c.webp",
        "D:/x/d.gif",
        "\\\\nas\\share\\e.bmp",
    )
    assert not decision.skipped_listing_tool


def test_missing_files_are_left_as_text():
    """Only regular files that exist are promoted."""
    decision = promote_image_paths("made /data/missing.png", exists)
    assert decision.text == "made /data/missing.png"
    assert decision.promoted == ()


def test_each_distinct_path_is_checked_once():
    """is_file is asked once per path, however often it appears."""
    asked: list[str] = []

    def is_file(path: str) -> bool:
        asked.append(path)
        return False

    promote_image_paths("/data/x.png /data/x.png /data/y.png", is_file)
    assert asked == ["/data/x.png", "/data/y.png"]


def test_a_repeated_path_gets_one_marker():
    """The first occurrence is wrapped; later ones stay text."""
    decision = promote_image_paths("/data/a.png then /data/a.png", exists)
    assert decision.text == "[IMAGE:/data/a.png] then /data/a.png"
    assert decision.promoted == ("/data/a.png",)


def test_a_path_already_in_a_marker_is_not_duplicated():
    """A bare path whose marker exists elsewhere in the output stays text."""
    output = "[IMAGE:/data/a.png] written to /data/a.png"
    assert promote_image_paths(output, exists).text == output
    spaced = "[IMAGE: /data/a.png ] and /data/a.png"
    assert promote_image_paths(spaced, exists).text == spaced


def test_non_image_relative_url_and_glued_paths_are_not_promoted():
    """Only absolute local image paths that end at their extension."""
    for output in (
        "/data/a.txt",
        "relative/a.png",
        "./a.png",
        "~/a.png",
        "https://example.com/a.png",
        "file:/data/a.png",
        "/data/a.png.bak",
        "/data/a.pngx",
        "/data/a.png/more",
        "/data/my pics/y.png",
        "[IMAGE:/data/a.png",
    ):
        decision = promote_image_paths(output, lambda _path: True)
        assert decision.text == output, output
        assert decision.promoted == (), output


def test_unknown_and_producing_tools_are_promoted():
    """Default-allow: any tool that is not a listing tool."""
    for tool in (None, "image_gen", "file_download", "new_tool"):
        assert promote_image_paths("/data/a.png", exists, tool_name=tool).promoted


def test_the_builtin_listing_tools():
    """content_search and glob_search, as the reference names them."""
    assert frozenset({"content_search", "glob_search"}) == LISTING_TOOLS


def test_marker_span_at():
    """A cut strictly inside a marker reports the marker's span."""
    text = "ab[IMAGE:x.png]cd"
    assert marker_span_at(text, 2) is None
    assert marker_span_at(text, 3) == (2, 15)
    assert marker_span_at(text, 14) == (2, 15)
    assert marker_span_at(text, 15) is None
    assert marker_span_at("ab[IMAGE:x.png", 5) is None
    assert marker_span_at("abc", 1) is None


def test_delimiters_end_a_path_and_line_suffixes_keep_it_text():
    """'=' ',' ';' and brackets end a token; a ':line' suffix is not an image."""
    decision = promote_image_paths("path=/data/a.png;next,(/data/a.png)", exists)
    assert decision.text == "path=[IMAGE:/data/a.png];next,(/data/a.png)"
    assert promote_image_paths("/data/a.png:12", exists).promoted == ()


def test_base64_and_slash_runs_are_not_paths():
    """Long tokens without a root at their start are skipped in one pass."""
    blob = "iVBORw0KGgo+/9j/4AAQ.png" * 1_000 + " =/=/=/=/ "
    assert promote_image_paths(blob, lambda _path: True).promoted == ()
