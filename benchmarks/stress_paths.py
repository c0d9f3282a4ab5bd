"""Path-race stress: swapped directories, symlinks, FIFOs and hard links (issue #17).

A thread swaps the workspace's ``d`` for a symlink to an outside directory and
``d/f.txt`` for a symlink, a FIFO, a hard link of an outside file or a fresh
file (``tests/pipeline/path_race.py``) while readers read ``d/f.txt``:

- ``ours file_read``: the real ``file_read`` tool (race-proof opens);
- ``ours media load``: the real ``MediaStore.load``;
- ``naive baseline``: the check-then-open the tools did before issue #17
  (``confine_path`` with ``os.path.realpath``, then ``os.open`` of the resolved
  path with ``O_NOFOLLOW | O_NONBLOCK``: only the last component is guarded).

It prints attempts, escapes (``SECRET`` read), hangs and refusals per reader and
exits 1 when one of ours escapes or hangs. The baseline's escapes show that the
race is real on this machine.

Run::

    .venv/bin/python benchmarks/stress_paths.py              # 20,000 reads each
    .venv/bin/python benchmarks/stress_paths.py --quick      # smoke
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.pipeline.path_race import RaceResult, make_tree, run_race
from tests.pipeline.test_hostile_paths import media_reader, tool_reader
from turnledger.pipeline.media import MediaStore
from turnledger.policies.paths import PathRefused, confine_path


def naive_reader(workspace: Path):  # noqa: ANN201 - a reader, as path_race takes
    """The check-then-open of before: realpath check, then open the result."""

    def reader(path: str) -> str:
        try:
            decision = confine_path(path, root=str(workspace), resolve=os.path.realpath)
            if isinstance(decision, PathRefused):
                return f"refused {decision.reason}"
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
            fd = os.open(decision.path, flags)
        except OSError as e:
            return f"refused {e.strerror}"
        try:
            return os.read(fd, 1000).decode()
        except OSError as e:
            return f"refused {e.strerror}"
        finally:
            os.close(fd)

    return reader


def _line(name: str, result: RaceResult) -> str:
    return (
        f"{name}: {result.attempts:,} attempts, {result.escapes} escapes, "
        f"{result.hangs} hangs, {result.outcomes['refused']:,} refused, "
        f"{result.outcomes['inside']:,} read inside, {result.swaps:,} swaps"
    )


def main() -> None:
    """Run the three readers against the swapper and print the counts."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, default=20_000)
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke)")
    args = parser.parse_args()
    attempts = 300 if args.quick else args.attempts
    failed = False
    with tempfile.TemporaryDirectory() as temporary:
        base = Path(temporary)
        workspace = make_tree(base / "tool")
        with tool_reader(workspace) as reader:
            ours = run_race(workspace, reader, attempts)
        print(_line("ours file_read", ours))
        failed |= bool(ours.escapes or ours.hangs)
        workspace = make_tree(base / "media")
        store = MediaStore(base / "media" / "data")
        media = run_race(workspace, media_reader(workspace, store), attempts // 4)
        print(_line("ours media load", media))
        failed |= bool(media.escapes or media.hangs)
        workspace = make_tree(base / "naive")
        naive = run_race(workspace, naive_reader(workspace), attempts)
        print(_line("naive baseline", naive))
    verdict = "FAIL" if failed else "PASS"
    print(f"{verdict}  ours: 0 escapes and 0 hangs required")
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
