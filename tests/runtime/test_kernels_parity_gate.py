"""Fused vs reference, per op, on random inputs drawn fresh every run (the seed is in
every failure message). Without CUDA the kernels run through the Triton interpreter on
tiny shapes; with CUDA the same checks run at ``mid``/``flash`` shapes in bf16 and fp32.

Tolerances (max |fused - reference|; "rel" is relative to max |ref|):
  weights fp32 1e-5 / bf16-input 1e-4 ; ids: equal except k-th-boundary ties
"""

from __future__ import annotations

import gc
import weakref
from dataclasses import replace

import pytest
import torch

from runtime.kernels.gate_tiles import GatePolicy
from runtime.kernels.reference import REFERENCE_OPS
from runtime.moe import score_fn
from tests.runtime.parity import (
    CUDA,
    DEVICE,
    FLASH,
    MID,
    NUM,
    TINY,
    close,
    ids_agree_tie_robust,
    randn,
)

GATE_CPU = [(TINY, 1), (TINY, 5), (TINY.replace(n_routed_experts=24, num_experts_per_tok=6), 19),
            (TINY.replace(scoring_func="sigmoid"), 7), (TINY.replace(scoring_func="softmax"), 3)]
GATE_GPU = [(MID, 1), (MID, 8), (MID, 64), (MID, 300), (MID, 512), (FLASH, 1), (FLASH, 8), (FLASH, 64),
            (FLASH, 517)]
# Tilings of the fused gate (runtime/kernels/gate_tiles.py): the default policy; the first
# kernel's one program per 16 rows over all experts and D; a fine one (16-wide D chunks,
# up to 1000 programs) so that even tiny shapes take many expert blocks and many D splits;
# the selection always in a second launch (4 rows per program, at wide experts too), and
# never; 32-row programs. (The default selects wide experts, 384 -> 512, one row per program.)
GATE_POLICIES = {"default": GatePolicy(), "one_program": GatePolicy(one_program=True),
                 "fine": GatePolicy(programs=1000, tail_bytes=1 << 20, block_d=16, block_e=16),
                 "select": GatePolicy(select_from=0, select_rows=4, wide_select_from=1 << 30), "ticket": GatePolicy(select_from=1 << 30, wide_select_from=1 << 30),
                 # benchmarks/gate_tiles.py --stages: 32 rows per program (one over all of D, or
                 # split), pipelined stages (a compile option: the interpreter ignores it)
                 "one_program_m32": GatePolicy(one_program=True, block_m=32, num_stages=4),
                 "m32_stages": GatePolicy(block_m=32, num_stages=5),
                 "select_w1": GatePolicy(select_from=0, select_rows=4, select_warps=1, wide_select_from=1 << 30),
                 # each selection round one reduction of (key, score) pairs
                 # (the default pairs from 256 padded experts), in the ticket-holder and in a second
                 # launch, and never
                 "paired": GatePolicy(pair_from=0), "paired_select": GatePolicy(select_from=0, pair_from=0),
                 "unpaired": GatePolicy(pair_from=1 << 30),
                 "unpaired_select": GatePolicy(select_from=0, pair_from=1 << 30)}


def fused_gate(policy: str):
    """A fused gate tiled by GATE_POLICIES[policy]; imported here, after the ``fused``
    fixture has set TRITON_INTERPRET (Triton reads it at its first import).

    Interpreted, the policies not named "paired..." select by max and sum: the interpreter
    runs a reduction of pairs element by element in Python (15-20 s a call at 384 experts,
    so every tiling at flash's expert count would add minutes), while what pairs change is
    tested where it runs: bit for bit against max and sum
    (test_paired_rounds_select_exactly_what_max_and_sum_select), and by the GPU tests at
    flash, where the default pairs."""
    from runtime.kernels.gate import FusedGate

    chosen = GATE_POLICIES[policy]
    return FusedGate(chosen if CUDA or policy.startswith("paired") else replace(chosen, pair_from=1 << 30))


def skip_slow_interpreted_pairs(policy: str, e: int) -> None:
    """Pairs interpreted at hundreds of experts: too slow for the CPU suite (see fused_gate)."""
    if not CUDA and policy.startswith("paired") and e >= 256:
        pytest.skip("paired rounds at >= 256 experts run on the GPU (interpreted: 15-20 s a call)")


