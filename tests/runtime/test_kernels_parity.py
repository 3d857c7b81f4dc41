"""Fused vs reference, per op, on random inputs drawn fresh every run (the seed is in
every failure message). Without CUDA the kernels run through the Triton interpreter on
tiny shapes; with CUDA the same checks run at ``mid``/``flash`` shapes in bf16 and fp32.

Tolerances (max |fused - reference|, per op and dtype; "rel" is relative to max |ref|):
  gate      weights fp32 1e-5 / bf16-input 1e-4 ; ids: equal except k-th-boundary ties
  mhc       fp32: streams 1e-5 rel, coefficients 2e-5, x 2e-5 rel. bf16: streams 1 ulp
            (2^-7 rel), coefficients 1e-2 vs the full reference (ulp flips of X' feed
            the 24 projections) and 5e-5 given the same rounded streams, x 4 ulps
  indexer   fp32 1e-5 rel ; bf16 inputs 1e-5 rel (exact bf16 products, fp32 sums)
  topk      exactly equal ids (same lowest-index tie rule), checked on ReLU-tied scores too
  attention fp32 2e-5 rel ; bf16 2e-2 rel (P is rounded to bf16 for the PV product)
  inv_rope  fp32 exact-ish 1e-6 ; bf16 1 ulp (2^-7 rel)
"""

from __future__ import annotations

import gc
import os
import weakref
from dataclasses import replace

import pytest
import torch

from runtime.config import V41Config
from runtime.kernels import KernelRegistry
from runtime.kernels.attention_tiles import AttentionTile
from runtime.kernels.gate_tiles import GatePolicy
from runtime.kernels.reference import REFERENCE_OPS
from runtime.mhc import HcMix
from runtime.moe import score_fn
from runtime.numerics import Numerics

CUDA = torch.cuda.is_available()
NUM = Numerics()


@pytest.fixture
def fused(monkeypatch):
    """A registry with every op fused: compiled on CUDA, interpreted on CPU (the env
    var is set for this test only, before the kernels are wrapped)."""
    if not CUDA:
        monkeypatch.setenv("TRITON_INTERPRET", "1")
    return KernelRegistry("fused", device="cuda" if CUDA else "cpu", on_unavailable="error")


@pytest.fixture
def gen():
    """A fresh seed per test (inputs differ run to run), printed so a failure's report
    gives the draw to reproduce it with."""
    seed = int.from_bytes(os.urandom(4), "little")
    print(f"input seed {seed}")
    g = torch.Generator().manual_seed(seed)
    return g


def randn(g, *shape, dtype=torch.float32, scale=1.0):
    x = torch.randn(*shape, generator=g) * scale
    assert x.abs().min() >= 0 and x.abs().max() > 0  # never all zeros
    return x.to(DEVICE, dtype)


DEVICE = "cuda" if CUDA else "cpu"
TINY = V41Config.preset("tiny")
MID = V41Config.preset("mid")
FLASH = V41Config.preset("flash")


def close(a, b, tol, rel=False, what="", seed=None):
    a, b = a.float().cpu(), b.float().cpu()
    assert a.shape == b.shape, f"{what}: shapes {a.shape} vs {b.shape}"
    if a.numel() == 0:
        return
    bound = tol * max(1.0, float(b.abs().max())) if rel else tol
    err = float((a - b).abs().max()) if a.numel() else 0.0
    assert err <= bound, f"{what}: max error {err:.3g} > {bound:.3g} (seed {seed})"


def ids_agree_tie_robust(ids_a, ids_b, values, k_tol, what, seed):
    """Per row: the chosen id sets are equal, except that ids may swap among entries whose
    value is within ``k_tol`` of the row's k-th chosen value (ties at the boundary)."""
    ids_a, ids_b, values = ids_a.cpu(), ids_b.cpu(), values.float().cpu()
    for r in range(ids_a.shape[0]):
        sa = {int(i) for i in ids_a[r] if i >= 0}
        sb = {int(i) for i in ids_b[r] if i >= 0}
        assert len(sa) == len(sb), f"{what}: row {r} picks {len(sa)} vs {len(sb)} (seed {seed})"
        if sa == sb:
            continue
        kth = min(float(values[r, i]) for i in sb)
        for i in sa ^ sb:
            assert abs(float(values[r, i]) - kth) <= k_tol, (
                f"{what}: row {r} id {i} differs and is not a boundary tie "
                f"({float(values[r, i])} vs k-th {kth}) (seed {seed})"
            )


# ---------------------------------------------------------------------------- gate
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


# ---------------------------------------------------------------------------- mhc
def mhc_args(gen, config, t, dtype, with_out):
    """A site's arguments: (streams, out, prev, pre_shift, fn, base, scale, norm_w, config, NUM)."""
    d = config.hidden_size
    streams = randn(gen, t, 4, d, dtype=dtype)
    out = randn(gen, t, d, dtype=dtype) if with_out else None
    prev = None
    if with_out:
        prev = HcMix(randn(gen, t, 4).sigmoid(), 2 * randn(gen, t, 4).sigmoid(),
                     torch.softmax(randn(gen, t, 4, 4), -1))
    pre_shift = randn(gen, t, 4).sigmoid()
    fn = randn(gen, 24, 4 * d, scale=(4 * d) ** -0.5)
    base = randn(gen, 24, scale=0.5)
    scale = randn(gen, 3).abs() + 0.5
    norm_w = randn(gen, d, dtype=dtype)
    return streams, out, prev, pre_shift, fn, base, scale, norm_w, config, NUM


def flat(site_result):
    """A site's outputs as one tuple of tensors: streams, pre, post, comb, x."""
    streams, mix, x = site_result
    return streams, mix.pre, mix.post, mix.comb, x


