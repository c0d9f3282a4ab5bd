"""CLI, configuration and API fuzzing (issue #17): no traceback, hang, partial write.

Three families of cases, counted separately:

1. **CLI**: for every command, argument vectors drawn by the in-suite fuzzer's
   strategies (``tests/pipeline/test_cli_fuzz.py``: the parser's real options,
   garbled flags, out-of-range numbers, session keys, undecodable bytes, lone
   surrogates, 100,000-character values, ``/dev/zero``, ``/dev/null``, a FIFO
   nobody writes to, random and corrupted files) run through ``main(argv)``
   in-process on a seeded SQLite ledger, each reset first;
2. **config**: a ``turnledger.toml`` drawn from the real sections and keys with
   hostile values (negative, huge, wrong types, unknown keys, bad UTF-8), read
   by ``--config cfg.toml`` before ``stats``, ``memory list`` or ``run``;
3. **API**: the library's own entry points with hostile strings: ``scrub_text``
   / ``scrub_json_text`` (deep nesting, lone surrogates), ``confine_path``,
   ``read_input_file`` on devices and FIFOs, ``check_arguments``.

A case fails as a **traceback** (an exception other than argparse's exit
escapes ``main``, or an untyped exception escapes an API call), a **hang** (an
alarm after 60 s), a **partial write** (the ledger changed on a refusal or a
read-only command, or ``import`` wrote other than what it reported, or
``verify`` finds a problem), or **dirty** (exit 2 without exactly one
``turnledger:`` line). The script prints the counts and exits 1 on any failure.

Run::

    .venv/bin/python benchmarks/fuzz_cli.py               # ~20,000+ cases
    .venv/bin/python benchmarks/fuzz_cli.py --quick       # smoke
    .venv/bin/python benchmarks/fuzz_cli.py --per-command 500 --config-cases 3000
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Self

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import msgspec
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.pipeline import test_cli_fuzz as fz
from turnledger.ledger.errors import LedgerError
from turnledger.pipeline.cli import COMMANDS, main
from turnledger.pipeline.cli.common import check_arguments
from turnledger.pipeline.errors import PipelineError
from turnledger.pipeline.inputs import read_input_file
from turnledger.policies.errors import PolicyError
from turnledger.policies.paths import confine_path
from turnledger.policies.scrubbing import scrub_text
from turnledger.policies.structured_scrubbing import scrub_json_text

HANG_SECONDS = 60
SLOW = {"demo": 0.05, "run": 0.4, "chat": 0.4}
"""Share of the per-command cases for the commands that run the engine or serve."""

TYPED = (LedgerError, PipelineError, PolicyError)

LAST_CASE = Path(tempfile.gettempdir()) / "turnledger-fuzz-cli-last-case.txt"
"""The case running now (what hung, when the process has to be stopped)."""


class Hang(BaseException):
    """The alarm rang (a BaseException: no ``except Exception`` swallows it)."""


def _ring(signum: int, frame: object) -> None:
    del signum, frame
    raise Hang


class Capture:
    """Stand-in for pytest's capsys: text streams with a ``buffer`` for JSON."""

    def __enter__(self) -> Self:
        self._saved = (sys.stdout, sys.stderr)
        self.out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="replace")
        self.err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="replace")
        sys.stdout, sys.stderr = self.out, self.err
        return self

    def __exit__(self, *exc: object) -> None:
        sys.stdout, sys.stderr = self._saved

    def readouterr(self) -> tuple[str, str]:
        texts = []
        for stream in (self.out, self.err):
            stream.flush()
            raw = stream.buffer  # type: ignore[attr-defined]
            texts.append(raw.getvalue().decode("utf-8", "replace"))
            raw.seek(0)
            raw.truncate()
        return texts[0], texts[1]


class Tally:
    """Counts per family and per failure kind, with one example of each."""

    def __init__(self) -> None:
        self.cases: Counter[str] = Counter()
        self.failures: Counter[str] = Counter()
        self.examples: dict[str, str] = {}

    def fail(self, kind: str, what: object) -> None:
        self.failures[kind] += 1
        self.examples.setdefault(kind, repr(what)[:400])


def _unblock(root: Path, fired: list[bool]) -> None:
    """After the hang bound: open every FIFO read-write, which frees a blocked open.

    A thread stuck in ``open()`` of a FIFO inside C code that retries on EINTR
    (SQLite does) never sees the alarm; a partner on the FIFO releases it, and the
    case is counted as a hang.
    """
    fired.append(True)
    for fifo in [p for p in root.rglob("*") if p.is_fifo()]:
        with contextlib.suppress(OSError):
            fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
            time.sleep(0.2)
            os.close(fd)


