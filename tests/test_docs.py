"""The documentation runs: every code block of README.md and docs/ is executed.

Python blocks are executed; the `$ turnledger ...` lines of console blocks run, in
order, against a scratch ledger per page; any other block must be marked, on the
line before it, ``<!-- docs-test: not run...: REASON -->``, and such blocks are
few. The generated pages (docs/gen_reference.py) must be what the generator
writes today, and README's test command must be the one CI runs.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from turnledger.pipeline.cli import COMMANDS

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.rglob("*.md"))]
EXE = shutil.which("turnledger") or f"{sys.prefix}/bin/turnledger"
NOT_RUN = re.compile(r"<!-- docs-test: not run[^:]*: (?P<reason>.+?) -->")
MAX_NOT_RUN = 6
"""Blocks that cannot run (installing, serving, CI itself) stay few."""


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    page: Path
    line: int
    lang: str
    code: str
    not_run: str | None


def blocks(page: Path) -> list[Block]:
    """Every fenced block of a page, with the not-run reason marked before it."""
    lines = page.read_text().splitlines()
    found = []
    i = 0
    while i < len(lines):
        opening = re.fullmatch(r"```(\S*)\s*", lines[i])
        if opening is None:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        previous = next(
            (lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), ""
        )
        marked = NOT_RUN.fullmatch(previous.strip())
        found.append(
            Block(
                page=page,
                line=i + 1,
                lang=opening.group(1),
                code="\n".join(lines[i + 1 : end]) + "\n",
                not_run=marked.group("reason") if marked else None,
            )
        )
        i = end + 1
    return found


def _label(page: Path) -> str:
    return str(page.relative_to(ROOT))


def pages_with(lang: str) -> list[Path]:
    return [
        p for p in PAGES if any(b.lang == lang and not b.not_run for b in blocks(p))
    ]


def test_every_block_runs_or_says_why_not():
    """A block is Python or console, or is marked not run with a reason; few are."""
    marked = []
    for page in PAGES:
        for block in blocks(page):
            where = f"{_label(page)}:{block.line}"
            if block.not_run is not None:
                assert len(block.not_run.split()) >= 4, where
                marked.append(where)
            else:
                assert block.lang in ("python", "console"), where
    assert 0 < len(marked) <= MAX_NOT_RUN, marked


@pytest.mark.parametrize("page", pages_with("python"), ids=_label)
def test_python_blocks_run(page, tmp_path, monkeypatch):
    """Every Python block of the page executes, in order, in a scratch folder."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TURNLEDGER_DB", raising=False)
    monkeypatch.delenv("TURNLEDGER_CONFIG", raising=False)
    for block in blocks(page):
        if block.lang == "python" and not block.not_run:
            name = f"{_label(page)}:{block.line}"
            exec(compile(block.code, name, "exec"), {"__name__": "__docs__"})  # noqa: S102 - the docs are the test


