"""Fused kernels traced by ``torch.compile`` compute what their eager launches compute.

Why: inductor launches a user-defined Triton kernel with its Python-float arguments
typed fp64, where an eager launch passes them as fp32. A kernel that multiplies by such
a scalar then computes in fp64 under compile (other numbers than eager), and one that
bitcasts the result to 32 bits fails to build: the fused gate did, inside the static
decode step's compiled grouped MoE (``benchmarks/decode.py --paths graphs+compile``).
Every kernel now pins its float scalars to fp32, so a compiled call must equal the
eager call bit for bit. GPU only (inductor's Triton path needs CUDA).
"""

from __future__ import annotations

import pytest
import torch

from runtime.config import V41Config
from runtime.kernels import KernelRegistry
from runtime.numerics import Numerics

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]

MID = V41Config.preset("mid")
FLASH = V41Config.preset("flash")
NUM = Numerics()


@pytest.fixture(scope="module")
def fused():
    return KernelRegistry("fused", device="cuda", on_unavailable="error")


def randn(*shape, scale=1.0, dtype=torch.bfloat16, seed=0):
    g = torch.Generator().manual_seed(seed + sum(shape))
    return (torch.randn(*shape, generator=g) * scale).to("cuda", dtype)


@pytest.mark.parametrize("config,t", [(MID, 1), (MID, 64), (FLASH, 1), (FLASH, 8)])
def test_compiled_gate_equals_its_eager_launch(fused, config, t):
    """flash's selection rounds reduce (key, score) pairs with a combine function bound to
    the kernel at build time (runtime/kernels/backend.py's jit): inductor must trace that
    kernel too; mid's rounds are a max and a sum."""
    torch._dynamo.reset()
    d, e = config.hidden_size, config.n_routed_experts
    x, w, bias = randn(t, d), randn(e, d, scale=d**-0.5), randn(e, scale=0.1, dtype=torch.float32)
    want_w, want_ids = fused.gate(x, w, bias, config, NUM)
    got_w, got_ids = torch.compile(lambda *a: fused.gate(*a, config, NUM))(x, w, bias)
    assert torch.equal(got_ids, want_ids)
    assert torch.equal(got_w, want_w)


def test_compiled_indexer_equals_its_eager_launch(fused):
    torch._dynamo.reset()
    t, n = 8, 4096
    q = randn(t, MID.index_n_heads, MID.index_head_dim)
    head_w = randn(t, MID.index_n_heads, scale=MID.index_n_heads**-0.5, dtype=torch.float32)
    keys = randn(n, MID.index_head_dim)
    counts = torch.arange(1, t + 1, device="cuda") * (n // t)
    want = fused.indexer(q, head_w, keys, counts, NUM)
    got = torch.compile(lambda *a: fused.indexer(*a, NUM))(q, head_w, keys, counts)
    assert torch.equal(got, want)