def _cli_case(
    workdir: fz.Workdir, tally: Tally, command: str, argv: list[str], contents: dict
) -> None:
    tally.cases["cli"] += 1
    LAST_CASE.write_text(repr(argv))
    fz.reset_workdir(workdir, contents)
    stdin = contents.get(fz.STDIN, b"").decode("utf-8", "surrogatepass")
    sys.stdin = io.StringIO(stdin)
    db = workdir.path / "ledger.db"
    before, _ = fz.ledger_state(db)
    fired: list[bool] = []
    watchdog = threading.Timer(HANG_SECONDS + 5, _unblock, (workdir.path, fired))
    watchdog.start()
    signal.alarm(HANG_SECONDS)
    try:
        with Capture() as capture:
            try:
                code = main(argv)
            except SystemExit as e:
                code = -2 if e.code == 2 else 99
            out, err = capture.readouterr()
    except Hang:
        tally.fail("hang", argv)
        return
    except Exception as e:  # noqa: BLE001 - counting what escapes is the point
        tally.fail("traceback", (argv, type(e).__name__, str(e)[:200]))
        return
    finally:
        signal.alarm(0)
        watchdog.cancel()
    if fired:
        tally.fail("hang", argv)
        return
    _judge(tally, db, before, command, argv, code, out, err)


def _judge(  # noqa: PLR0917 - one case's facts, judged together
    tally: Tally,
    db: Path,
    before: int,
    command: str,
    argv: list[str],
    code: int,
    out: str,
    err: str,
) -> None:
    if code not in (-2, 0, 1, 2) or "Traceback" in err:
        tally.fail("traceback", (argv, code, err[-300:]))
        return
    if code == 2:
        lines = [line for line in err.splitlines() if not line.startswith("{")]
        if len(lines) != 1 or not lines[0].startswith("turnledger: "):
            tally.fail("dirty", (argv, err[:300]))
    after, problems = fz.ledger_state(db)
    if problems:
        tally.fail("partial write", (argv, problems[:2]))
    elif command == "import":
        grew = fz.reported_events(out) if code in (0, 2) else 0  # see the test
        if after - before != grew:
            tally.fail("partial write", (argv, code, after - before, grew))
    elif (command in fz.READ_ONLY or code in (-2, 2)) and after != before:
        tally.fail("partial write", (argv, code, after - before))


_SETTINGS = settings(
    deadline=None,
    database=None,
    phases=[Phase.generate],  # count every case; no shrinking
    suppress_health_check=list(HealthCheck),
)


def _cli_checker(workdir: fz.Workdir, tally: Tally, command: str, count: int):  # noqa: ANN202 - a Hypothesis test function
    @settings(_SETTINGS, max_examples=count)
    @given(argv=fz.argv_for(command, workdir.keys), contents=fz.file_contents())
    def check(argv: list[str], contents: dict) -> None:
        _cli_case(workdir, tally, command, argv, contents)

    return check


SERVERS = {"serve", "mcp", "collect"}
"""Left out: ``serve``, ``mcp`` and ``collect`` run a server until stopped (as the
in-suite fuzzer leaves out ``tail --follow`` and ``project run``)."""


def _run_cli(workdir: fz.Workdir, tally: Tally, per_command: int) -> None:
    for command in sorted(set(COMMANDS) - SERVERS):
        count = max(3, int(per_command * SLOW.get(command, 1.0)))
        started = time.perf_counter()
        _cli_checker(workdir, tally, command, count)()
        print(
            f"  cli {command}: {count} cases in {time.perf_counter() - started:.1f} s",
            file=sys.__stderr__,
        )


