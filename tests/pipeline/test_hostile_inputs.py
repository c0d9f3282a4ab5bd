"""Hostile input at the edges: devices, FIFOs, encodings, lengths (issue #17, item 1).

Each case is the real CLI in-process on a real SQLite ledger: one line on stderr,
exit 2, no traceback, nothing written (the ledger's event count is unchanged). A
FIFO case runs under an alarm, so a regression hangs for a few seconds, not
forever.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from turnledger.ledger.events import SessionOpened
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import open_store
from turnledger.pipeline.cli import main
from turnledger.pipeline.cli.common import MAX_ARGUMENT_BYTES, check_arguments
from turnledger.pipeline.inputs import (
    InputFileError,
    read_input_file,
    read_input_text,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(name="ledger")
def _ledger(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("TURNLEDGER_DB", "TURNLEDGER_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    db = tmp_path / "l.db"
    with open_store(str(db)) as store:
        store.append(
            session_stream_id("ops", "k"),
            [SessionOpened(agent="ops", session_key="k")],
            expected_version=0,
        )
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "empty").mkdir()
    os.mkfifo(tmp_path / "empty" / "fifo.json")  # not a file: not searched
    return db


def events(db: Path) -> int:
    with open_store(str(db)) as store:
        return sum(1 for _ in store.iter_all())


class Hang(BaseException):
    """The alarm rang (a BaseException: no ``except`` of the code swallows it)."""


class Alarm:
    """Raise :class:`Hang` in the main thread after ``seconds``.

    Not ``TimeoutError``: that is an ``OSError``, which a reader's ``except
    OSError`` took for an unreadable file; a FIFO's blocking open then passed
    here after the alarm's seconds, instead of failing.
    """

    def __init__(self, seconds: int) -> None:
        self.seconds = seconds

    def __enter__(self) -> None:
        def ring(signum, frame):
            raise Hang

        self.previous = signal.signal(signal.SIGALRM, ring)
        signal.alarm(self.seconds)

    def __exit__(self, *exc: object) -> None:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, self.previous)


def refused(capsys, db: Path, *args: str) -> str:
    """Run the CLI; assert exit 2, one line, no traceback, nothing written."""
    before = events(db)
    with Alarm(20):
        code = main(["--db", str(db), *args])
    out, err = capsys.readouterr()
    assert code == 2, (args, out, err)
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("turnledger: ")
    assert "Traceback" not in err
    assert events(db) == before
    return lines[0]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("import", "/dev/zero"), "Expected a regular transcript at '/dev/zero', found a device"),
        (("import", "fifo"), "Expected a regular transcript at 'fifo', found a FIFO"),
        (("import", "empty"), "Expected transcript files (.json, .jsonl, .eval, .har, .yaml, .yml, .db) under empty, found none"),
        (("run", "/dev/zero", "--turn", "hi"), "Expected a regular provider script at '/dev/zero', found a device"),
        (("run", "fifo", "--turn", "hi"), "Expected a regular provider script at 'fifo', found a FIFO"),
        (("import", "missing.json"), "Expected a readable transcript at 'missing.json', found: No such file or directory"),
    ],
)  # fmt: skip
def test_devices_fifos_and_directories_are_refused_one_line(
    capsys, ledger, args, expected
):
    """/dev/zero is never read to its end; a FIFO with no writer never blocks."""
    assert refused(capsys, ledger, *args) == f"turnledger: {expected}"


def test_an_undecodable_byte_in_an_argument(capsys, ledger):
    """memory list --agent $'\\xff' (surrogateescape) is refused, quoted escaped."""
    line = refused(capsys, ledger, "memory", "list", "--agent", "a\udcffb")
    assert line == (
        "turnledger: Expected UTF-8 command-line arguments, found the undecodable"
        " byte 0xff at character 1 of argument 6 ('a\\udcffb')"
    )


def test_a_lone_surrogate_in_an_argument(capsys, ledger):
    """A lone surrogate (not from a byte) is named as one."""
    line = refused(capsys, ledger, "history", "\ud800")
    assert "found the lone surrogate U+D800 at character 0 of argument 4" in line


def test_a_100000_character_recall_query(capsys, ledger):
    """Refused before SQLite sees it ("LIKE or GLOB pattern too complex")."""
    query = "x" * 100_000
    line = refused(capsys, ledger, "memory", "recall", "--agent", "ops", query)
    assert line.startswith(
        f"turnledger: Expected command-line arguments of at most {MAX_ARGUMENT_BYTES}"
        " UTF-8 bytes, found 100000 in argument 7 ('xxxx"
    )
    assert len(line) < 200  # a bounded prefix, not the value


def test_the_longest_accepted_query_runs(capsys, ledger):
    """At the bound, even multi-byte and LIKE-special text recalls cleanly."""
    for query in ("é" * (MAX_ARGUMENT_BYTES // 2), "%" * MAX_ARGUMENT_BYTES):
        code = main(["--db", str(ledger), "memory", "recall", "--agent", "ops", query])
        out, err = capsys.readouterr()
        assert code == 0, err
        assert out.strip() == "No memories found."


def test_check_arguments_passes_ordinary_arguments():
    """Ordinary arguments come back unchanged."""
    argv = ["memory", "recall", "--agent", "ops", "café 日本"]
    assert check_arguments(argv) == argv


def test_read_input_file_bounds(tmp_path):
    """Over the bound is refused by fstat size, before reading."""
    big = tmp_path / "big.json"
    big.write_bytes(b"x" * 101)
    assert read_input_file(big, max_bytes=101) == b"x" * 101
    with pytest.raises(InputFileError, match=r"at most 100 bytes .* found 101 bytes"):
        read_input_file(big, max_bytes=100)
    bad = tmp_path / "bad.toml"
    bad.write_bytes(b"ok\xff")
    with pytest.raises(InputFileError, match="found byte 0xff at offset 2"):
        read_input_text(bad, what="configuration")
    assert read_input_text(big, max_bytes=200) == "x" * 101


def test_a_long_file_name_is_quoted_by_a_bounded_prefix(tmp_path):
    """The error quotes at most 120 characters of the name."""
    name = str(tmp_path / ("n" * 250))
    with pytest.raises(InputFileError) as raised:
        read_input_file(name)
    assert len(str(raised.value)) < 250
    assert "characters)" in str(raised.value)


def test_an_input_file_error_is_an_os_error():
    """Callers that handled unreadable files (OSError) still do."""
    assert issubclass(InputFileError, OSError)


@pytest.mark.parametrize(
    ("config", "found"),
    [("fifo", "a FIFO"), ("/dev/zero", "a device"), (".", "a directory")],
)
def test_a_configuration_that_is_no_regular_file(capsys, ledger, config, found):
    """--config FIFO used to block forever, --config /dev/zero to read forever."""
    line = refused(capsys, ledger, "--config", config, "memory", "list", "--agent", "x")
    assert line == (
        f"turnledger: Expected a regular configuration file at {config!r}, found {found}"
    )


def test_devnull_as_the_configuration_means_none(monkeypatch):
    """``TURNLEDGER_CONFIG=/dev/null`` (the usual "no file") gives the defaults."""
    from turnledger.pipeline.config import Config, load_config

    monkeypatch.setenv("TURNLEDGER_CONFIG", os.devnull)
    assert load_config() == Config()
    assert load_config(os.devnull) == Config()
