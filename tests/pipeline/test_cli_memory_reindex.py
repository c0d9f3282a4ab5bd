"""``memory reindex``: progress lines on stderr, counts in ``--json``.

Rows stored while embeddings were off lack vectors; ``reindex`` with the local
model configured embeds them in batches of 64, printing a line per batch when
stderr is not a terminal, and reports how many it embedded and how many still
lack one. The same on a PostgreSQL memory with the static model (numpy only),
where a store then leaves nothing pending once its process has closed (the
background thread, then the drain at close).
"""

from __future__ import annotations

import json

import psycopg
import pytest

from turnledger.ledger.key_check import CIPHER_KEY_ENV
from turnledger.pipeline.cli import main
from turnledger.projections.memory.postgres import split_url


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("TURNLEDGER_DB", "TURNLEDGER_CONFIG", "TURNLEDGER_VIEWS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv(CIPHER_KEY_ENV, raising=False)


def test_reindex_prints_a_line_per_batch_and_counts(capsys, tmp_path):
    pytest.importorskip("sentence_transformers")
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


def _config(tmp_path, url: str, provider: str) -> None:
    (tmp_path / "turnledger.toml").write_text(
        f'[agents.ops]\nmemory = "postgres"\n'
        f'[storage.postgres.default]\nurl = "{url}"\n'
        f'[embedding]\nprovider = "{provider}"\n'
    )


def _unembedded(url: str) -> int:
    conninfo, schema = split_url(url)
    with psycopg.connect(conninfo) as conn:
        (count,) = conn.execute(
            f'SELECT count(*) FROM "{schema}".turnledger_memories '
            "WHERE embedding IS NULL"
        ).fetchone()
    return int(count)


@pytest.mark.postgres
def test_reindex_embeds_the_rows_a_postgres_store_lacks(capsys, tmp_path, postgres_url):
    _config(tmp_path, postgres_url, "none")
    for n in range(66):
        code = main(["memory", "store", "--agent", "ops", f"k{n}", f"note {n} on ops"])
        assert code == 0
    capsys.readouterr()
    assert _unembedded(postgres_url) == 66
    _config(tmp_path, postgres_url, "static")
    code = main(["memory", "reindex", "--agent", "ops", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    report = json.loads(out)
    assert (report["embedded"], report["pending"]) == (66, 0)
    assert report["dims"] > 0
    lines = [line for line in err.splitlines() if line.startswith("reindex [")]
    assert [line.rsplit(" ", 1)[1] for line in lines] == ["64/66", "66/66"]
    assert _unembedded(postgres_url) == 0
    code = main(["memory", "store", "--agent", "ops", "fresh", "a new note"])
    assert code == 0, capsys.readouterr().err
    assert _unembedded(postgres_url) == 0  # embedded before the process ended
    code = main(["memory", "recall", "--agent", "ops", "new note", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "fresh" in out
