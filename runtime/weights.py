"""V41Weights: every parameter of the model, under the released checkpoint names.

``state_dict()`` keys are the tensor names of the released DeepSeek-V4.1 checkpoint as
vLLM 0.33.0's loader reads them (after dequantisation), e.g. ``embed.weight``,
``layers.3.attn.wq_a.weight``, ``layers.2.attn.compressor.wgate.weight``,
``layers.8.attn.indexer.weights_proj.weight``, ``layers.5.ffn.experts.7.w1.weight``,
``layers.1.engram.embed.weight``, ``norm.weight``, ``head.weight``. The checkpoint
loader fills an empty ``V41Weights(config)`` with ``load_state_dict``; models only
read from it, so two models with different RuntimeOptions share one object.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from runtime.config import V41Config
from runtime.quant import fake_quant_fp8_ue8m0

# Tensors the release stores in float32 whatever the model dtype (mHC, sinks, gate bias).
FLOAT32_SUFFIXES = (
    "hc_attn_fn", "hc_attn_base", "hc_attn_scale", "hc_ffn_fn", "hc_ffn_base", "hc_ffn_scale",
    "attn_sink", "ffn.gate.bias",
)


@dataclass(frozen=True)
class ParamSpec:
    """One released tensor: its name, shape and how a random model initialises it."""

    name: str
    shape: tuple[int, ...]
    init: str  # "linear" (std 1/sqrt(fan_in)), "ones", "zeros", "normal" (std 1), "hc_fn", "small"

    @property
    def float32(self) -> bool:
        return self.name.endswith(FLOAT32_SUFFIXES)


def parameter_specs(config: V41Config) -> list[ParamSpec]:
    """All tensors of a V4.1 text backbone, in a fixed order."""
    c = config
    d, hd, q_rank = c.hidden_size, c.head_dim, c.q_lora_rank
    mix = (2 + c.hc_mult) * c.hc_mult
    specs = [ParamSpec("embed.weight", (c.vocab_size, d), "normal")]
    for i in range(c.num_hidden_layers):
        p = f"layers.{i}."
        for site in ("attn", "ffn"):
            specs += [
                ParamSpec(p + f"hc_{site}_fn", (mix, c.hc_mult * d), "hc_fn"),
                ParamSpec(p + f"hc_{site}_base", (mix,), "small"),
                ParamSpec(p + f"hc_{site}_scale", (3,), "ones"),
            ]
        specs += [
            ParamSpec(p + "attn_norm.weight", (d,), "ones"),
            ParamSpec(p + "ffn_norm.weight", (d,), "ones"),
            ParamSpec(p + "attn.wq_a.weight", (q_rank, d), "linear"),
            ParamSpec(p + "attn.q_norm.weight", (q_rank,), "ones"),
            ParamSpec(p + "attn.wq_b.weight", (c.num_attention_heads * hd, q_rank), "linear"),
            ParamSpec(p + "attn.wkv.weight", (hd, d), "linear"),
            ParamSpec(p + "attn.kv_norm.weight", (hd,), "ones"),
            ParamSpec(p + "attn.wo_a.weight",
                      (c.o_groups * c.o_lora_rank, c.num_attention_heads * hd // c.o_groups), "linear"),
            ParamSpec(p + "attn.wo_b.weight", (d, c.o_groups * c.o_lora_rank), "linear"),
            ParamSpec(p + "attn.attn_sink", (c.num_attention_heads,), "small"),
        ]
        if i in c.kv_source_layer_ids:
            specs.append(ParamSpec(p + "attn.compressor.wkv.weight", (hd, d), "linear"))
            if c.compress_ratios[i] > 1:
                specs.append(ParamSpec(p + "attn.compressor.wgate.weight", (hd, d), "linear"))
            specs += [
                ParamSpec(p + "attn.compressor.norm.weight", (hd,), "ones"),
                ParamSpec(p + "attn.indexer.wk.weight", (c.index_head_dim, hd), "linear"),
                ParamSpec(p + "attn.indexer.k_norm.weight", (c.index_head_dim,), "ones"),
            ]
        if i in c.index_source_layer_ids:
            specs += [
                ParamSpec(p + "attn.indexer.wq_b.weight", (c.index_n_heads * c.index_head_dim, q_rank), "linear"),
                ParamSpec(p + "attn.indexer.weights_proj.weight", (c.index_n_heads, d), "linear"),
            ]
        inter = c.moe_intermediate_size
        specs += [
            ParamSpec(p + "ffn.gate.weight", (c.n_routed_experts, d), "linear"),
            ParamSpec(p + "ffn.gate.bias", (c.n_routed_experts,), "small"),
        ]
        for e in range(c.n_routed_experts):
            specs += _expert_specs(p + f"ffn.experts.{e}.", d, inter)
        if c.n_shared_experts:
            specs += _expert_specs(p + "ffn.shared_experts.", d, inter * c.n_shared_experts)
        if i in c.engram_layer_ids:
            k = c.engram_layer_ids.index(i)
            cols = (c.engram_max_ngram_size - 1) * c.engram_n_heads
            specs += [
                ParamSpec(p + "engram.embed.weight", (c.engram_num_embeddings[k], c.engram_head_dim), "normal"),
                ParamSpec(p + "engram.wkv.weight", ((c.hc_mult + 1) * d, cols * c.engram_head_dim), "linear"),
                ParamSpec(p + "engram.q_weight", (c.hc_mult, d), "ones"),
                ParamSpec(p + "engram.k_weight", (c.hc_mult, d), "ones"),
            ]
    specs += [
        ParamSpec("norm.weight", (d,), "ones"),
        ParamSpec("head.weight", (c.vocab_size, d), "linear"),
    ]
    return specs


def _expert_specs(prefix: str, d: int, inter: int) -> list[ParamSpec]:
    return [
        ParamSpec(prefix + "w1.weight", (inter, d), "linear"),
        ParamSpec(prefix + "w2.weight", (d, inter), "linear"),
        ParamSpec(prefix + "w3.weight", (inter, d), "linear"),
    ]


class V41Weights(nn.Module):
    """Parameter container whose module tree spells the released tensor names.

    ``engram_token_map`` is the checkpoint's Engram compressed-token map
    (``runtime/engram_map.py``; set by the checkpoint loader from the release
    tokenizer), or None for the identity map of the toolkit's small vocabularies. It
    travels with the weights because it belongs to the checkpoint, like they do."""

    def __init__(self, config: V41Config, dtype: torch.dtype | None = None,
                 device: torch.device | str | None = None):
        super().__init__()
        self.config = config
        self.engram_token_map = None
        model_dtype = dtype or config.dtype
        for spec in parameter_specs(config):
            tensor = torch.empty(spec.shape, dtype=torch.float32 if spec.float32 else model_dtype,
                                 device=device)
            _register(self, spec.name, nn.Parameter(tensor, requires_grad=False))

    @classmethod
    def random(cls, config: V41Config, seed: int, dtype: torch.dtype | None = None,
               device: torch.device | str | None = None,
               draw_on_device: bool = False) -> V41Weights:
        """Deterministic random weights (same seed, same numbers, on any device).

        Scales keep activations O(1) so a random model exercises every path (varied
        top-k picks, non-trivial routing, gates away from 0/1). The engram tables are
        snapped to their FP8 (e4m3 + ue8m0/32) grid, the form the release stores them in.

        ``draw_on_device`` draws with a generator on ``device`` instead of the CPU: same
        init families and scales, different numbers (the device's generator), and far
        faster for GPU models (the CPU draw takes ~40 s at ``mid``).
        """
        weights = cls(config, dtype=dtype, device=device)
        where = torch.device(device) if draw_on_device and device is not None else torch.device("cpu")
        gen = torch.Generator(device=where).manual_seed(seed)
        params = dict(weights.named_parameters())
        with torch.no_grad():
            for spec in parameter_specs(config):
                value = _init_value(spec, gen, where)
                if spec.name.endswith("engram.embed.weight"):
                    copy_fp8_snapped(params[spec.name], value)
                else:
                    params[spec.name].copy_(value)
        return weights

    def layer(self, i: int) -> nn.Module:
        return self.layers[i]


SNAP_ROWS = 1 << 20  # table rows snapped at once (1 GiB of float32 temporaries at head dim 256)


def copy_fp8_snapped(param: torch.Tensor, value: torch.Tensor, rows: int = SNAP_ROWS) -> None:
    """``param <- fake_quant_fp8_ue8m0(value)``, ``rows`` table rows at a time.

    Why in row blocks: the fake-quant keeps a few float32 copies of its input alive, which
    for the tables of a flash-dimension model (8.4M rows x 256, 8 GiB in float32;
    docs/model.md §7c) is 20+ GiB on top of the weights. Its scale blocks lie inside one
    row, so every row's result is the same whichever block the row is snapped in."""
    for start in range(0, value.shape[0], rows):
        param[start:start + rows].copy_(fake_quant_fp8_ue8m0(value[start:start + rows]))


def _init_value(spec: ParamSpec, gen: torch.Generator, device: torch.device) -> torch.Tensor:
    shape = spec.shape
    if spec.init == "ones":
        return torch.ones(shape, device=device)
    if spec.init == "zeros":
        return torch.zeros(shape, device=device)
    if spec.init == "normal":
        return torch.randn(shape, generator=gen, device=device)
    if spec.init == "small":
        return 0.5 * torch.randn(shape, generator=gen, device=device)
    if spec.init in ("hc_fn", "linear"):
        return torch.randn(shape, generator=gen, device=device) / math.sqrt(shape[-1])
    raise ValueError(f"unknown init {spec.init!r} for {spec.name}")


def _register(root: nn.Module, name: str, param: nn.Parameter) -> None:
    """Create the module path of ``name`` (ModuleLists for numeric parts) and put ``param``."""
    parts = name.split(".")
    node = root
    for part, nxt in zip(parts[:-1], parts[1:-1] + [None], strict=True):
        if part.isdigit():
            index = int(part)
            assert isinstance(node, nn.ModuleList)
            while len(node) <= index:
                node.append(nn.Module())
            child = node[index]
        else:
            child = getattr(node, part, None) if part in node._modules else None
            if child is None:
                child = nn.ModuleList() if (nxt is not None and nxt.isdigit()) else nn.Module()
                node.add_module(part, child)
        if nxt is not None and nxt.isdigit() and not isinstance(child, nn.ModuleList):
            raise AssertionError(name)
        node = child
    node.register_parameter(parts[-1], param)
