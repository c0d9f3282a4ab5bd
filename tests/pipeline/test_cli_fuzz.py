"""Fuzzing the command line: any argument vector, only clean outcomes.

For every command of ``pipeline.cli.COMMANDS``, Hypothesis builds argument
vectors from the parser itself (each command's real options and choices, garbled
flags, integers out of range, unknown and real session keys, stream ids, paths to
random bytes, to corpus files with bytes spliced in, to directories and to
nothing) and runs ``main(argv)`` in-process with ``--db`` on a temporary ledger
seeded with sessions, in a temporary working directory, with no
``TURNLEDGER_*`` variable set. Each example must:

- end with exit code 0, 1 or 2, or argparse's ``SystemExit(2)``; no other
  exception escapes; exit 2 comes with one ``turnledger: ...`` line on stderr;
- never write part of something: ``import`` grows the ledger by exactly the events
  it reports (nothing when it fails), read-only commands write nothing;
- leave the ledger whole (``verify`` finds no problem);
- never hang: each example runs under a 60-second alarm.

Hostile inputs (issue #17) are among the values: ``/dev/zero``, ``/dev/null``,
a FIFO nobody writes to, undecodable bytes (``surrogateescape``), lone
surrogates and arguments past the length bound. ``benchmarks/fuzz_cli.py`` runs
the same checks for 20,000+ cases.

Standard input is a few drawn lines, so ``chat`` and ``run`` without ``--turn``
end after them; the repository's ``examples/`` (a provider script and a
configuration with a scripted provider) are among the paths, so ``run`` and
``chat`` sometimes run real turns through the engine. Left out: ``tail --follow``,
``project run``, ``serve`` and ``mcp`` (they run until stopped) and ``--help``/``-h``
(argparse's exit 0 by design). ``demo`` records a whole scripted session (about a
second per example), so it gets few examples.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import shutil
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.conftest import CORPUS
from turnledger.ledger.events import (
    AssistantMessage,
    MemoryStored,
    SessionOpened,
    ToolCallRecord,
    ToolResultRecorded,
    TurnCompleted,
    TurnStarted,
)
from turnledger.ledger.ids import memory_stream_id, session_stream_id
from turnledger.ledger.store import open_store
from turnledger.ledger.verify import verify
from turnledger.pipeline.cli import COMMANDS, build_parser, main
from turnledger.pipeline.formats import read_transcript
from turnledger.pipeline.importer import import_transcript
from turnledger.pipeline.sessions import list_sessions

READ_ONLY = {
    "init",
    "tail",
    "verify",
    "stats",
    "observe",
    "audit",
    "export",
    "replay",
    "history",
    "lifecycle",
    "project",
}
"""Commands that must never add an event (``init`` only creates tables)."""

EXAMPLES = int(os.environ.get("CLI_FUZZ_EXAMPLES", "30"))
"""Examples per command; ``CLI_FUZZ_EXAMPLES=500`` for a longer local run."""

SLOW = {"demo": max(3, EXAMPLES // 8), "run": EXAMPLES // 2, "chat": EXAMPLES // 2}
"""Examples for the commands that run the engine."""

SMALL_CORPUS_FILES = (
    "claude-code-log/dag_simple.jsonl",
    "claude-code-log/codex/rollout-2026-01-02T03-04-05-11111111-1111-4111-8111-111111111111.jsonl",
    "claude-code-transcripts/sample_session.json",
    "pydantic-ai/test_deepseek_responses__test_deepseek_responses_rejects_interleaved_function_calls.yaml",
)

# Files the examples point at; their content is drawn anew for each example.
RANDOM_FILE = "random.bin"
STDIN = "<stdin>"
MUTATED_FILES = ("mutated.jsonl", "mutated.json", "mutated.yaml")
FIFO = "a-fifo"
FIXED_PATHS = (
    "empty.txt",
    "a-directory",
    "missing/nothing.jsonl",
    FIFO,
    "/dev/zero",
    "/dev/null",
)
EXAMPLE_FILES = ("examples/script.toml", "examples/turnledger.toml")
ROOT = Path(__file__).resolve().parents[2]

PARSER = build_parser()


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:
    (action,) = [
        a for a in parser._actions if isinstance(a, argparse._SubParsersAction)
    ]
    return action


COMMAND_PARSERS = _subparsers(PARSER).choices


def _corpus_files() -> list[Path]:
    return [CORPUS / name for name in SMALL_CORPUS_FILES if (CORPUS / name).exists()]


CORPUS_FILES = _corpus_files()
CORPUS_COPIES = tuple(f"corpus{i}{p.suffix}" for i, p in enumerate(CORPUS_FILES))
"""Copies in the working folder: no example can touch the shared corpus."""


def seed_ledger(path: Path) -> list[str]:
    """A ledger with sessions to name: a hand-made one and imported corpus files."""
    with open_store(str(path), synchronous="OFF") as store:
        stream = session_stream_id("ops", "main")
        calls = (
            ToolCallRecord(id="c1", name="grep"),
            ToolCallRecord(id="c2", name="ls"),
        )
        store.append(
            stream,
            [
                SessionOpened(agent="ops", session_key="main"),
                TurnStarted(turn_id="t1", origin="interactive", user_input="hi"),
                AssistantMessage(turn_id="t1", tool_calls=calls),
                ToolResultRecorded(turn_id="t1", call_id="c1", tool="grep", output="x"),
                AssistantMessage(turn_id="t1", text="done", iteration=1),
                TurnCompleted(turn_id="t1"),
                TurnStarted(turn_id="t2", origin="interactive", user_input="again"),
            ],
            expected_version=0,
        )
        store.append(
            memory_stream_id("ops"),
            [
                MemoryStored(agent="ops", key="editor", content="helix", entry_id="m1"),
                MemoryStored(
                    agent="ops",
                    key="standup",
                    content="at ten",
                    category="daily",
                    session="main",
                    entry_id="m2",
                ),
            ],
            expected_version=0,
        )
        for i, file in enumerate(CORPUS_FILES):
            import_transcript(store, read_transcript(file), agent=f"corpus{i}")
        sessions = list_sessions(store)
    return sorted({s.key for s in sessions} | {str(s.stream_id) for s in sessions})


@pytest.fixture(name="seed", scope="module")
def _seed(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, list[str]]:
    path = tmp_path_factory.mktemp("seed") / "seed.db"
    keys = seed_ledger(path)
    return path.read_bytes(), keys


@dataclass(frozen=True)
class Workdir:
    """The examples' working folder, the seeded ledger's bytes, its session names."""

    path: Path
    seed: bytes
    keys: list[str]


@pytest.fixture(name="workdir")
def _workdir(tmp_path, monkeypatch, seed) -> Workdir:
    """The working folder (each example starts it afresh, see _reset)."""
    monkeypatch.chdir(tmp_path)
    for name in ("DB", "CONFIG", "VIEWS", "CIPHER_KEY"):
        monkeypatch.delenv(f"TURNLEDGER_{name}", raising=False)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    return Workdir(tmp_path, *seed)


def reset_workdir(workdir: Workdir, contents: dict[str, bytes]) -> None:
    """The seeded ledger, the fixed paths and this example's files; nothing else.

    Every example starts from the same state, so a failure replays exactly.
    """
    root = workdir.path
    for child in root.iterdir():
        if child.is_dir():
            shutil.rmtree(child)
        else:
            child.unlink()
    (root / "ledger.db").write_bytes(workdir.seed)
    (root / "empty.txt").write_bytes(b"")
    (root / "a-directory").mkdir()
    os.mkfifo(root / FIFO)
    shutil.copytree(ROOT / "examples", root / "examples")
    for original, copy in zip(CORPUS_FILES, CORPUS_COPIES, strict=True):
        shutil.copyfile(original, root / copy)
    for name, data in contents.items():
        if name != STDIN:
            (root / name).write_bytes(data)


# -- argument vectors ---------------------------------------------------------------

texts = st.text(
    st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12
) | st.sampled_from(  # argv strings cannot hold NUL
    [
        "a\udcffb",  # an undecodable byte, as surrogateescape passes it
        "\ud800",  # a lone surrogate
        "x" * 100_000,  # past the argument bound
        "é" * 9000,  # past it in UTF-8 bytes only
        "%_" * 4000,  # LIKE metacharacters
    ]
)
integers = st.integers(min_value=-(2**70), max_value=2**70).map(str) | st.sampled_from(
    ["0", "-1", "1", "2", "12", "1e3", "0x10", "", " 3", "nan"]
)
paths = st.sampled_from(
    [
        RANDOM_FILE,
        *MUTATED_FILES,
        *FIXED_PATHS,
        *EXAMPLE_FILES,
        *CORPUS_COPIES,
    ]
)
urls = st.sampled_from(["postgresql://127.0.0.1:1/nothing", "sqlite:///x.db", "x://y"])


def _values(keys: list[str]) -> st.SearchStrategy[str]:
    """Any value: text, a number, a path, a session name, a URL."""
    sessions = st.sampled_from(keys) | st.sampled_from(
        ["nope", "00000000-0000-0000-0000-000000000000", "main-2"]
    )
    return st.one_of(texts, integers, paths, sessions, urls)


PATH_DESTS = {"file", "script", "views", "out", "config", "target"}
AGENTS = st.sampled_from(["ops", "corpus0", "imported", "demo", "nobody"])


@st.composite
def _value_for(draw, action: argparse.Action, keys: list[str]) -> str:
    """A value that suits ``action`` three times in four, anything otherwise."""
    if draw(st.integers(0, 3)) == 3:
        return draw(_values(keys))
    if action.choices:
        choices = [c for c in action.choices if c != "run"]  # project run: a worker
        likely = st.sampled_from(choices)
    elif action.type is int:
        likely = integers
    elif action.dest == "script":  # run: the example script runs real turns
        likely = st.sampled_from([EXAMPLE_FILES[0]]) | paths
    elif action.dest in PATH_DESTS:
        likely = paths
    elif action.dest == "session":
        likely = st.sampled_from(keys)
    elif action.dest == "agent":
        likely = AGENTS
    elif action.dest == "provider":  # the example configuration's provider
        likely = st.just("scripted")
    elif action.dest == "url":
        likely = urls
    else:
        likely = texts
    return draw(likely)


def _garbled(flag: str) -> st.SearchStrategy[str]:
    return st.sampled_from(
        [f"{flag}x", flag.upper(), f"-{flag}", flag.lstrip("-"), f"{flag}=", flag[:-1]]
    )


def _defuse(token: str) -> str:
    """Replace a token argparse would read as --help, -h or --follow (see docstring)."""
    if token.startswith("--"):
        name = token[2:].split("=", 1)[0]
        if name and ("help".startswith(name) or "follow".startswith(name)):
            return "--defused"
    elif token.startswith("-") and re.search("[hf]", token[1:]):
        return "-defused"
    return token


def _option(draw, action: argparse.Action, keys: list[str]) -> list[str]:
    """``--flag value`` or ``--flag=value`` (rarely without its value)."""
    flag = draw(st.sampled_from(action.option_strings))
    if action.nargs == 0 or draw(st.integers(0, 19)) == 19:
        return [flag]
    value = draw(_value_for(action, keys))
    if flag.startswith("--") and draw(st.booleans()):
        return [f"{flag}={value}"]
    return [flag, value]


@st.composite
def _parser_tokens(draw, parser: argparse.ArgumentParser, keys: list[str]):
    """Tokens for one (sub)parser: options, garbage, positionals, a sub-command.

    Required options and positionals are there nine times in ten, other options
    one time in three, plus up to two garbled flags or stray values.
    """
    items: list[list[str]] = []
    values: list[str] = []
    sub = None
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction) or "--follow" in (
            action.option_strings
        ):
            continue
        if isinstance(action, argparse._SubParsersAction):
            sub = action
        elif not action.option_strings:
            if draw(st.integers(0, 9)) < 9:  # Hypothesis favours 0: keep it likely
                values.append(draw(_value_for(action, keys)))
        elif draw(st.integers(0, 9 if action.required else 2)) < (
            9 if action.required else 1
        ):
            items.append(_option(draw, action, keys))
    optionals = [a for a in parser._actions if a.option_strings]
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2]))):  # garbage, rarely
        if optionals and draw(st.booleans()):
            garbled = draw(_garbled(draw(st.sampled_from(optionals)).option_strings[0]))
            items.append([garbled, *draw(st.lists(_values(keys), max_size=1))])
        else:
            items.append([draw(st.one_of(_values(keys), st.just("--")))])
    tokens = [t for item in draw(st.permutations(items)) for t in item]
    tokens = values + tokens if draw(st.booleans()) else tokens + values
    if sub is not None:
        name = draw(st.sampled_from(sorted(sub.choices)))
        if draw(st.integers(0, 9)) == 9:
            name = draw(texts)
        nested = sub.choices.get(name)
        rest = draw(_parser_tokens(nested, keys)) if nested is not None else []
        tokens = [*tokens, name, *rest]
    return tokens


@st.composite
def argv_for(draw, command: str, keys: list[str]):
    """``--db ledger.db [global options] COMMAND [tokens]``, defused."""
    head = ["--db", "ledger.db"]
    if draw(st.integers(0, 4)) == 4:
        head.append("-v")
    configs = ["", "", "", "example", "any"]
    if command == "chat":  # without a configured provider chat refuses at once
        configs = ["example", "example", "", "any"]
    config = draw(st.sampled_from(configs))
    if config == "example":  # a scripted provider, so chat runs turns
        head += ["--config", EXAMPLE_FILES[1]]
    elif config == "any":
        head += ["--config", draw(paths)]
    tokens = draw(_parser_tokens(COMMAND_PARSERS[command], keys))
    if command == "project":
        tokens = ["status" if t == "run" else t for t in tokens]
    return [*head, command, *(_defuse(t) for t in tokens)]


@st.composite
def file_contents(draw):
    """Random bytes, corpus files with a few bytes spliced in, standard input."""
    lines = draw(
        st.lists(
            st.text(st.characters(exclude_characters="\r\n"), max_size=20), max_size=3
        )
    )
    contents = {
        RANDOM_FILE: draw(st.binary(max_size=300)),
        STDIN: "\n".join(lines).encode("utf-8", "surrogatepass"),
    }
    for name in MUTATED_FILES:
        if not CORPUS_FILES:
            contents[name] = draw(st.binary(max_size=100))
            continue
        base = draw(st.sampled_from(CORPUS_FILES)).read_bytes()
        at = draw(st.integers(0, len(base)))
        noise = draw(st.binary(max_size=6))
        cut = draw(st.integers(0, 8))
        contents[name] = base[:at] + noise + base[at + cut :]
    return contents


# -- the check ------------------------------------------------------------------------


def ledger_state(db: Path) -> tuple[int, tuple]:
    with open_store(str(db)) as store:
        report = verify(store)
    return report.events, report.problems


def reported_events(out: str) -> int:
    """The events ``import`` says it wrote (``--json`` may come abbreviated)."""
    if out.startswith("{"):
        sessions = json.loads(out)["sessions"]
        return sum(s["events"] for s in sessions if s["outcome"] == "imported")
    # One file: "imported ..."; several: "FILE: imported ..." per session.
    line = r"^(?:.+?: )?imported .*: (\d+) events$"
    return sum(int(m.group(1)) for m in re.finditer(line, out, re.MULTILINE))


HANG_SECONDS = 60


class Hang(BaseException):
    """The alarm rang. Not ``TimeoutError`` (an ``OSError``, which a reader's
    ``except OSError`` takes for an unreadable file and carries on)."""


def _ring(signum: int, frame: object) -> None:
    del signum, frame
    msg = f"a command ran for more than {HANG_SECONDS} s (a hang)"
    raise Hang(msg)


def _run(capsys, argv: list[str]) -> tuple[int, str, str]:
    previous = signal.signal(signal.SIGALRM, _ring)
    signal.alarm(HANG_SECONDS)
    try:
        code = main(argv)
    except SystemExit as e:  # argparse refusing the vector
        out, err = capsys.readouterr()
        assert e.code == 2, (argv, e.code, err)
        assert "usage:" in err, (argv, err)
        return -2, out, err
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    out, err = capsys.readouterr()
    return code, out, err


def _check_example(
    workdir: Workdir, capsys, command: str, argv: list[str], contents: dict
) -> None:
    reset_workdir(workdir, contents)
    stdin = contents.get(STDIN, b"").decode("utf-8", "surrogatepass")
    sys.stdin = io.StringIO(stdin)  # the fixture's monkeypatch restores the real one
    db = workdir.path / "ledger.db"
    before, _ = ledger_state(db)
    code, out, err = _run(capsys, argv)
    assert code in (-2, 0, 1, 2), (argv, code)
    if code == 2:
        lines = [line for line in err.splitlines() if not line.startswith("{")]
        assert len(lines) == 1, (argv, err)
        assert lines[0].startswith("turnledger: "), (argv, err)
    assert "Traceback" not in err, (argv, err)
    after, problems = ledger_state(db)
    assert not problems, (argv, problems)
    if command == "import":
        # Exit 2 after several files: each file is imported on its own (the
        # others are, and say so); after one, nothing is written or said.
        grew = reported_events(out) if code in (0, 2) else 0
        assert after - before == grew, (argv, code, out, err)
    elif command in READ_ONLY or code in (-2, 2):  # refused: nothing written
        assert after == before, (argv, code, err)


REGRESSIONS: dict[str, list[str]] = {
    "project": [
        f"project status --views {RANDOM_FILE}",
        "project catch-up --views a-directory",
        "project status --views missing/views.db",
        "project status --views postgresql://127.0.0.1:1/nothing",
    ],
    "memory": [
        f"--config {RANDOM_FILE} memory list --agent ops",
        "memory recall --agent ops editor --limit -5",
        f"memory rebuild --agent ops --backend sqlite --out {RANDOM_FILE}",
        f"memory rebuild --agent ops --backend markdown --out {RANDOM_FILE}",
        "memory rebuild --agent ops --backend postgres --url x://y",
        "memory rebuild --agent ops --backend postgres --url postgresql://127.0.0.1:1/x",
    ],
}
"""Vectors that once crashed (found by this fuzzer): every run replays them."""

SETTINGS = settings(
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,  # each example resets the folder
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)


SERVERS = {"serve", "mcp", "collect"}
"""Commands that serve until stopped (tests/web, tests/pipeline/mcp and
tests/pipeline/collect cover their arguments)."""


@pytest.mark.parametrize(
    "command", sorted(set(COMMANDS) - SERVERS), ids=lambda name: name
)
def test_any_arguments_give_a_clean_exit(command, workdir, capsys):
    """Exit 0/1/2 (or argparse's 2), one error line, no partial write, verify ok."""

    @settings(SETTINGS, max_examples=SLOW.get(command, EXAMPLES))
    @given(argv=argv_for(command, workdir.keys), contents=file_contents())
    def check(argv, contents):
        _check_example(workdir, capsys, command, argv, contents)

    random_bytes = {RANDOM_FILE: b"\x80\x00not a database nor UTF-8" * 20}
    for tail in REGRESSIONS.get(command, []):
        argv = ["--db", "ledger.db", *tail.split(" ")]
        check = example(argv=argv, contents=random_bytes)(check)
    check()


PARSER_FORMATS = [
    c
    for a in COMMAND_PARSERS["import"]._actions
    if "--format" in a.option_strings
    for c in a.choices
    if c != "auto"
]


def test_imports_of_mutated_corpus_files_are_all_or_nothing(workdir, capsys):
    """import FILE with every --format: the ledger grows by what it reports, or not."""

    @settings(SETTINGS, max_examples=EXAMPLES * 2)
    @given(
        contents=file_contents(),
        name=st.sampled_from([RANDOM_FILE, *MUTATED_FILES]),
        fmt=st.sampled_from(["auto", *PARSER_FORMATS]),
        session=st.none() | texts,
        as_json=st.booleans(),
    )
    def check(contents, name, fmt, session, as_json):
        argv = ["--db", "ledger.db", "import", name, "--format", fmt]
        argv += ["--agent", "fuzz"] + (["--session", session] if session else [])
        argv += ["--json"] if as_json else []
        _check_example(workdir, capsys, "import", [_defuse(t) for t in argv], contents)

    check()


def test_every_command_is_fuzzed():
    """The parser and the command table agree, so every command is fuzzed."""
    assert set(COMMAND_PARSERS) == set(COMMANDS)
    assert set(COMMANDS) > READ_ONLY
