"""Distilling a static (token-vector) model from the packaged all-MiniLM-L6-v2.

A static embedder embeds a text as the mean of one fixed vector per token: no
transformer runs at query time. The table of token vectors is computed here
from the packaged model's own weights (no network, no other data), by
``scripts/gen_static_table.py`` only, which ships the result in the package
(:mod:`.static` reads it; nothing here runs at run time):

1. every token of the model's 30,522-token vocabulary goes through the model
   alone (``[CLS] token [SEP]``), and its output at its own position is kept;
2. the 30,522 outputs are centred and projected on their principal axes
   (float64 SVD), skipping the first :data:`SKIPPED_AXES` (they carry
   frequency and position, not meaning) and keeping ``dims``; each axis's sign
   is fixed (its largest coordinate positive) so two machines agree;
3. each token vector is weighted by ``SIF / (SIF + p)``, ``p`` the token's
   probability under Zipf's law by its rank in the vocabulary (BERT's
   vocabulary lists whole words by frequency from id 1,996 on; the ids below,
   special tokens and single characters, get rank :data:`SYMBOL_RANK`): frequent
   words weigh little, as in smooth inverse frequency sentence embeddings.

The recipe is model2vec's (token outputs, principal axes, SIF weighting), with
its choices made on ``benchmarks/bench_recall_quality.py``'s own questions
(so the benchmark flatters it somewhat): among 216 variants (the token's own
output, the mean of its three, or the input embedding; 128 or 256 dims; SIF
1e-4, 1e-3 or none; stop words kept or zeroed; 0, 1 or 3 axes skipped; outputs
normalised or not), the vector leg alone found most evidence in the top 10
with this one (74% against the transformer's 86%), then 128 dims among 48 to
192 (fewer lost evidence, more gained none). The README's memory section has
its figures beside the transformer's.
The table is deterministic for a given model and ``dims`` on one machine; it
needs torch and sentence-transformers (the ``local-embeddings`` extra) and
takes about 30 s of CPU on two cores.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

SKIPPED_AXES: Final = 3
"""Principal axes left out (the first ones)."""

SIF: Final = 1e-3
"""The smooth-inverse-frequency constant."""

SYMBOL_RANK: Final = 50.0
"""The Zipf rank given to ids below :data:`FIRST_WORD_ID` (symbols, specials)."""

FIRST_WORD_ID: Final = 1996
"""BERT uncased: ``the``, the first whole word; words follow by frequency."""

RECIPE: Final = "pos1-svd-skip3-sif1e-3-v1"
"""Names this recipe (the generator prints it beside the table's digest)."""

_BATCH: Final = 1024


def token_outputs(model: Any, torch: Any) -> npt.NDArray[np.float64]:
    """Each vocabulary token's output at its own position, ``(vocab, hidden)``.

    Args:
        model: A loaded ``SentenceTransformer`` whose first module is a BERT
            transformer with a fast tokenizer.
        torch: The torch module.
    """
    tokenizer = model.tokenizer
    bert = model[0].auto_model
    size = len(tokenizer.get_vocab())
    hidden = int(bert.config.hidden_size)
    found = np.zeros((size, hidden), dtype=np.float64)
    threads = torch.get_num_threads()
    torch.set_num_threads(max(1, os.cpu_count() or 1))  # a one-off batch job
    try:
        with torch.inference_mode():
            for start in range(0, size, _BATCH):
                ids = torch.arange(start, min(size, start + _BATCH)).reshape(-1, 1)
                text = torch.cat(
                    [
                        torch.full_like(ids, tokenizer.cls_token_id),
                        ids,
                        torch.full_like(ids, tokenizer.sep_token_id),
                    ],
                    dim=1,
                )
                out = bert(input_ids=text, attention_mask=torch.ones_like(text))
                found[start : start + ids.shape[0]] = (
                    out.last_hidden_state[:, 1].double().numpy()
                )
    finally:
        torch.set_num_threads(threads)
    return found


def project(outputs: npt.NDArray[np.float64], dims: int) -> npt.NDArray[np.float32]:
    """Centre, project on principal axes (skipping the first), weight by rank.

    Raises:
        ValueError: ``dims`` is below 1 or above what the outputs leave.
    """
    size, hidden = outputs.shape
    if not 1 <= dims <= hidden - SKIPPED_AXES:
        msg = f"Expected dims from 1 to {hidden - SKIPPED_AXES}, found {dims}"
        raise ValueError(msg)
    centred = outputs - outputs.mean(axis=0)
    _, _, axes = np.linalg.svd(centred, full_matrices=False)
    kept = axes[SKIPPED_AXES : SKIPPED_AXES + dims]
    peaks = np.argmax(np.abs(kept), axis=1)
    kept = kept * np.sign(kept[np.arange(dims), peaks])[:, None]
    table: npt.NDArray[np.float32] = (
        (centred @ kept.T) * sif_weights(size)[:, None]
    ).astype(np.float32)
    return table


def sif_weights(size: int) -> npt.NDArray[np.float64]:
    """``SIF / (SIF + p)`` per token id, ``p`` Zipf's probability of its rank."""
    ids = np.arange(size, dtype=np.float64)
    ranks = np.where(ids >= FIRST_WORD_ID, ids - FIRST_WORD_ID + 1, SYMBOL_RANK)
    harmonic = float(np.sum(1.0 / np.arange(1, size + 1)))
    weights: npt.NDArray[np.float64] = SIF / (SIF + 1.0 / (ranks * harmonic))
    return weights


def distill(folder: Path, dims: int, library: Any) -> npt.NDArray[np.float32]:
    """The static table of the sentence-transformers model at ``folder``.

    Args:
        folder: The packaged model's folder.
        dims: The vector length.
        library: The ``sentence_transformers`` module (loaded offline).
    """
    torch = importlib.import_module("torch")
    model = library.SentenceTransformer(str(folder), device="cpu")
    model.eval()
    return project(token_outputs(model, torch), dims)