def check_gate(gate, gen, config, t, dtype, d=None):
    d, e = d or config.hidden_size, config.n_routed_experts
    x = randn(gen, t, d, dtype=dtype)
    w = randn(gen, e, d, dtype=dtype, scale=d**-0.5)
    bias = randn(gen, e, scale=0.1)
    fw, fi = gate(x, w, bias, config, NUM)
    rw, ri = REFERENCE_OPS["gate"](x, w, bias, config, NUM)
    seed = gen.initial_seed()
    sel = score_fn(x.double() @ w.double().t() / config.gate_temp, config.scoring_func) + bias.double()
    ids_agree_tie_robust(fi, ri, sel, 1e-5, "gate ids", seed)
    same = (fi.sort(1).values == ri.sort(1).values).all(1)
    order_f, order_r = fi.sort(1).indices, ri.sort(1).indices
    close(fw.gather(1, order_f)[same], rw.gather(1, order_r)[same], 1e-5 if dtype == torch.float32 else 1e-4,
          what="gate weights", seed=seed)


@pytest.mark.parametrize("config,t", GATE_CPU)
def test_gate_parity_small(fused, gen, config, t):
    check_gate(fused.gate, gen, config, t, torch.float32)


# (T, D, E, k, scoring): T off the 16/64-row blocks (70 rows: 64-row blocks, selected 8 rows
# at a time), E off powers of two and E = 384 (flash's experts at a small D, so the
# interpreter stays fast), every scoring function, and k = 17 (a padded k of 32).
GATE_EDGES = [(19, 64, 24, 6, "sigmoid"), (33, 64, 384, 6, "sqrtsoftplus"), (70, 32, 384, 3, "softmax"),
              (1, 96, 384, 6, "softmax"), (17, 48, 48, 2, "sqrtsoftplus"), (9, 32, 40, 17, "sigmoid")]


@pytest.mark.parametrize("policy", list(GATE_POLICIES))
@pytest.mark.parametrize("t,d,e,k,scoring", GATE_EDGES)
def test_gate_tilings_match_the_reference_at_edge_shapes(fused, gen, policy, t, d, e, k, scoring):
    skip_slow_interpreted_pairs(policy, e)
    config = TINY.replace(n_routed_experts=e, num_experts_per_tok=k, scoring_func=scoring)
    check_gate(fused_gate(policy), gen, config, t, torch.float32, d=d)


