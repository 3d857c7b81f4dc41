"""Which released tensor is stored in which format.

The names are the release's own (as vLLM 0.33.0's deepseek_v41 loader reads them
before its renames): ``embed.weight``, ``layers.{i}.attn.wq_a.weight``,
``layers.{i}.ffn.experts.{e}.w1.weight``, ``norm.weight``, ``head.weight``. A quantised
weight ``<m>.weight`` has its scales in ``<m>.scale``.

Formats (HF model doc "Loading the released checkpoint", and vLLM's loader/quant config):

- MXFP4: routed experts ``layers.*.ffn.experts.*.w{1,2,3}``;
- FP8 e4m3, 32 x 32 ue8m0 blocks: the attention projections ``wq_a wq_b wkv wo_a wo_b``,
  the indexer's ``wq_b``, the shared expert ``w1 w2 w3``, ``engram.wkv``;
- FP8 e4m3, 1 x 32 ue8m0 blocks (one scale row per table row): ``engram.embed``;
- float32: mHC (``hc_*``), attention sinks, gate biases (the release keeps them fp32);
- bfloat16: everything else (embeddings, head, norms, gate, compressor, indexer
  ``wk``/``weights_proj``, Engram ``q_weight``/``k_weight``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

FP8_BLOCK = (32, 32)
FP8_ROW_BLOCK = (1, 32)
MXFP4_BLOCK = 32

_MXFP4 = re.compile(r"(^|\.)ffn\.experts\.\d+\.w[123]\.weight$")
_FP8 = re.compile(
    r"(^|\.)(attn\.(wq_a|wq_b|wkv|wo_a|wo_b)|attn\.indexer\.wq_b|ffn\.shared_experts\.w[123]"
    r"|engram\.wkv)\.weight$"
)
_FP8_ROWS = re.compile(r"(^|\.)engram\.embed\.weight$")
_FP32 = re.compile(r"(^|\.)(hc_[a-z_]+|attn_sink|attn\.attn_sink|ffn\.gate\.bias|ffn\.gate\.bias_vl)$|"
                   r"(^|\.)hc_[a-z_]+\.[a-z]+$")
# Released tensors the text runtime does not model (vLLM skips them too).
IGNORED_PREFIXES = ("mtp.", "vision.", "aligner.", "image_")


@dataclass(frozen=True)
class StoredFormat:
    """How one tensor is stored: ``kind`` is fp8 | mxfp4 | float32 | bfloat16 | keep."""

    kind: str
    block: tuple[int, int] | None = None


def scale_name(weight_name: str) -> str:
    """``<m>.weight`` -> ``<m>.scale``."""
    if not weight_name.endswith(".weight"):
        raise ValueError(f"{weight_name}: only .weight tensors carry a scale")
    return weight_name[: -len(".weight")] + ".scale"


def release_format(name: str, ndim: int) -> StoredFormat:
    """The released storage format of tensor ``name`` (with ``ndim`` dimensions)."""
    if ndim == 2 and _MXFP4.search(name):
        return StoredFormat("mxfp4", (1, MXFP4_BLOCK))
    if ndim == 2 and _FP8_ROWS.search(name):
        return StoredFormat("fp8", FP8_ROW_BLOCK)
    if ndim == 2 and _FP8.search(name):
        return StoredFormat("fp8", FP8_BLOCK)
    if _FP32.search(name):
        return StoredFormat("float32")
    return StoredFormat("bfloat16")


def is_ignored(name: str) -> bool:
    return name.startswith(IGNORED_PREFIXES)
