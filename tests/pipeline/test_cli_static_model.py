"""The CLI loads a model only in commands that embed, once.

Each command runs in a child interpreter with an audit hook that counts the
opens of the shipped table file (``open`` audit events), then reports them,
and whether torch was imported (the transformer, ``provider = "local"``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.pipeline.cli_child import child_report
from turnledger.pipeline import config
from turnledger.projections.memory.embedding import static

CHILD = """
import json, os, sys
table = os.environ["TABLE_FILE"]
opens = []
def hook(event, args):
    if event == "open" and isinstance(args[0], str) and args[0] == table:
        opens.append(event)
sys.addaudithook(hook)
from turnledger.pipeline.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exit:
    code = exit.code
with open(os.environ["REPORT_OUT"], "w") as out:
    json.dump({"code": code, "opens": len(opens), "torch": "torch" in sys.modules}, out)
"""


def run_child(argv: list[str], tmp_path: Path) -> tuple[int, int]:
    """Run the command line in a fresh interpreter: exit code, table opens."""
    env = {
        "TURNLEDGER_DB": str(tmp_path / "ledger.db"),
        "TABLE_FILE": str(static.DATA / static.TABLE_FILE),
    }
    report = child_report(CHILD, argv, tmp_path, env)
    return report["code"], report["opens"]


def torch_loaded(argv: list[str], tmp_path: Path) -> bool:
    """Run the command line in a fresh interpreter; whether torch was imported."""
    env = {"TURNLEDGER_DB": str(tmp_path / "ledger.db"), "TABLE_FILE": ""}
    report = child_report(CHILD, argv, tmp_path, env)
    assert report["code"] == 0, argv
    return bool(report["torch"])


def test_only_commands_that_embed_read_the_table_and_once(tmp_path):
    code, opens = run_child(
        ["memory", "store", "--agent", "a", "pet", "My dog is named Biscuit"],
        tmp_path,
    )
    assert code == 0
    assert opens <= 1  # its vector may be computed before the process ends
    for argv in (
        ["sessions"],
        ["memory", "list", "--agent", "a"],
        ["memory", "get", "--agent", "a", "pet"],
        ["memory", "stats", "--agent", "a"],
    ):
        assert run_child(argv, tmp_path) == (0, 0), argv
    assert run_child(["memory", "recall", "--agent", "a", "my dog"], tmp_path) == (
        0,
        1,
    )


def test_the_transformer_loads_only_in_commands_that_embed(tmp_path):
    (tmp_path / "turnledger.toml").write_text('[embedding]\nprovider = "local"\n')
    assert torch_loaded(
        ["memory", "store", "--agent", "a", "pet", "My dog is named Biscuit"],
        tmp_path,
    )  # its vector: the background thread or the drain at close
    for argv in (
        ["sessions"],
        ["memory", "list", "--agent", "a"],
        ["memory", "get", "--agent", "a", "pet"],
        ["memory", "stats", "--agent", "a"],
        ["memory", "forget", "--agent", "a", "pet"],
    ):
        assert not torch_loaded(argv, tmp_path), argv
    assert torch_loaded(["memory", "recall", "--agent", "a", "my dog"], tmp_path)


@pytest.mark.parametrize("name", ["STATIC_MODEL", "MAX_STATIC_DIMS"])
def test_the_config_spells_the_static_model_as_the_embedder_does(name):
    assert getattr(config, name) == getattr(static, name)
