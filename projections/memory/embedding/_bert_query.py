"""One text through a BERT sentence model, op by op: the recall query's fast path.

``SentenceTransformer`` runs a query through transformers' ``BertModel``: about
forty Python-level modules and a hundred and fifty torch calls for a ten-token
text, with every weight matrix converted to the kernel's layout on every call.
For a single short text that overhead, not the arithmetic, is most of the
cost. :class:`BertQueryEncoder` runs the same network (same weights, same
tokenizer and truncation, mean pooling and normalising as the model's own
modules) as a short sequence of torch calls:

- the six linear maps of each layer use weights packed once for oneDNN (in
  bfloat16 where asked; the query, key and value maps as one);
- the residual stream, layer norms, attention and pooling stay float32 (so a
  bfloat16 pass keeps cosine >= 0.9999 with the float32 model, see
  :meth:`BertQueryEncoder.build`, which checks it on probe texts and declines
  otherwise).

Only the shape the packaged all-MiniLM-L6-v2 has is supported: a BERT encoder
with absolute positions and exact GELU, mean pooling, then normalising.

The bfloat16 variant depends on the CPU: torch's oneDNN packs bfloat16 weights
only where the CPU has AVX-512 (BW, VL and DQ) or AVX-NE-CONVERT on x86
(:func:`bfloat16_fast_path`); elsewhere :meth:`BertQueryEncoder.build` declines
it. The environment switch ``TURNLEDGER_FAST_PATHS=0`` (:data:`FAST_PATHS`)
turns off every path that depends on the CPU, this one included (see
:mod:`.local` for the others), so a machine that has the features can run the
fallbacks.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import Any, Final

import numpy as np
import numpy.typing as npt

PROBES: Final = (
    "which text editor do I program in",
    "",
    "Ünïcödé, emoji 🎉 and 日本語 text in one query",
    "a long text that the model truncates " * 60,
)
"""Texts :meth:`BertQueryEncoder.build` checks the fast path on."""

MIN_COSINE: Final = 0.9999
"""The least cosine with the model's own float32 vector the fast path must keep."""

FAST_PATHS: Final = "TURNLEDGER_FAST_PATHS"
"""The environment switch: ``0`` turns off every path that depends on the CPU."""

Linear = Callable[[Any], Any]

_QKV: Final = ("query", "key", "value")


def fast_paths_on() -> bool:
    """Whether :data:`FAST_PATHS` leaves the CPU-dependent paths on (not ``0``)."""
    return os.environ.get(FAST_PATHS, "").strip() != "0"


def bfloat16_fast_path() -> bool:
    """Whether :meth:`BertQueryEncoder.build` may build the bfloat16 variant here.

    False when :data:`FAST_PATHS` is ``0``, or when torch has oneDNN but its
    bfloat16 kernels do not run on this CPU (on x86 they need AVX-512 BW, VL
    and DQ, or AVX-NE-CONVERT). Without oneDNN the linear maps run through
    ``torch.nn.functional.linear``, whose bfloat16 runs on any CPU.
    """
    if not fast_paths_on():
        return False
    import torch  # noqa: PLC0415 - only with the local-embeddings extra

    mkldnn: Any = torch.backends.mkldnn  # untyped in torch
    if not mkldnn.is_available():
        return True
    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())  # noqa: SLF001