_CONFIG_KEYS = {
    "runtime": [
        "max_tool_result_chars",
        "context_budget_tokens",
        "max_tool_iterations",
        "tool_concurrency",
        "max_media_bytes",
        "max_input_bytes",
    ],
    "recall": ["limit", "min_relevance", "max_entries", "entry_max_chars", "decay"],
    "memory": ["shredding", "autosave"],
    "budgets": ["daily_usd", "monthly_usd"],
    "embedding": ["provider", "dimensions"],
}
_HOSTILE_VALUES = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([-5, -1, 0, 1, 2**63, 2**64, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.text(max_size=20),
    st.sampled_from(["/dev/null", "/dev/zero", "\ud800", "x" * 5000, "sqlite://"]),
    st.lists(st.integers(), max_size=3),
)


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return {"nan": "nan", "inf": "inf", "-inf": "-inf"}.get(str(value), repr(value))
    if isinstance(value, str):
        return msgspec.json.encode(
            value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
        ).decode()
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return str(value)


@st.composite
def config_documents(draw: Any) -> bytes:
    """A turnledger.toml with hostile values, sometimes broken bytes."""
    lines: list[str] = []
    for section in draw(
        st.lists(st.sampled_from(sorted(_CONFIG_KEYS)), max_size=3, unique=True)
    ):
        lines.append(f"[{section}]")
        keys = draw(
            st.lists(st.sampled_from(_CONFIG_KEYS[section]), max_size=3, unique=True)
        )
        lines += [f"{key} = {_toml_value(draw(_HOSTILE_VALUES))}" for key in keys]
        if draw(st.integers(0, 9)) == 0:
            lines.append("unknown_key = 1")
    data = "\n".join(lines).encode()
    if draw(st.integers(0, 9)) == 0:
        data += b"\n\xff\xfe"
    return data


_CONFIG_COMMANDS = (
    ["stats"],
    ["memory", "list", "--agent", "ops"],
    ["memory", "recall", "--agent", "ops", "editor"],
    ["run", "examples/script.toml", "--agent", "ops", "--turn", "hello"],
    ["export", "main", "--format", "openai-chat"],
)


def _run_config(workdir: fz.Workdir, tally: Tally, cases: int) -> None:
    @settings(_SETTINGS, max_examples=cases)
    @given(document=config_documents(), which=st.integers(0, len(_CONFIG_COMMANDS) - 1))
    def check(document: bytes, which: int) -> None:
        tail = _CONFIG_COMMANDS[which]
        argv = ["--db", "ledger.db", "--config", "cfg.toml", *tail]
        contents = {"cfg.toml": document}
        tally.cases["config"] += 1
        tally.cases["cli"] -= 1  # counted once, as a config case
        _cli_case(workdir, tally, tail[0], argv, contents)

    check()


_API_TEXT = st.one_of(
    st.text(max_size=200),
    st.sampled_from(["\ud800", "a\udcffb", "[" * 5000, "{" * 3000, "x" * 200_000]),
    st.builds(
        lambda n, s: "[" * n + s + "]" * n, st.integers(0, 3000), st.text(max_size=20)
    ),
)


def _api_case(tally: Tally, text: str, root: str) -> None:
    tally.cases["api"] += 1
    calls = (
        lambda: scrub_text(text),
        lambda: scrub_json_text(text),
        lambda: confine_path(text, root=root, resolve=os.path.realpath),
        lambda: check_arguments([text]),
        lambda: read_input_file(text[:4000] or ".", max_bytes=1 << 20),
        lambda: read_input_file("/dev/zero"),
        lambda: read_input_file(Path(root) / "fifo"),
    )
    signal.alarm(HANG_SECONDS)
    try:
        for call in calls:
            with contextlib.suppress(*TYPED):
                call()
    except Hang:
        tally.fail("hang", text[:100])
    except Exception as e:  # noqa: BLE001 - an untyped exception is the finding
        tally.fail("traceback", (text[:100], type(e).__name__, str(e)[:200]))
    finally:
        signal.alarm(0)


def _run_api(tally: Tally, cases: int, root: Path) -> None:
    os.mkfifo(root / "fifo")

    @settings(_SETTINGS, max_examples=cases)
    @given(text=_API_TEXT)
    def check(text: str) -> None:
        _api_case(tally, text, str(root))

    check()


def main_fuzz() -> None:
    """Run the three families and print the counts."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-command", type=int, default=700)
    parser.add_argument("--config-cases", type=int, default=3000)
    parser.add_argument("--api-cases", type=int, default=3000)
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke)")
    args = parser.parse_args()
    if args.quick:
        args.per_command, args.config_cases, args.api_cases = 3, 20, 50
    for name in ("TURNLEDGER_DB", "TURNLEDGER_CONFIG"):
        os.environ.pop(name, None)
    signal.signal(signal.SIGALRM, _ring)
    tally = Tally()
    started = time.perf_counter()
    stdin = sys.stdin
    with tempfile.TemporaryDirectory() as temporary:
        base = Path(temporary)
        seed_path = base / "seed.db"
        keys = fz.seed_ledger(seed_path)
        work = base / "work"
        work.mkdir()
        os.chdir(work)
        workdir = fz.Workdir(work, seed_path.read_bytes(), keys)
        _run_cli(workdir, tally, args.per_command)
        _run_config(workdir, tally, args.config_cases)
        api_root = base / "api"
        api_root.mkdir()
        _run_api(tally, args.api_cases, api_root)
        os.chdir(base)
    sys.stdin = stdin
    total = sum(tally.cases.values())
    seconds = time.perf_counter() - started
    print(
        f"fuzz_cli: {total:,} cases in {seconds:.0f} s "
        f"(cli {tally.cases['cli']:,}, config {tally.cases['config']:,}, "
        f"api {tally.cases['api']:,}): "
        f"{tally.failures['traceback']} tracebacks, {tally.failures['hang']} hangs, "
        f"{tally.failures['partial write']} partial writes, "
        f"{tally.failures['dirty']} unclean error lines"
    )
    for kind, example in tally.examples.items():
        print(f"  first {kind}: {example}")
    if tally.failures:
        sys.exit(1)


if __name__ == "__main__":
    main_fuzz()
