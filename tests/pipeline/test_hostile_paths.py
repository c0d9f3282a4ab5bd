"""Hostile file systems: races, FIFOs, devices, hard links, deep paths (issue #17).

The race (a thread swapping the parent directory for a symlink and the file for
a symlink, a FIFO, a hard link or a fresh file, see ``path_race.py``) runs 2,000
``file_read`` attempts through the real tool and 500 media loads: 0 escapes and
0 hangs. ``benchmarks/stress_paths.py`` runs it longer.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path

import pytest

from tests.pipeline.path_race import make_tree, run_race
from turnledger.pipeline.media import MediaRef, MediaStore
from turnledger.pipeline.safe_fs import (
    UnsafePathError,
    open_beneath,
    open_directory,
    open_root,
    walk_files,
)
from turnledger.pipeline.tools._glob import glob_regex
from turnledger.pipeline.tools.base import ToolContext, ToolOutcome
from turnledger.pipeline.tools.file_tools import file_tools


@contextlib.contextmanager
def tool_reader(workspace: Path, *, refuse_hard_links: bool = True):
    """Read through the real ``file_read`` tool, on one event loop."""
    read = file_tools(refuse_hard_links=refuse_hard_links)[0]
    context = ToolContext(
        agent="a",
        session_key="s",
        turn_id="t",
        workspace=workspace,
        memory=None,  # type: ignore[arg-type] - file tools use the workspace only
        store=None,  # type: ignore[arg-type]
    )
    loop = asyncio.new_event_loop()

    def reader(path: str) -> str:
        outcome = loop.run_until_complete(read.run({"path": path}, context))
        return outcome.output if outcome.success else f"refused {outcome.error}"

    try:
        yield reader
    finally:
        loop.run_until_complete(loop.shutdown_default_executor())
        loop.close()


def media_reader(workspace: Path, store: MediaStore):
    """Load through the real media store and return the stored bytes as text."""

    def reader(path: str) -> str:
        ref = store.load(path, root=workspace, mime_type="text/plain")
        if not isinstance(ref, MediaRef):
            return f"refused {ref.reason}: {ref.detail}"
        stored = store.path_of(ref.storage_ref)
        assert stored is not None
        return stored.read_text()

    return reader


def test_file_read_race_has_no_escape_and_no_hang(tmp_path):
    """2,000 reads while the tree is swapped: never outside, never stuck."""
    workspace = make_tree(tmp_path)
    with tool_reader(workspace) as reader:
        result = run_race(workspace, reader, attempts=2000)
    assert (result.attempts, result.escapes, result.hangs) == (2000, 0, 0)
    assert result.outcomes["inside"] > 0, result.outcomes
    assert result.outcomes["refused"] > 0, result.outcomes  # the race was hit
    assert result.swaps > 100


def test_media_load_race_has_no_escape_and_no_hang(tmp_path):
    """500 media loads while the tree is swapped: never outside, never stuck."""
    workspace = make_tree(tmp_path)
    store = MediaStore(tmp_path / "data")
    result = run_race(workspace, media_reader(workspace, store), attempts=500)
    assert (result.attempts, result.escapes, result.hangs) == (500, 0, 0)
    assert result.outcomes["refused"] > 0, result.outcomes
    stored = tmp_path / "data" / "media"
    assert all("SECRET" not in p.read_text() for p in stored.glob("*"))


# -- each hostile shape, deterministically ---------------------------------------


@pytest.fixture(name="tree")
def _tree(tmp_path):
    workspace = make_tree(tmp_path)
    outside = tmp_path / "out"
    os.mkfifo(workspace / "fifo")
    os.link(outside / "secret", workspace / "hard.txt")
    (workspace / "dir_link").symlink_to(workspace / "d")
    return workspace


def read(workspace: Path, path: str, **options: bool) -> ToolOutcome:
    tool = file_tools(**options)[0]
    context = ToolContext(
        agent="a",
        session_key="s",
        turn_id="t",
        workspace=workspace,
        memory=None,  # type: ignore[arg-type]
        store=None,  # type: ignore[arg-type]
    )
    return asyncio.run(tool.run({"path": path}, context))


def test_a_fifo_is_refused_without_blocking(tree):
    """A FIFO with no writer: one refusal, no hang (O_NONBLOCK, then fstat)."""
    assert read(tree, "fifo").error == "Not a readable file: 'fifo'"
    with pytest.raises(UnsafePathError) as raised:
        open_beneath(str(tree), "fifo", write=True)
    assert raised.value.reason == "not_regular"


def test_a_device_is_refused(tmp_path):
    """/dev/null and /dev/zero are not regular files."""
    for name in ("null", "zero"):
        with pytest.raises(UnsafePathError) as raised:
            open_beneath("/dev", name)
        assert raised.value.reason == "not_regular"


def test_a_hard_link_is_refused_when_the_policy_says_so(tree):
    """A second link to an outside file is refused, or read when allowed."""
    refused = read(tree, "hard.txt")
    assert refused.error.startswith("Path refused (hard_link): 'hard.txt' has 2 hard")
    assert read(tree, "hard.txt", refuse_hard_links=False).output == "SECRET\n"


def test_a_hard_linked_file_is_never_truncated_by_a_refused_write(tree):
    """Writing checks the link count before truncating."""
    with pytest.raises(UnsafePathError):
        open_beneath(str(tree), "hard.txt", write=True)
    assert (tree.parent / "out" / "secret").read_text() == "SECRET\n"


def test_symlinked_components_are_never_followed(tree):
    """Beneath the root handle, a symlink anywhere on the way is refused."""
    for relative in ("dir_link/f.txt", "dir_link"):
        with pytest.raises(UnsafePathError) as raised:
            open_beneath(str(tree), relative)
        assert raised.value.reason in ("symlink", "not_directory")


def test_a_deep_path_is_typed_not_a_recursion_error(tmp_path):
    """2,000 levels: a clear refusal or a clean miss, never RecursionError."""
    workspace = make_tree(tmp_path)
    deep = "/".join(["a"] * 2000) + "/f.txt"
    assert read(workspace, deep).error.startswith("Path refused (too_long): ")
    root = open_root(str(workspace))
    try:
        with pytest.raises(UnsafePathError) as raised:
            open_directory(root, ["a"] * 2000)
        assert raised.value.reason == "missing"
    finally:
        os.close(root)


def test_globs_are_bounded_and_total(tree):
    """'.' and '' name no file; '**' must be whole; deep patterns are refused."""
    assert glob_regex(".") is None
    assert glob_regex("d/*.txt").fullmatch("d/f.txt")
    assert not glob_regex("*.txt").fullmatch("d/f.txt")
    assert glob_regex("**/f.t?t").fullmatch("d/f.txt")
    assert glob_regex("[!x]/[ef].txt").fullmatch("d/f.txt")
    assert glob_regex("**/*.txt").fullmatch("f.txt")


def test_the_walk_skips_links_and_is_bounded(tree):
    """Symlinks are skipped; depth and entry bounds hold."""
    deep = tree / "x"
    for _ in range(5):
        deep /= "x"
    deep.mkdir(parents=True)
    (deep / "bottom.txt").write_text("b")
    root = open_root(str(tree))
    try:
        names = [relative for relative, _, _ in walk_files(root, "")]
        shallow = [relative for relative, _, _ in walk_files(root, "", max_depth=2)]
        few = [relative for relative, _, _ in walk_files(root, "", max_entries=2)]
    finally:
        os.close(root)
    assert "d/f.txt" in names
    assert "x/x/x/x/x/x/bottom.txt" in names
    assert "x/x/x/x/x/x/bottom.txt" not in shallow
    assert "dir_link/f.txt" not in names
    assert len(few) <= 2