@pytest.mark.parametrize("policy", list(GATE_POLICIES))
@pytest.mark.parametrize("e", [48, 384])
@pytest.mark.parametrize("scoring", ["sqrtsoftplus", "sigmoid", "softmax"])
def test_gate_exact_ties_go_to_the_lowest_expert(fused, gen, policy, e, scoring):
    """Exactly tied selection values, in different expert blocks and across D splits: the
    picks must be the reference's (stable sort: the lower expert first), in its order.
    Inputs are small multiples of powers of two, so every logit is exact in float32 whatever
    the split: experts 3, e/2, e-1 tie at the top, 5 and e/3 tie below them, every other
    expert is at most a quarter of that, so k = 4 takes the top three and then expert 5."""
    skip_slow_interpreted_pairs(policy, e)
    t, d = 19, 64
    sign = torch.where(torch.rand(d, generator=gen) < 0.5, -1.0, 1.0)
    x = sign * torch.randint(1, 3, (t, d), generator=gen).float()
    w = torch.randint(-1, 2, (e, d), generator=gen).float() / 32
    for expert in (3, e // 2, e - 1):
        w[expert] = sign / 8
    for expert in (5, e // 3):
        w[expert] = sign / 16
    bias = torch.zeros(e)
    config = TINY.replace(n_routed_experts=e, num_experts_per_tok=4, scoring_func=scoring)
    x, w, bias = x.to(DEVICE), w.to(DEVICE), bias.to(DEVICE)
    fw, fi = fused_gate(policy)(x, w, bias, config, NUM)
    rw, ri = REFERENCE_OPS["gate"](x, w, bias, config, NUM)
    expected = torch.tensor([3, e // 2, e - 1, 5]).expand(t, 4)
    assert torch.equal(ri.cpu(), expected)  # the construction does what it says
    assert torch.equal(fi.cpu(), expected)
    close(fw, rw, 1e-5, what="tied gate weights")


@pytest.mark.parametrize("paired,plain", [("paired", "unpaired"), ("paired_select", "unpaired_select")])
@pytest.mark.parametrize("t,d,e,k,scoring", [(19, 64, 24, 6, "sigmoid"), (17, 48, 48, 2, "sqrtsoftplus"),
                                             (9, 32, 40, 17, "softmax")])
def test_paired_rounds_select_exactly_what_max_and_sum_select(fused, gen, paired, plain, t, d, e, k, scoring):
    """One reduction of (key, score) pairs per round returns the same ids and the same
    weights bit for bit as a max and a masked sum (keys are unique within a row), here
    with exactly tied scores too (every other row's inputs repeat a few values)."""
    config = TINY.replace(n_routed_experts=e, num_experts_per_tok=k, scoring_func=scoring)
    x = randn(gen, t, d)
    x[::2] = torch.randint(-2, 3, (x[::2].shape), generator=gen).to(x) / 4  # ties in every other row
    w = randn(gen, e, d, scale=d**-0.5)
    w[: e // 2] = w[e // 2: 2 * (e // 2)]  # pairs of identical experts: equal scores
    bias = torch.zeros(e, device=DEVICE)
    pw, pi = fused_gate(paired)(x, w, bias, config, NUM)
    qw, qi = fused_gate(plain)(x, w, bias, config, NUM)
    assert torch.equal(pi, qi)
    assert torch.equal(pw, qw)


def test_a_kernels_helpers_are_jitted_with_it_and_the_module_keeps_plain_functions(fused):
    """backend.jit binds the gate kernel to a copy of its module's names in which the
    combine helper is jitted; the module's own name stays the plain function (what a later
    build in the other mode jits afresh)."""
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    from runtime.kernels import gate

    kernel = fused_gate("paired").kernel
    assert not isinstance(gate._larger_key, (JITFunction, InterpretedFunction))
    assert isinstance(kernel.fn.__globals__["_larger_key"], (JITFunction, InterpretedFunction))
    assert kernel.fn.__globals__ is not gate.__dict__


def test_gate_counters_return_to_zero_and_grown_ones_stay_alive(fused):
    """The row-block tickets are left at zero by every call (so they are never cleared
    again), and a counter set that was outgrown is kept: a CUDA graph may still use it."""
    gate = fused_gate("fine")
    config = TINY.replace(n_routed_experts=24, num_experts_per_tok=6)
    g = torch.Generator().manual_seed(0)
    for t in (3, 37, 3):  # 1, 3, 1 row blocks: each call must find zeros
        check_gate(gate, g, config, t, torch.float32, d=32)
        assert int(gate.tickets.get(torch.device(DEVICE), 1).abs().sum()) == 0
    first = gate.tickets.get(torch.device(DEVICE), 1)
    held = weakref.ref(first)
    grown = gate.tickets.get(torch.device(DEVICE), 10 * first.numel())
    assert grown is not first and grown.numel() >= 10 * first.numel() and int(grown.abs().sum()) == 0
    del first
    gc.collect()
    assert held() is not None
    assert gate.tickets.get(torch.device(DEVICE), 1) is grown


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
@pytest.mark.parametrize("config,t", GATE_GPU)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("policy", ["default", "one_program", "ticket", "select_w1", "paired", "paired_select",
                                    "unpaired"])
def test_gate_parity_gpu(fused, gen, config, t, dtype, policy):
    check_gate(fused_gate(policy), gen, config, t, dtype)


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
@pytest.mark.parametrize("config,t", [(MID, 1), (FLASH, 1), (FLASH, 8), (FLASH, 64)])
def test_gate_graph_replay_is_sync_free_and_bitwise_stable(fused, gen, config, t):
    """Which program of a row block finishes last varies from run to run on the GPU; the
    splits are summed in split order, so 30 eager calls (under sync debug mode "error": a
    host sync raises) and a replayed CUDA graph of the same call (a sync inside a capture
    fails it) give bit-identical weights and ids."""
    gate = fused_gate("default")
    d, e = config.hidden_size, config.n_routed_experts
    x = randn(gen, t, d, dtype=torch.bfloat16)
    w = randn(gen, e, d, dtype=torch.bfloat16, scale=d**-0.5)
    bias = randn(gen, e, scale=0.1)
    first_w, first_i = gate(x, w, bias, config, NUM)  # warm-up: compiles, allocates the counters
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        runs = [gate(x, w, bias, config, NUM) for _ in range(30)]
    finally:
        torch.cuda.set_sync_debug_mode("default")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        replay_w, replay_i = gate(x, w, bias, config, NUM)
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    for out_w, out_i in [*runs, (replay_w, replay_i)]:
        assert torch.equal(out_w, first_w) and torch.equal(out_i, first_i)