@pytest.mark.parametrize("page", pages_with("console"), ids=_label)
def test_console_blocks_run(page, tmp_path):
    """Every `$ turnledger ...` line of the page runs, in order, and exits 0."""
    commands = [
        line[2:]
        for block in blocks(page)
        if block.lang == "console" and not block.not_run
        for line in block.code.splitlines()
        if line.startswith("$ ")
    ]
    assert commands
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    env = {**os.environ, "TURNLEDGER_DB": str(tmp_path / "docs.db")}
    env.pop("TURNLEDGER_CONFIG", None)
    for line in commands:
        command, _, redirect = line.partition(" > ")
        args = shlex.split(command)
        assert args[0] == "turnledger", line
        done = subprocess.run(
            [EXE, *args[1:]],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=False,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, (line, done.stdout[-800:], done.stderr[-800:])
        if redirect:
            (tmp_path / redirect.strip()).write_text(done.stdout)


def test_readme_commands_are_the_ci_commands():
    """.ci/run runs README's test command verbatim; the first command is the demo."""
    sh = [b.code.strip() for b in blocks(README) if b.lang == "sh"]
    assert sh[1] == (
        "python3 -m venv .venv && .venv/bin/pip install -q -e '.[dev]' "
        "&& .venv/bin/python -m pytest"
    )
    assert sh[1] in (ROOT / ".ci" / "run").read_text()
    assert sh[0].endswith(".venv/bin/turnledger demo")


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_is_in_the_cli_guide(name):
    """Each command has a row in the hand-written CLI guide and a docstring."""
    assert f"| `turnledger {name}" in (DOCS / "guides" / "cli.md").read_text()
    assert COMMANDS[name].__doc__


# The generator and the registry are read in a fresh interpreter: a test that
# registers an event type or an upcaster of its own (tests/ledger/test_events.py)
# leaves it in this process's registry, which the committed pages never show.
_FRESH_CHECK = """
import importlib.util, json, sys
from pathlib import Path
spec = importlib.util.spec_from_file_location("gen_reference", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
stale = []
for path, content in module.pages().items():
    data = content.encode() if isinstance(content, str) else content
    if not path.exists() or path.read_bytes() != data:
        stale.append(str(path))
from turnledger.ledger.events.registry import known_tags
print(json.dumps({"stale": stale, "tags": list(known_tags())}))
"""


def _fresh_generation() -> dict[str, list[str]]:
    done = subprocess.run(
        [sys.executable, "-c", _FRESH_CHECK, str(DOCS / "gen_reference.py")],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return json.loads(done.stdout)


def test_generated_pages_are_current():
    """Each committed generated page is what docs/gen_reference.py writes today."""
    stale = [str(Path(path).relative_to(ROOT)) for path in _fresh_generation()["stale"]]
    assert not stale, f"stale, run python docs/gen_reference.py: {stale}"


def test_reference_covers_every_command_key_and_event():
    """The generated reference names every command, config section and event tag."""
    cli = (DOCS / "reference" / "cli.md").read_text()
    assert all(f"### `turnledger {name}`" in cli for name in COMMANDS)
    config = (DOCS / "reference" / "config.md").read_text()
    for key in ("`[runtime]`", "`max_input_bytes`", "`[pricing.<model>]`", "`probes`"):
        assert key in config
    assert (
        "| `max_input_bytes` | int | `268_435_456` | 1 to 1,099,511,627,776 |" in config
    )
    events = (DOCS / "reference" / "events.md").read_text()
    tags = _fresh_generation()["tags"]
    assert tags
    assert all(f"## {tag}\n" in events for tag in tags)


def test_relative_links_resolve():
    """Every relative link of README and docs/ names a file that exists."""
    for page in PAGES:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if target.startswith(("http://", "https://", "#", "mailto:")):
                continue
            path = (page.parent / target.split("#", 1)[0]).resolve()
            assert path.exists(), f"{_label(page)}: {target}"


def test_named_scripts_exist():
    """Every `benchmarks/...` and `examples/...` path the pages name exists."""
    for page in PAGES:
        for path in re.findall(
            r"`((?:benchmarks|examples)/[\w/.-]+)`", page.read_text()
        ):
            assert (ROOT / path).exists(), f"{_label(page)}: {path}"


def _resolves(dotted: str) -> bool:
    """Whether a dotted name (module, then attributes) exists in the package."""
    parts = (
        dotted if dotted.startswith("turnledger.") else f"turnledger.{dotted}"
    ).split(".")
    for i in range(len(parts), 1, -1):
        try:
            found = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attribute in parts[i:]:
            if not hasattr(found, attribute):
                return False
            found = getattr(found, attribute)
        return True
    return False


def test_named_modules_and_files_exist():
    """Every module, object and source file of the package the pages name exists."""
    layers = r"(?:turnledger|ledger|policies|projections|pipeline|adapters)"
    for page in PAGES:
        text = page.read_text()
        for dotted in re.findall(rf"`({layers}\.[\w.]+)`", text):
            if dotted.endswith((".toml", ".db")):
                continue
            assert _resolves(dotted), f"{_label(page)}: {dotted}"
        for path in re.findall(rf"`({layers}/[\w/.-]+\.py)`", text):
            assert (ROOT / path).exists(), f"{_label(page)}: {path}"