def check_mhc(fused, gen, config, t, dtype, with_out):
    args = mhc_args(gen, config, t, dtype, with_out)
    _, _, _, pre_shift, fn, base, scale, norm_w, _, _ = args
    a = fused.mhc(*args)
    b = REFERENCE_OPS["mhc"](*args)
    seed = gen.initial_seed()
    bf16 = dtype != torch.float32
    # bf16: both sides round the same fp32 X' to bf16, but their fp32 sums may differ in
    # the last bit, so a few elements land one bf16 ulp apart (2^-7 relative).
    close(a[0], b[0], 2.0**-7 if bf16 else 1e-5, rel=True, what="mhc streams", seed=seed)
    # Coefficients vs the full reference: in bf16 those ulp flips move the 24 projections
    # by ~sum of |fn| * ulp, measured ~2e-3 on the CPU; 1e-2 bounds it.
    for name in ("pre", "post", "comb"):
        close(getattr(a[1], name), getattr(b[1], name), 1e-2 if bf16 else 2e-5, what=f"mhc {name}", seed=seed)
    # ...and tightly, given the SAME rounded streams (isolates the coefficient math).
    same = REFERENCE_OPS["mhc"](a[0], None, None, pre_shift, fn, base, scale, norm_w, config, NUM)
    for name in ("pre", "post", "comb"):
        close(getattr(a[1], name), getattr(same[1], name), 5e-5, what=f"mhc {name} | same streams", seed=seed)
    # x = weight * normalised collapsed row, rounded to bf16 three times (collapse, norm,
    # weight): relative to max |x|, bf16 allows 4 ulps of the largest binade.
    close(a[2], b[2], 2.0**-5 if bf16 else 2e-5, rel=True, what="mhc x", seed=seed)
    close(a[2], same[2], 2.0**-5 if bf16 else 2e-5, rel=True, what="mhc x | same streams", seed=seed)