class BertQueryEncoder:
    """Embeds one text with a BERT sentence model's weights, op by op.

    Build it with :meth:`build`; call it with a text to get a ``(1, dims)``
    float32 unit vector.
    """

    def __init__(
        self,
        torch: Any,
        tokenizer: Any,
        weights: dict[str, Any],
        config: Any,
        *,
        bfloat16: bool,
    ) -> None:
        self._torch = torch
        self._tokenizer = tokenizer
        self._functional = torch.nn.functional
        self._hidden = int(config.hidden_size)
        self._heads = int(config.num_attention_heads)
        self._eps = float(config.layer_norm_eps)
        self._dtype = torch.bfloat16 if bfloat16 else torch.float32
        self._word = weights["embeddings.word_embeddings.weight"]
        self._position = weights["embeddings.position_embeddings.weight"]
        self._type0 = weights["embeddings.token_type_embeddings.weight"][0]
        self._norm = (
            weights["embeddings.LayerNorm.weight"],
            weights["embeddings.LayerNorm.bias"],
        )
        self._layers = [
            self._layer(weights, f"encoder.layer.{i}.")
            for i in range(int(config.num_hidden_layers))
        ]

    @classmethod
    def build(cls, model: Any, *, bfloat16: bool) -> BertQueryEncoder | None:
        """Return the fast path for a loaded ``SentenceTransformer``, or None.

        None when the model is not a BERT encoder with mean pooling and
        normalising, when ``bfloat16`` is asked where
        :func:`bfloat16_fast_path` is False, or when the fast path's vector
        for any of :data:`PROBES` has cosine below :data:`MIN_COSINE` with the
        model's own float32 ``encode`` (or fails): the caller then keeps the
        model's own modules.
        """
        if bfloat16 and not bfloat16_fast_path():
            return None
        try:
            encoder = cls._from_model(model, bfloat16=bfloat16)
            if encoder is None:
                return None
            reference = model.encode(
                list(PROBES), convert_to_numpy=True, normalize_embeddings=True
            )
            for text, expected in zip(PROBES, reference, strict=True):
                if float(encoder(text)[0] @ expected) < MIN_COSINE:
                    return None
        except Exception:  # noqa: BLE001 - any failure: the model's own path is used
            return None
        return encoder

    @classmethod
    def _from_model(cls, model: Any, *, bfloat16: bool) -> BertQueryEncoder | None:
        import torch  # noqa: PLC0415 - only with the local-embeddings extra

        names = [type(module).__name__ for module in model]
        if names != ["Transformer", "Pooling", "Normalize"]:
            return None
        transformer, pooling = model[0], model[1]
        auto = getattr(transformer, "auto_model", None)
        config = getattr(auto, "config", None)
        supported = (
            type(auto).__name__ == "BertModel"
            and getattr(config, "position_embedding_type", "absolute") == "absolute"
            and getattr(config, "hidden_act", None) == "gelu"
            and getattr(pooling, "pooling_mode", None) == "mean"
            and not getattr(transformer, "do_lower_case", False)
        )
        if auto is None or not supported:
            return None
        backend = transformer.tokenizer.backend_tokenizer
        tokenizer = type(backend).from_str(backend.to_str())
        tokenizer.no_padding()
        tokenizer.enable_truncation(int(transformer.max_seq_length))
        weights = {
            name: tensor.detach().float().contiguous()
            for name, tensor in auto.state_dict().items()
        }
        return cls(torch, tokenizer, weights, config, bfloat16=bfloat16)

    def _linear(self, weight: Any, bias: Any, *, gelu: bool = False) -> Linear:
        """``x @ weight.T + bias`` (then exact GELU), the weight packed once.

        oneDNN's linear with a packed weight (and the GELU fused into it) where
        torch has oneDNN; else ``torch.nn.functional.linear``.
        """
        torch, f = self._torch, self._functional
        w, b = weight.to(self._dtype), bias.to(self._dtype)
        if torch.backends.mkldnn.is_available():
            ops = torch.ops.mkldnn
            packed = ops._reorder_linear_weight(w)  # noqa: SLF001 - torch's op
            pointwise = ops._linear_pointwise  # noqa: SLF001
            attr = "gelu" if gelu else "none"
            return lambda x: pointwise(x, packed, b, attr, [], "none")
        if gelu:
            return lambda x: f.gelu(f.linear(x, w, b))
        return lambda x: f.linear(x, w, b)

    def _layer(self, weights: dict[str, Any], prefix: str) -> tuple[Any, ...]:
        torch = self._torch
        attention = prefix + "attention."
        qkv = self._linear(
            torch.cat([weights[f"{attention}self.{n}.weight"] for n in _QKV]),
            torch.cat([weights[f"{attention}self.{n}.bias"] for n in _QKV]),
        )
        return (
            qkv,
            self._linear(
                weights[attention + "output.dense.weight"],
                weights[attention + "output.dense.bias"],
            ),
            weights[attention + "output.LayerNorm.weight"],
            weights[attention + "output.LayerNorm.bias"],
            self._linear(
                weights[prefix + "intermediate.dense.weight"],
                weights[prefix + "intermediate.dense.bias"],
                gelu=True,
            ),
            self._linear(
                weights[prefix + "output.dense.weight"],
                weights[prefix + "output.dense.bias"],
            ),
            weights[prefix + "output.LayerNorm.weight"],
            weights[prefix + "output.LayerNorm.bias"],
        )

    def __call__(self, text: str) -> npt.NDArray[np.float32]:
        """Return the text's unit vector, shape ``(1, dims)``."""
        torch, f = self._torch, self._functional
        ids = self._tokenizer.encode(text).ids
        n, hidden, heads, eps, dtype = (
            len(ids),
            self._hidden,
            self._heads,
            self._eps,
            self._dtype,
        )
        width = hidden // heads
        scale = 1.0 / math.sqrt(width)
        shape = (hidden,)
        with torch.inference_mode():
            x = self._word[torch.tensor(ids)] + self._position[:n] + self._type0
            x = f.layer_norm(x, shape, *self._norm, eps)
            for qkv, out, g1, b1, up, down, g2, b2 in self._layers:
                q, k, v = qkv(x.to(dtype)).float().view(n, 3, heads, width).unbind(1)
                scores = torch.einsum("ihd,jhd->hij", q, k).mul_(scale).softmax(-1)
                mixed = torch.einsum("hij,jhd->ihd", scores, v).reshape(n, hidden)
                x = f.layer_norm(out(mixed.to(dtype)).float() + x, shape, g1, b1, eps)
                inner = down(up(x.to(dtype))).float()  # up: linear, then GELU
                x = f.layer_norm(inner + x, shape, g2, b2, eps)
            pooled = x.mean(0, keepdim=True)
            vector = f.normalize(pooled, p=2.0, dim=1)
            found: npt.NDArray[np.float32] = vector.numpy()
        return found
