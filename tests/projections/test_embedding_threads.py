"""``[embedding] threads``: parsed, refused where it means nothing, honoured.

The model is the real packaged all-MiniLM-L6-v2. Torch's thread count is one per
process, so every test here puts it back to 1 (what the other modules' embedders
were made with).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from tests.contracts.memory_contract import T0
from turnledger.pipeline.config import ConfigError, parse_config
from turnledger.pipeline.memory.wiring import MemoryWiring
from turnledger.projections.memory.embedding.local import LocalEmbedder
from turnledger.projections.memory.protocol import NewMemory
from turnledger.projections.memory.sqlite import SQLiteMemory

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _one_torch_thread_after() -> Iterator[None]:
    yield
    torch.set_num_threads(1)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('provider = "local"\nthreads = 0', "expected 1 to 256, found 0"),
        ('provider = "local"\nthreads = 1000', "expected 1 to 256, found 1000"),
        (
            "threads = 2",
            "expected only with provider = \"local\".*found provider = 'static'",
        ),
        (
            'provider = "none"\nthreads = 2',
            "expected only with provider = \"local\".*found provider = 'none'",
        ),
        (
            'provider = "openai-compatible"\nthreads = 2',
            "expected only with.*found provider = 'openai-compatible'",
        ),
    ],
)
def test_unusable_threads_are_refused_at_load(text, expected):
    with pytest.raises(ConfigError, match=rf"embedding\.threads: {expected}"):
        parse_config(f"[embedding]\n{text}\n")


def test_the_configured_threads_reach_the_model(tmp_path):
    config = parse_config('[embedding]\nprovider = "local"\nthreads = 2\n')
    ledger = str(tmp_path / "ledger.db")
    embedder = MemoryWiring(config, ledger_url=ledger).embedder()
    assert isinstance(embedder, LocalEmbedder)
    assert embedder.threads == 2
    embedder.loaded()  # torch's thread count is set when the model loads
    assert torch.get_num_threads() == 2


def _embed_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("memory-embed")}


@pytest.mark.parametrize("threads", [1, 2])
def test_a_multithreaded_model_embeds_a_hybrid_query_on_the_callers_thread(
    tmp_path, threads
):
    """One thread: the query is embedded beside the keyword leg; more: in line."""
    embedder = LocalEmbedder(threads=threads)
    earlier = _embed_threads()  # another test's backend may still be closing
    with SQLiteMemory(tmp_path / "memory.db", embedder=embedder, cache_size=0) as mem:
        for key, content in (
            ("editor", "Helix is my editor"),
            ("mars", "dust on Mars"),
        ):
            mem.store(
                NewMemory(agent="a", key=key, content=content, entry_id=key, at=T0)
            )
        found = mem.recall("which text editor do I program in", agents=["a"])
        assert [entry.key for entry in found][:1] == ["editor"]
        assert bool(_embed_threads() - earlier) is (threads == 1)