@pytest.mark.parametrize("t", [1, 3])
@pytest.mark.parametrize("with_out", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_mhc_parity_small(fused, gen, t, with_out, dtype):
    check_mhc(fused, gen, TINY, t, dtype, with_out)


@pytest.mark.parametrize("t", [1, 5, 40])
@pytest.mark.parametrize("split", [True, False])
def test_mhc_split_and_unsplit_tilings_match_the_reference(fused, gen, t, split):
    """Both tilings of the fused site (split over D, as for decode shapes; one D range per row
    block) against the reference, whichever the row count would choose."""
    from runtime.kernels.mhc import FusedMhc
    from runtime.kernels.mhc_tiles import MhcPolicy

    fused.mhc = FusedMhc(MhcPolicy(split=split, programs=8, block_d=32, decode_block_d=64))
    check_mhc(fused, gen, TINY, t, torch.float32, with_out=True)
    check_mhc(fused, gen, TINY, t, torch.float32, with_out=False)


@pytest.mark.parametrize("t,tail_rows", [(1, 1), (1, 2), (9, 1), (9, 64), (40, 1), (40, 64)])
def test_mhc_both_finishes_in_chunks_match_the_reference(fused, gen, t, tail_rows):
    """The row block's last program (ticket) or a second launch finishes the site, summing
    16-32 splits' partials 2-4 splits per load (a small ``tail_elements``)."""
    from runtime.kernels.mhc import FusedMhc
    from runtime.kernels.mhc_tiles import MhcPolicy

    policy = MhcPolicy(decode_projection="fma", projection="ieee", decode_block_d=8, block_d=16, programs=1024,
                       tail_rows=tail_rows, tail_elements=128)
    tiles = policy.tiling(t, TINY.hidden_size, cuda=False)
    assert tiles.chunk < tiles.splits(TINY.hidden_size) and tiles.tail == (t >= tail_rows)
    fused.mhc = FusedMhc(policy)
    check_mhc(fused, gen, TINY, t, torch.float32, with_out=True)
    check_mhc(fused, gen, TINY, t, torch.float32, with_out=False)


@pytest.mark.parametrize("projection,t", [("fma", 1), ("fma", 3), ("fma", 20), ("tf32x3", 20)])
def test_mhc_projection_modes_match_the_reference(fused, gen, projection, t):
    """The multiply-add projection (rows per program: 1, 4, 8 here) and the TF32x3 dots (the
    interpreter runs them in float32), split over D, against the reference."""
    from runtime.kernels.mhc import FusedMhc
    from runtime.kernels.mhc_tiles import MhcPolicy

    policy = MhcPolicy(projection=projection, decode_projection=projection, decode_rows=4, programs=8,
                       block_d=64, decode_block_d=32)
    assert policy.tiling(t, TINY.hidden_size, cuda=False).splits(TINY.hidden_size) > 1
    fused.mhc = FusedMhc(policy)
    check_mhc(fused, gen, TINY, t, torch.float32, with_out=True)
    check_mhc(fused, gen, TINY, t, torch.float32, with_out=False)


@pytest.mark.parametrize("projection,t", [("fma", 1), ("fma", 3), ("ieee", 20), ("ieee", 40)])
def test_mhc_fma_mixing_matches_the_reference(fused, gen, projection, t):
    """The sweep's mixing, collapse and sum of squares as fused multiply-adds
    (``MhcPolicy.fma_mix_from``), against the reference at the usual tolerances, with and
    without a previous sublayer's output to fold in (40 rows: the ticket's tail)."""
    from runtime.kernels.mhc import FusedMhc
    from runtime.kernels.mhc_tiles import MhcPolicy

    policy = MhcPolicy(projection=projection, decode_projection=projection, decode_rows=4, programs=8,
                       block_d=32, decode_block_d=32, tail_rows=40, fma_mix_from=0)
    assert policy.tiling(t, TINY.hidden_size, cuda=False).fma_mix
    fused.mhc = FusedMhc(policy)
    check_mhc(fused, gen, TINY, t, torch.float32, with_out=True)
    check_mhc(fused, gen, TINY, t, torch.float32, with_out=False)


@pytest.mark.parametrize("projection,t,tail_rows", [("ieee", 20, 64), ("tf32x2", 20, 64), ("tf32x2", 40, 1)])
def test_mhc_reloaded_projection_matches_the_reference(fused, gen, projection, t, tail_rows):
    """The projection re-reading X' after each ``reload_d`` columns are mixed and written
    (chunks of 3 tiles, not dividing the split; both finishes), against the reference."""
    from runtime.kernels.mhc import FusedMhc
    from runtime.kernels.mhc_tiles import MhcPolicy

    policy = MhcPolicy(projection=projection, decode_projection=projection, decode_rows=4, programs=4,
                       block_d=16, tail_block_d=16, reload_d=48, tail_reload_d=48, tail_rows=tail_rows)
    tiles = policy.tiling(t, TINY.hidden_size, cuda=False)
    assert tiles.reload_d == 48 and tiles.split_d % tiles.reload_d != 0 and tiles.splits(TINY.hidden_size) > 1
    fused.mhc = FusedMhc(policy)
    check_mhc(fused, gen, TINY, t, torch.float32, with_out=True)
    check_mhc(fused, gen, TINY, t, torch.float32, with_out=False)


@pytest.mark.parametrize("t,tail_rows,reload_d", [(5, 1024, 0), (40, 1, 0), (20, 1024, 48)])
def test_mhc_bf16x3_matches_the_reference(fused, gen, t, tail_rows, reload_d):
    """"bf16x3" (fn's three bf16 parts, each product exact on bf16 X') on bf16 streams:
    both finishes, in the mixing loop and re-reading X', against the reference; and its
    coefficients as close to a float64 recompute from the same mixed streams as the float32
    dot's ("ieee": the same site with a float32 projection), within 2x + 1e-7. Dropping
    the low part alone measured 5x the float32 dot's distance here (5e-6 against 7e-7 on
    ``post``), which the usual 5e-5 "same streams" bound would not see.

    With a previous output to mix in, the coefficients are compared given the same mixed
    streams only: Triton's interpreter rounds float32 to bf16 toward zero where the
    reference rounds to nearest, so its mixed streams differ from the reference's in many
    last bits (at 40 rows enough to move ``post`` past check_mhc's 1e-2, with a float32
    projection as well); compiled, check_mhc covers it (the GPU parity tests)."""
    from runtime.kernels.mhc import FusedMhc
    from runtime.kernels.mhc_tiles import MhcPolicy

    def policy(projection):
        return MhcPolicy(projection=projection, decode_projection=projection, decode_rows=8, programs=8,
                         block_d=16, decode_block_d=16, tail_block_d=16, reload_d=reload_d,
                         tail_reload_d=reload_d, tail_rows=tail_rows)

    tiles = policy("bf16x3").tiling(t, TINY.hidden_size, cuda=False)
    assert tiles.projection == "bf16x3" and tiles.splits(TINY.hidden_size) > 1 and tiles.reload_d == reload_d
    fused.mhc = FusedMhc(policy("bf16x3"))
    for with_out in (True, False) if CUDA else (False,):  # (interpreted: the docstring)
        check_mhc(fused, gen, TINY, t, torch.bfloat16, with_out=with_out)
    args = mhc_args(gen, TINY, t, torch.bfloat16, with_out=True)
    _, _, _, pre_shift, fn, base, scale, norm_w, _, _ = args
    got, float32_dot = fused.mhc(*args), FusedMhc(policy("ieee"))(*args)
    assert torch.equal(got[0], float32_dot[0])  # the same mixed streams: only the projection differs
    same = REFERENCE_OPS["mhc"](got[0], None, None, pre_shift, fn, base, scale, norm_w, TINY, NUM)
    for name in ("pre", "post", "comb"):
        close(getattr(got[1], name), getattr(same[1], name), 5e-5, what=f"bf16x3 {name} | same streams",
              seed=gen.initial_seed())
    f64 = [v.double() for v in (pre_shift, fn, base, scale, norm_w)]
    oracle = REFERENCE_OPS["mhc"](got[0].double(), None, None, *f64, TINY, NUM)
    for name in ("pre", "post", "comb"):
        want = getattr(oracle[1], name)
        err = float((getattr(got[1], name).double() - want).abs().max())
        bound = 2 * float((getattr(float32_dot[1], name).double() - want).abs().max()) + 1e-7
        assert err <= bound, f"bf16x3 {name} {err:.2e} from float64, float32 dot's x2 + 1e-7 {bound:.2e} " \
                             f"(seed {gen.initial_seed()})"


def test_mhc_bf16x3_falls_back_off_bf16_streams(fused, gen):
    """X' of float32 or float16 streams is not exact in bf16: "bf16x3" takes "tf32x3" for
    float32 and "tf32x2" for float16 (exact in TF32), and matches the reference at the
    tolerances of those dtypes; no bf16 parts are made, and float16 made fn's TF32 split."""
    from runtime.kernels.mhc import FusedMhc
    from runtime.kernels.mhc_tiles import MhcPolicy

    fused.mhc = FusedMhc(MhcPolicy(projection="bf16x3", decode_projection="bf16x3", programs=8, block_d=32,
                                   decode_block_d=32))
    check_mhc(fused, gen, TINY, 5, torch.float32, with_out=True)
    check_mhc(fused, gen, TINY, 5, torch.float16, with_out=False)
    for dtype, tf32_splits in ((torch.float32, 0), (torch.float16, 1)):  # fn held, so its cache entry stays
        args = mhc_args(gen, TINY, 5, dtype, with_out=False)
        fused.mhc(*args)
        assert len(fused.mhc.fn_parts._by_weight) == 0 and len(fused.mhc.fn_splits._by_weight) == tf32_splits


@pytest.mark.parametrize("t,tail_rows", [(5, 1024), (40, 1)])
def test_mhc_coefficients_per_tile_give_the_same_bits(fused, gen, t, tail_rows):
    """Loading the previous post and combination in every D tile
    (``MhcPolicy.coefficients_per_tile``) moves only where they are read: interpreted,
    every output bit for bit as with them held through the loop, in both finishes and over
    several D tiles and splits; and within the reference's tolerances."""
    from runtime.kernels.mhc import FusedMhc
    from runtime.kernels.mhc_tiles import MhcPolicy

    kw = dict(programs=8, block_d=16, decode_block_d=16, tail_block_d=16, decode_rows=8, tail_rows=tail_rows)
    per_tile, held = FusedMhc(MhcPolicy(coefficients_per_tile=True, **kw)), FusedMhc(MhcPolicy(**kw))
    tiles = per_tile.policy.tiling(t, TINY.hidden_size, cuda=CUDA)
    assert tiles.coefficients_per_tile and tiles.split_d > tiles.block_d and tiles.splits(TINY.hidden_size) > 1
    for dtype in (torch.float32, torch.bfloat16):
        args = mhc_args(gen, TINY, t, dtype, with_out=True)
        for name, a, b in zip(("streams", "pre", "post", "comb", "x"), flat(per_tile(*args)), flat(held(*args)),
                              strict=True):
            assert torch.equal(a, b), f"per-tile and held coefficients: {name} differs ({dtype}, seed {gen.initial_seed()})"
    fused.mhc = per_tile
    check_mhc(fused, gen, TINY, t, torch.float32, with_out=True)


def test_mhc_tf32x2_splits_fn_again_after_an_in_place_update(fused, gen):
    """"tf32x2" (bf16 streams: float32 ones fall back to "tf32x3") keeps fn's split per
    weight (``Tf32Splits``); the same fn tensor scaled in place by -0.75 between two calls
    must be split again: the second call's coefficients against the reference given the same
    streams, which a stale split (every projection off by a factor of -4/3) would miss by
    far more than the bound. The cache then holds one split, of fn as it is now."""
    from runtime.kernels.mhc import FusedMhc, tf32_split
    from runtime.kernels.mhc_tiles import MhcPolicy

    policy = MhcPolicy(projection="tf32x2", decode_projection="tf32x2", programs=8, block_d=32, decode_block_d=32)
    assert policy.tiling(5, TINY.hidden_size, cuda=False).projection == "tf32x2"
    fused.mhc = FusedMhc(policy)
    args = mhc_args(gen, TINY, 5, torch.bfloat16, with_out=True)
    _, _, _, pre_shift, fn, base, scale, norm_w, _, _ = args
    assert fn.dtype == torch.float32 and fn.is_contiguous()  # the kernel is handed this tensor itself
    for factor in (1.0, -0.75):
        fn.mul_(factor)
        streams, mix, x = fused.mhc(*args)
        same = REFERENCE_OPS["mhc"](streams, None, None, pre_shift, fn, base, scale, norm_w, TINY, NUM)
        for name in ("pre", "post", "comb"):
            close(getattr(mix, name), getattr(same[1], name), 5e-5, what=f"mhc {name} | fn x {factor}",
                  seed=gen.initial_seed())
    head, rest = fused.mhc.fn_splits.get(fn)
    want_head, want_rest = tf32_split(fn)
    assert torch.equal(head, want_head) and torch.equal(rest, want_rest)


@pytest.mark.parametrize("finish_registers", [False, True])
@pytest.mark.parametrize("finish_rows,t,tail_rows", [(1, 3, 1024), (2, 4, 1024), (4, 3, 1024), (8, 40, 1)])
def test_mhc_finishes_match_the_reference(fused, gen, finish_registers, finish_rows, t, tail_rows):
    """Both forms of the coefficients (``finish_registers``) in both finishes: a second
    launch with one row per program and with a few (masked rows included), and the ticket's
    tail (40 rows, ``tail_rows`` = 1), split over D, against the reference."""
    from runtime.kernels.mhc import FusedMhc
    from runtime.kernels.mhc_tiles import MhcPolicy

    policy = MhcPolicy(decode_finish_rows=finish_rows, decode_block_d=16, block_d=16, tail_block_d=16, programs=64,
                       tail_rows=tail_rows, finish_registers=finish_registers,
                       decode_finish_registers=finish_registers)
    tiles = policy.tiling(t, TINY.hidden_size, cuda=False)
    assert tiles.splits(TINY.hidden_size) > 1 and tiles.finish_registers == finish_registers
    assert tiles.tail if tail_rows == 1 else (not tiles.tail and tiles.tail_t == finish_rows)
    fused.mhc = FusedMhc(policy)
    check_mhc(fused, gen, TINY, t, torch.float32, with_out=True)


@pytest.mark.parametrize("finish_registers", [False, True])
def test_mhc_one_row_finishes_above_decode_match_the_reference(fused, gen, finish_registers):
    """``finish_rows`` = 1 above ``decode_rows`` and ``decode_finish_to``: one coefficients'
    program per row, both coefficient forms, against the reference."""
    from runtime.kernels.mhc import FusedMhc
    from runtime.kernels.mhc_tiles import MhcPolicy

    policy = MhcPolicy(decode_rows=2, decode_finish_to=0, finish_rows=1, block_d=16, programs=64,
                       finish_registers=finish_registers, decode_finish_registers=not finish_registers)
    tiles = policy.tiling(5, TINY.hidden_size, cuda=False)
    assert not tiles.tail and tiles.tail_t == 1 and tiles.splits(TINY.hidden_size) > 1
    assert tiles.finish_registers == finish_registers
    fused.mhc = FusedMhc(policy)
    check_mhc(fused, gen, TINY, 5, torch.float32, with_out=True)


@pytest.mark.parametrize("finish_registers", [False, True])
@pytest.mark.parametrize("t,tail_rows", [(3, 1024), (40, 1)])
def test_mhc_sinkhorn_eps_placement_matches_the_reference(fused, gen, finish_registers, t, tail_rows):
    """The Sinkhorn's eps in every place the reference puts it (added after the softmax, in
    each column and row sum), with hc_eps = 0.05: at the release's 1e-6 one eps left out or
    added twice moves comb by less than the tolerance; here by about 1e-2."""
    from runtime.kernels.mhc import FusedMhc
    from runtime.kernels.mhc_tiles import MhcPolicy

    policy = MhcPolicy(decode_block_d=16, block_d=16, tail_block_d=16, programs=64, tail_rows=tail_rows,
                       finish_registers=finish_registers, decode_finish_registers=finish_registers)
    assert policy.tiling(t, TINY.hidden_size, cuda=False).finish_registers == finish_registers
    fused.mhc = FusedMhc(policy)
    check_mhc(fused, gen, TINY.replace(hc_eps=0.05), t, torch.float32, with_out=True)


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
@pytest.mark.parametrize("config,t", [(MID, 1), (MID, 3), (MID, 16), (MID, 33), (MID, 64), (MID, 144), (MID, 333),
                                      (MID, 2048), (FLASH, 4), (FLASH, 8), (FLASH, 48), (FLASH, 192)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_mhc_parity_gpu(fused, gen, config, t, dtype):
    check_mhc(fused, gen, config, t, dtype, with_out=True)
    check_mhc(fused, gen, config, t, dtype, with_out=False)


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
@pytest.mark.parametrize("tiling", [dict(decode_stages=3), dict(decode_block_d=32, decode_stages=3),
                                    *(dict(decode_programs=n, narrow_decode_programs=0) for n in (264, 396, 512))],
                         ids=["s3", "d32", "p264", "p396", "p512"])
@pytest.mark.parametrize("config,t", [(MID, 8), (MID, 33), (MID, 144), (FLASH, 17), (FLASH, 48), (FLASH, 96),
                                      (FLASH, 192)])
def test_mhc_decode_tilings_parity_gpu(fused, gen, tiling, config, t):
    """The decode sweep's other tilings at flash's two-wave row counts (the sweep variants
    "decode s3", the default before session 46, "decode d32", "decode p396" and "decode
    p512", the split before session 47: at flash 96 / 192 rows one / two D tiles a program,
    three at 192 under 396; the default's 264 makes two / four) and at ``mid`` 144 rows
    ("decode p264", the rule there before session 48: two tiles a program, where the
    default's narrow target makes three), compiled, on bf16 streams."""
    from runtime.kernels.mhc import FusedMhc
    from runtime.kernels.mhc_tiles import MhcPolicy

    fused.mhc = FusedMhc(MhcPolicy(**tiling))
    check_mhc(fused, gen, config, t, torch.bfloat16, with_out=True)
    check_mhc(fused, gen, config, t, torch.bfloat16, with_out=False)


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
@pytest.mark.parametrize("finish_registers,finish_rows", [(True, 1), (True, 8), (False, 8)])
@pytest.mark.parametrize("config,t", [(MID, 1), (MID, 8), (MID, 2048), (FLASH, 8)])
def test_mhc_finish_forms_parity_gpu(fused, gen, finish_registers, finish_rows, config, t):
    """The register finish and the 8-row decode finish (the default is one row), compiled,
    on bf16 streams (2,048 rows: the ticket's tail)."""
    from runtime.kernels.mhc import FusedMhc
    from runtime.kernels.mhc_tiles import MhcPolicy

    fused.mhc = FusedMhc(MhcPolicy(finish_registers=finish_registers, decode_finish_registers=finish_registers,
                                   decode_finish_rows=finish_rows))
    check_mhc(fused, gen, config, t, torch.bfloat16, with_out=True)


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
@pytest.mark.parametrize("projection,reload_d", [("ieee", 0), ("tf32x3", 0), ("fma", 0), ("tf32x2", 0),
                                                ("bf16x3", 0), ("tf32x3", 128), ("tf32x2", 128),
                                                ("bf16x3", 128)])
@pytest.mark.parametrize("config,t", [(MID, 1), (MID, 8), (MID, 2048), (FLASH, 64)])
def test_mhc_projection_modes_parity_gpu(fused, gen, projection, reload_d, config, t):
    """Every projection mode, compiled, on bf16 streams, with both finishes (2,048 rows: the
    tail), projecting in the mixing loop or re-reading X' (``reload_d``)."""
    from runtime.kernels.mhc import FusedMhc
    from runtime.kernels.mhc_tiles import MhcPolicy

    fused.mhc = FusedMhc(MhcPolicy(projection=projection, decode_projection=projection, reload_d=reload_d,
                                   tail_reload_d=reload_d))
    check_mhc(fused, gen, config, t, torch.bfloat16, with_out=True)
    check_mhc(fused, gen, config, t, torch.bfloat16, with_out=False)


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
@pytest.mark.parametrize("config,t", [(MID, 1), (MID, 8), (MID, 512), (MID, 2048), (FLASH, 8), (FLASH, 4096)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_mhc_fma_mixing_parity_gpu(fused, gen, config, t, dtype):
    """The mixing as fused multiply-adds (``MhcPolicy.fma_mix_from``), compiled, at decode,
    mid-size and tail row counts, within the default's tolerances."""
    from runtime.kernels.mhc import FusedMhc
    from runtime.kernels.mhc_tiles import MhcPolicy

    fused.mhc = FusedMhc(MhcPolicy(fma_mix_from=0))
    check_mhc(fused, gen, config, t, dtype, with_out=True)
    check_mhc(fused, gen, config, t, dtype, with_out=False)


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
@pytest.mark.parametrize("projection", ["tf32x3", "tf32x2", "bf16x3", "ieee"])
@pytest.mark.parametrize("config,t", [(MID, 8), (MID, 2048), (FLASH, 64)])
def test_mhc_pinned_mixing_gives_the_same_bits_gpu(gen, projection, config, t):
    """Pinning the mixing (PIN_MIX) only stops the compiler computing X' twice: the mixed
    streams and x bit for bit as without it, the coefficients within 5e-5 (the projection
    now takes X' as stored; unpinned, the dot's operand was X' recomputed in another layout,
    which moved the coefficients' last bits: measured on the H200)."""
    from runtime.kernels.mhc import FusedMhc
    from runtime.kernels.mhc_tiles import MhcPolicy

    kw = dict(projection=projection, decode_projection=projection, reload_d=0, tail_reload_d=0)
    pinned, plain = FusedMhc(MhcPolicy(**kw)), FusedMhc(MhcPolicy(pin_mix=False, **kw))
    assert pinned.policy.tiling(t, config.hidden_size, cuda=True).pin_mix
    args = mhc_args(gen, config, t, torch.bfloat16, with_out=True)
    got, want = flat(pinned(*args)), flat(plain(*args))
    for name, a, b in zip(("streams", "pre", "post", "comb", "x"), got, want, strict=True):
        if name in ("streams", "x"):
            assert torch.equal(a, b), f"pinned and plain {name} differ (seed {gen.initial_seed()})"
        else:
            close(a, b, 5e-5, what=f"pinned vs plain {name}", seed=gen.initial_seed())


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
@pytest.mark.parametrize("config,t", [(MID, 512), (MID, 4096), (FLASH, 64), (FLASH, 4096)])
def test_mhc_coefficients_per_tile_parity_gpu(fused, gen, config, t):
    """The "bf16x3" sweep on 64-row blocks with the coefficients loaded per D tile (the sweep
    variant "bf16x3 t64 per-tile s2"), compiled: within the reference's tolerances, and the
    mixed streams bit for bit as with the coefficients held (the same tiles; they spill there),
    the rest within 5e-5 (the compiler may order the row sums differently)."""
    from runtime.kernels.mhc import FusedMhc
    from runtime.kernels.mhc_tiles import MhcPolicy

    kw = dict(projection="bf16x3", block_t=64, block_d=16, tail_block_t=64, stages=2)
    fused.mhc = FusedMhc(MhcPolicy(coefficients_per_tile=True, **kw))
    check_mhc(fused, gen, config, t, torch.bfloat16, with_out=True)
    args = mhc_args(gen, config, t, torch.bfloat16, with_out=True)
    got, want = flat(fused.mhc(*args)), flat(FusedMhc(MhcPolicy(**kw))(*args))
    assert torch.equal(got[0], want[0]), f"per-tile vs held streams (seed {gen.initial_seed()})"
    for name, a, b in zip(("pre", "post", "comb", "x"), got[1:], want[1:], strict=True):
        close(a, b, 5e-5 if name != "x" else 2.0**-7, rel=name == "x", what=f"per-tile vs held {name}",
              seed=gen.initial_seed())


# ---------------------------------------------------------------------------- indexer + topk
def make_index_case(gen, t, n, n_heads, dim, dtype, ratio=2):
    """Queries at ragged positions (some see nothing yet, some see everything)."""
    q = randn(gen, t, n_heads, dim, dtype=dtype)
    head_w = randn(gen, t, n_heads, scale=n_heads**-0.5)
    keys = randn(gen, n, dim, dtype=dtype)
    positions = torch.randint(0, ratio * n + 2, (t,), generator=gen)
    positions[0] = 0  # sees no complete group yet
    if t > 1:
        positions[1] = ratio * n - 1  # sees every key
    counts = ((positions + 1) // ratio).clamp_max(n).to(DEVICE)
    return q, head_w, keys, counts


def check_indexer(fused, gen, t, n, n_heads, dim, dtype, k):
    q, head_w, keys, counts = make_index_case(gen, t, n, n_heads, dim, dtype)
    a = fused.indexer(q, head_w, keys, counts, NUM)
    b = REFERENCE_OPS["indexer"](q, head_w, keys, counts, NUM)
    seed = gen.initial_seed()
    assert torch.equal(torch.isinf(a).cpu(), torch.isinf(b).cpu()), f"indexer masks differ (seed {seed})"
    fin = torch.isfinite(b)
    close(a[fin], b[fin], 1e-5, rel=True, what="indexer scores", seed=seed)
    # top-k on the reference scores: same multiset of chosen scores, ids up to ties.
    ta = fused.topk(b, k)
    tb = REFERENCE_OPS["topk"](b, k)
    vals_a = torch.where(ta >= 0, b.gather(1, ta.clamp_min(0)), torch.full_like(b[:, :1], float("-inf")).expand_as(ta))
    vals_b = torch.where(tb >= 0, b.gather(1, tb.clamp_min(0)), torch.full_like(b[:, :1], float("-inf")).expand_as(tb))
    assert torch.equal(vals_a.sort(1).values.cpu(), vals_b.sort(1).values.cpu()), f"topk scores differ (seed {seed})"
    assert bool((ta[:, 1:] >= ta[:, :-1]).logical_or(ta[:, 1:] < 0).all()), "topk ids not ascending"
    ids_agree_tie_robust(ta, tb, b, 0.0, "topk ids", seed)
    assert torch.equal(ta.cpu(), tb.cpu()), f"topk ids differ (seed {seed})"


@pytest.mark.parametrize("t,n", [(1, 37), (2, 37), (5, 130), (18, 64)])
def test_indexer_parity_small(fused, gen, t, n):
    check_indexer(fused, gen, t, n, TINY.index_n_heads, TINY.index_head_dim, torch.float32, TINY.index_topk)


def test_topk_ties_resolved_within_the_tie(fused, gen):
    """ReLU zeros make many exact ties: the fused select keeps the reference's rule
    (lowest index wins) exactly, not just up to the tie."""
    scores = torch.relu(randn(gen, 6, 50)).round(decimals=1)
    scores[:, 45:] = float("-inf")
    a = fused.topk(scores, 16)
    b = REFERENCE_OPS["topk"](scores, 16)
    ids_agree_tie_robust(a, b, scores, 0.0, "topk ties", gen.initial_seed())
    assert torch.equal(a.cpu(), b.cpu()), f"topk ties resolved differently (seed {gen.initial_seed()})"


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
@pytest.mark.parametrize("t,n", [(1, 4096), (8, 65536), (300, 2048), (2, 131072), (8, 8192)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_indexer_parity_gpu(fused, gen, t, n, dtype):
    """(8, 8192): one key tile per program against 128 columns, the policy's 8-warp case."""
    check_indexer(fused, gen, t, n, MID.index_n_heads, MID.index_head_dim, dtype, MID.index_topk)


# ---------------------------------------------------------------------------- attention
def check_attention(fused, gen, t, n_heads, hd, window, k, n_comp, dtype, with_topk=True, splits=None,
                    merge_d=0, value_d=0, tile=None, op=None):
    """The fused attention against the reference on random caches; ``tile`` forces a
    tiling (else ``splits`` / ``merge_d`` / ``value_d`` force one of 16-key tiles), ``op``
    an instance to call (its state, e.g. the merge tail's counters, is then the caller's
    to inspect). Returns the fused output."""
    p_max = 3 * window
    positions = torch.randint(0, p_max, (t,), generator=gen)
    positions[0] = 0  # window edge: only itself
    if t > 2:
        positions[1] = window - 1  # the first full window
    floor = torch.zeros(t, dtype=torch.int64)
    if t > 3:
        floor[2] = positions[2] // 2 + 1 if positions[2] > 1 else 0  # a replay floor inside the window
    positions[2:3] = torch.maximum(positions[2:3], floor[2:3])
    q = randn(gen, t, n_heads, hd, dtype=dtype)
    swa = randn(gen, p_max, hd, dtype=dtype)
    comp = topk = None
    if with_topk:
        comp = randn(gen, n_comp, hd, dtype=dtype)
        topk = torch.randint(-1, n_comp, (t, k), generator=gen).sort(1).values.to(DEVICE)
        topk[0] = -1  # nothing selected
    sink = randn(gen, n_heads)
    pos, flo = positions.to(DEVICE), floor.to(DEVICE)
    # A forced split count in 16-key tiles, so that small key lists split too.
    if tile is None and splits is not None:
        tile = AttentionTile(16, 16, splits=splits, merge_d=merge_d, value_d=value_d)
    if op is None:
        op = fused.attention if tile is None else type(fused.attention)(tile=tile)
    a = op(q, pos, flo, swa, window, comp, topk, sink, NUM)
    b = REFERENCE_OPS["attention"](q, pos, flo, swa, window, comp, topk, sink, NUM)
    tol = 2e-5 if dtype == torch.float32 else 2e-2
    close(a, b, tol, rel=True, what="attention", seed=gen.initial_seed())
    return a


@pytest.mark.parametrize("t,splits,with_topk,merge_d,value_d", [
    (1, None, True, 0, 0), (5, None, True, 0, 0), (4, 4, True, 0, 0), (3, None, False, 0, 0),
    (4, 4, True, 16, 0), (2, 3, True, 32, 0), (3, 1, True, 0, 16), (4, 4, True, 32, 32), (2, 2, False, 0, 16)])
def test_attention_parity_small(fused, gen, t, splits, with_topk, merge_d, value_d):
    """``merge_d``: the merge in head-dim column blocks; ``value_d``: each partial program
    accumulating a block of the value columns (TINY's head dim is 64)."""
    check_attention(fused, gen, t, TINY.num_attention_heads, TINY.head_dim, 16, 8, 10, torch.float32,
                    with_topk=with_topk, splits=splits, merge_d=merge_d, value_d=value_d)


@pytest.mark.parametrize("t,splits,with_topk", [(1, None, True), (5, None, True), (4, 4, True), (2, 3, True),
                                                (3, None, False)])
def test_attention_ids_ahead_parity_small(fused, t, splits, with_topk):
    """``AttentionTile.ids_ahead`` (each tile's ids loaded one iteration ahead): the
    reference's values, and bit for bit the plain tile's (the same ids address the same
    keys), with splits (a split's first tile starts past the window or inside it) and
    without top-k."""
    outs = [check_attention(fused, torch.Generator().manual_seed(11), t, TINY.num_attention_heads, TINY.head_dim,
                            16, 8, 10, torch.float32, with_topk=with_topk,
                            tile=AttentionTile(16, 16, splits=splits or 1, ids_ahead=ahead))
            for ahead in (False, True)]
    assert torch.equal(outs[0], outs[1])


@pytest.mark.parametrize("window", [16, 24])
@pytest.mark.parametrize("t,splits,with_topk,ahead,value_d", [
    (1, None, True, False, 0), (5, None, True, True, 0), (4, 4, True, False, 0), (4, 4, True, True, 0),
    (2, 3, True, False, 32), (3, None, False, False, 0)])
def test_attention_split_sources_parity_small(fused, t, splits, with_topk, ahead, value_d, window):
    """``AttentionTile.split_sources`` (a split's window slots in one loop, its top-k slots in
    a second): the reference's values at a window that is a whole number of 16-key tiles and
    at one that is not (the single loop's tile there holds keys of both sources), splits
    starting inside the window or past it, ids ahead, a value split and no top-k; where the
    window is whole tiles, bit for bit the single loop's output (the same tiles)."""
    outs = [check_attention(fused, torch.Generator().manual_seed(13), t, TINY.num_attention_heads, TINY.head_dim,
                            window, 8, 10, torch.float32, with_topk=with_topk,
                            tile=AttentionTile(16, 16, splits=splits or 1, ids_ahead=ahead, value_d=value_d,
                                               split_sources=on))
            for on in (False, True)]
    if window % 16 == 0:
        assert torch.equal(outs[0], outs[1])


def check_merge_tail(fused, seed, t, n_heads, hd, window, k, n_comp, dtype, tile, with_topk=True):
    """``tile`` with ``merge_tail`` against the same tile merged by the second launch: both
    within the reference's tolerance (check_attention), within float32 rounding of each
    other (the tail sums the splits in order, the merge kernel as a tree), the tail's
    output the same bit for bit when called again (whichever program finishes last), and
    every ticket counter back at zero after each call (the next call's tickets start at 0)."""
    from dataclasses import replace

    def run(merge_tail, op):
        return check_attention(fused, torch.Generator().manual_seed(seed), t, n_heads, hd, window, k, n_comp, dtype,
                               with_topk=with_topk, op=op or type(fused.attention)(tile=replace(tile, merge_tail=merge_tail)))

    merged = run(False, None)
    tail_op = type(fused.attention)(tile=replace(tile, merge_tail=True))
    tails = [run(True, tail_op) for _ in range(2)]
    counters = tail_op.tickets.get(torch.device(DEVICE), 1)
    assert int(counters.abs().sum()) == 0, f"ticket counters left at {counters.nonzero().flatten().tolist()}"
    assert torch.equal(tails[0], tails[1]), "the merge tail's output moved between two identical calls"
    scale = float(merged.abs().max())
    diff = float((tails[0] - merged).abs().max())
    assert diff <= 1e-5 * scale, f"merge tail vs merge launch: max |diff| {diff:.3g} (output scale {scale:.3g})"
    return tails[0]


@pytest.mark.parametrize("t,n_heads,splits,with_topk,value_d", [
    (1, 4, 2, True, 0), (4, 4, 3, True, 0), (5, 32, 4, True, 0), (3, 4, 4, False, 0), (4, 4, 3, True, 32),
    (2, 20, 5, True, 0)])
def test_attention_merge_tail_parity_small(fused, t, n_heads, splits, with_topk, value_d):
    """``AttentionTile.merge_tail`` (the last partial program of each query's head block
    merges, no merge launch) on the interpreter: splits that are and are not a power of two,
    two head blocks (32 heads, 20 with a partial block), a value split (the ticket counts
    every split's every column block) and no top-k."""
    check_merge_tail(fused, 17, t, n_heads, TINY.head_dim, 16, 8, 10, torch.float32,
                     AttentionTile(16, 16, splits=splits, value_d=value_d), with_topk=with_topk)


def test_attention_merge_tail_needs_no_merge_columns():
    with pytest.raises(ValueError, match="merge_tail"):
        AttentionTile(16, 16, splits=4, merge_d=64, merge_tail=True)


def test_attention_float32_runs_the_rows_float32_keys_per_tile(fused):
    """float32 operands run ``AttentionTile.float32_block_n`` keys per tile (the wide rows:
    their 64-key float32 tiles do not fit sm_90's shared memory): bit for bit the output of
    the same tiling on that many keys, and not the output on ``block_n`` keys (another
    online-softmax order, so other rounding)."""
    def run(tile):
        return check_attention(fused, torch.Generator().manual_seed(5), 9, TINY.num_attention_heads, TINY.head_dim,
                               32, 64, 80, torch.float32, tile=tile)

    narrowed = run(AttentionTile(16, 32, splits=2, float32_block_n=16))
    assert torch.equal(narrowed, run(AttentionTile(16, 16, splits=2)))
    assert not torch.equal(narrowed, run(AttentionTile(16, 32, splits=2)))


@pytest.mark.parametrize("t", [9, 66])
def test_attention_parity_wide_heads(fused, gen, t):
    """64 heads at 9-64 queries and at prefill take the tile table's wide rows (all 64 heads
    in one program on 8 warps: runtime/kernels/attention_tiles.py, WIDE_TILES)."""
    from runtime.kernels.attention_tiles import WIDE_TILES, tile_for

    assert tile_for(t, 512, heads=64) is WIDE_TILES[(64 if t <= 64 else 0, 512)]  # rows of head dim 512
    check_attention(fused, gen, t, 64, 512, 16, 8, 10, torch.float32)


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
@pytest.mark.parametrize("t,n_heads", [(1, 16), (8, 16), (64, 16), (200, 16), (4, 64), (64, 64), (200, 64)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_attention_parity_gpu(fused, gen, t, n_heads, dtype):
    check_attention(fused, gen, t, n_heads, 512, 128, 512, 3000, dtype)


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
@pytest.mark.parametrize("t,n_heads", [(8, 16), (64, 16), (200, 16), (8, 64), (64, 64), (200, 64)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("flag", ["prefetch_ids", "ids_ahead"])
def test_attention_prefetched_ids_parity_gpu(fused, t, n_heads, dtype, flag):
    """``AttentionTile.prefetch_ids`` (the top-k ids pulled into L1 before the loop) and
    ``ids_ahead`` (each tile's ids loaded one iteration ahead) on the table's own tile for
    the shape, each at 3 stages too: within the reference's tolerance, and bit for bit the
    output of the same tile without it (neither moves a value). The 3-stage twin of a
    2-stage row runs one key loop (no ``split_sources``), and programs of 64 heads (the wide
    rows) whose key tile takes 64 KB (float32 on 32 keys, bf16 on 64) stay at the row's own
    stages: there the 3-stage tile with the ids ahead needs more shared memory than sm_90's
    232,448 bytes (Triton 3.6, compiled metadata: float32 on 32 keys 270,592, bf16 on 64
    keys 262,144)."""
    from dataclasses import replace

    from runtime.kernels.attention_tiles import tile_for

    row = tile_for(t, 512, heads=n_heads)
    key_tile_bytes = row.keys_per_tile(dtype == torch.float32) * 512 * torch.finfo(dtype).bits // 8
    wide_and_large = row.heads_per_program(n_heads) >= 64 and key_tile_bytes >= 64 * 1024
    for stages in sorted({row.num_stages} if wide_and_large else {row.num_stages, 3}):
        tile = replace(row, num_stages=stages, prefetch_ids=False, ids_ahead=False,
                       split_sources=row.split_sources and stages == row.num_stages)
        outs = [check_attention(fused, torch.Generator().manual_seed(7), t, n_heads, 512, 128, 512, 3000, dtype,
                                tile=replace(tile, **{flag: on})) for on in (False, True)]
        assert torch.equal(outs[0], outs[1]), f"{flag} moved the output: {tile.label()} T={t} H={n_heads}"


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
@pytest.mark.parametrize("t,n_heads", [(1, 16), (8, 16), (64, 16), (8, 64), (64, 64)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_attention_merge_tail_parity_gpu(fused, t, n_heads, dtype):
    """The merge tail on the table's own tile for the shape (without merge columns: the tail
    has no merge programs), compiled: see ``check_merge_tail``."""
    from dataclasses import replace

    from runtime.kernels.attention_tiles import tile_for

    row = tile_for(t, 512, heads=n_heads)
    check_merge_tail(fused, 7, t, n_heads, 512, 128, 512, 3000, dtype, replace(row, merge_d=0))


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
@pytest.mark.parametrize("t,n_heads", [(1, 16), (8, 16), (64, 16), (1, 64), (8, 64), (64, 64)])
@pytest.mark.parametrize("merge_warps", [1, 2, 4, 8])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_attention_merge_warps_parity_gpu(fused, t, n_heads, merge_warps, dtype):
    """``AttentionTile.merge_warps`` on the table's own tile for the shape: within the
    reference's tolerance, and within float32 rounding of the row's own merge (another warp
    count lays the splits' sum out differently across threads)."""
    from dataclasses import replace

    from runtime.kernels.attention_tiles import tile_for

    row = tile_for(t, 512, heads=n_heads)
    outs = [check_attention(fused, torch.Generator().manual_seed(11), t, n_heads, 512, 128, 512, 3000, dtype,
                            tile=tile) for tile in (row, replace(row, merge_warps=merge_warps))]
    scale = float(outs[0].abs().max())
    diff = float((outs[1] - outs[0]).abs().max())
    assert diff <= 1e-5 * scale, (f"merge on {merge_warps} warps vs the row's {row.merge_warps}: max |diff| {diff:.3g} "
                                  f"(output scale {scale:.3g})")


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
@pytest.mark.parametrize("t,n_heads", [(1, 16), (8, 16), (64, 16), (200, 16), (8, 64), (64, 64), (200, 64)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_attention_split_sources_parity_gpu(fused, t, n_heads, dtype):
    """``AttentionTile.split_sources`` compiled on the table's own tile for the shape (window
    128: whole tiles): within the reference's tolerance, and bit for bit the single loop's
    output."""
    from dataclasses import replace

    from runtime.kernels.attention_tiles import tile_for

    tile = tile_for(t, 512, heads=n_heads)
    outs = [check_attention(fused, torch.Generator().manual_seed(7), t, n_heads, 512, 128, 512, 3000, dtype,
                            tile=replace(tile, split_sources=on)) for on in (False, True)]
    assert torch.equal(outs[0], outs[1]), f"split_sources moved the output: {tile.label()} T={t} H={n_heads}"


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
@pytest.mark.parametrize("splits,merge_d,value_d", [(16, 64, 0), (16, 128, 0), (16, 256, 0), (16, 0, 256),
                                                    (4, 128, 128), (1, 0, 256)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_attention_column_blocks_parity_gpu(fused, gen, splits, merge_d, value_d, dtype):
    """The merge in head-dim column blocks and the value split, compiled, at decode shapes."""
    check_attention(fused, gen, 8, 16, 512, 128, 512, 3000, dtype, splits=splits, merge_d=merge_d, value_d=value_d)


# ---------------------------------------------------------------------------- inverse rope
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_inv_rope_parity(fused, gen, dtype):
    rows, n_heads, hd, half = (300, 16, 512, 32) if CUDA else (5, 4, 128, 8)
    out = randn(gen, rows, n_heads, hd)
    angles = randn(gen, rows, half, scale=3.0)
    a = fused.inv_rope(out, angles.cos(), angles.sin(), dtype)
    b = REFERENCE_OPS["inv_rope"](out, angles.cos(), angles.sin(), dtype)
    assert a.dtype == b.dtype == dtype
    close(a, b, 1e-6 if dtype == torch.float32 else 2.0**-7, rel=True, what="inv_rope", seed=gen.initial_seed())
