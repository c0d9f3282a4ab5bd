"""``memory reindex``: progress lines on stderr, counts in ``--json``.

Rows stored while embeddings were off lack vectors; ``reindex`` with the local
model configured embeds them in batches of 64, printing a line per batch when
stderr is not a terminal, and reports how many it embedded and how many still
lack one.
"""

from __future__ import annotations

import json

import pytest

from turnledger.ledger.key_check import CIPHER_KEY_ENV
from turnledger.pipeline.cli import main

pytest.importorskip("sentence_transformers")


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("TURNLEDGER_DB", "TURNLEDGER_CONFIG", "TURNLEDGER_VIEWS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv(CIPHER_KEY_ENV, raising=False)


def test_reindex_prints_a_line_per_batch_and_counts(capsys, tmp_path):
    (tmp_path / "turnledger.toml").write_text('[embedding]\nprovider = "none"\n')
    for n in range(66):
        code = main(["memory", "store", "--agent", "ops", f"k{n}", f"note {n} on ops"])
        assert code == 0
    capsys.readouterr()
    (tmp_path / "turnledger.toml").write_text('[embedding]\nprovider = "local"\n')
    code = main(["memory", "reindex", "--agent", "ops", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    report = json.loads(out)
    assert (report["embedded"], report["pending"]) == (66, 0)
    assert report["dims"] == 384
    lines = [line for line in err.splitlines() if line.startswith("reindex [")]
    assert [line.rsplit(" ", 1)[1] for line in lines] == ["64/66", "66/66"]
    code = main(["memory", "reindex", "--agent", "ops", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert (json.loads(out)["embedded"], json.loads(out)["pending"]) == (0, 0)
    assert "reindex [" not in err
