"""Fused "Mega-Gate": gate GEMM + score function + bias-for-selection + top-k +
renormalise x routed_scaling_factor, in one Triton kernel (DeepGEMM ``bf16_mega_gate``).

Same signature and math as :func:`runtime.moe.route`. The grid is (row blocks, expert
blocks x D splits), tiled by ``runtime/kernels/gate_tiles.py`` (which says why): each
program computes [BLOCK_M, BLOCK_E] logits over its D range. With more than one program
per row block they go to a float32 scratch ``part[split, T, E]``; every program then takes
a ticket (an acq_rel atomic on the row block's counter) and the program that takes the
last one sums the splits in split order (so the result does not depend on which program
finishes last) and selects the row block's top-k, ``SEL_M`` rows at a time, then puts the
counter back to 0 for the next call: one launch, no host sync, no memset, graph-capturable.
With one program per row block the logits stay in registers and it selects at once.
Where that last program would select many rows over many experts (the selection is
serial within a program: about 1.3 us per ``flash`` row on the H200), the policy asks
for a second launch instead (``GateTiling.select_rows``): the first writes the partials
only, the second sums them in split order and selects, a few rows per program. Since
session 43 the default policy asks for it at every call (``runtime/kernels/gate_tiles.py``
says why); the ticket-holder's selection serves the policies that ask for it.

Selection: k rounds of one max-reduction over a packed int64 key per expert: the score's
float bits mapped to an order-preserving int32 (high half) and ``E_PAD - 1 - expert``
(low half). The maximum is the largest value and, among equal values, the lowest expert,
exactly the reference's stable-sort tie rule, in one reduction instead of a max and then
a min over the index. (The map would order -0.0 below +0.0, which torch compares equal;
no selection value is -0.0: every score is >= +0.0 and +0.0 + -0.0 is +0.0.) The chosen
expert's score (not score + bias: the bias only selects) is gathered with a second
reduction, or, with ``GateTiling.pair_reduce``, carried through the one reduction as the
score of a (key, score) pair (``_larger_key``, jitted with the kernel: backend.py's ``jit``).
"""

from __future__ import annotations

import torch
import triton.language as tl

from runtime.config import V41Config
from runtime.kernels.backend import jit, next_pow2
from runtime.kernels.gate_tiles import GatePolicy, GateTiling
from runtime.kernels.pdl import dependent_launch, gdc_enter
from runtime.kernels.tickets import TicketCounters
from runtime.numerics import Numerics

SCORING_CODES = {"sqrtsoftplus": 0, "sigmoid": 1, "softmax": 2}
MAX_EXPERTS = 1 << 16  # the packed key keeps the expert in its low 16 bits


def _larger_key(key_a, score_a, key_b, score_b):
    """A selection round's combine: the pair with the larger packed key. Keys are unique
    within a row (the expert sits in their low bits), so the winner's score comes with it
    exactly, as the masked sum of the other form gathers it."""
    a_wins = key_a > key_b
    return tl.where(a_wins, key_a, key_b), tl.where(a_wins, score_a, score_b)


GATE_HELPERS = (_larger_key, gdc_enter)  # jitted with the kernel (runtime/kernels/backend.py's jit)


def _gate_kernel(
    x_ptr, w_ptr, bias_ptr, part_ptr, count_ptr, out_w_ptr, out_ids_ptr,
    T, E, D, SPLIT_D,
    inv_temp, route_scale,
    TOPK: tl.constexpr, BLOCK_K_OUT: tl.constexpr, SCORING: tl.constexpr, RENORM: tl.constexpr,
    IEEE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_D: tl.constexpr,
    E_PAD: tl.constexpr, SPLITS: tl.constexpr, SEL_M: tl.constexpr, ONE_PROGRAM: tl.constexpr,
    PHASE: tl.constexpr, PAIRED: tl.constexpr, PDL: tl.constexpr = False,
):
    """PHASE 0: one launch (the logits in registers, or partials and a ticket: the last
    program of a row block selects); 1: partials only; 2: select only, SEL_M rows per
    program (a second launch after PHASE 1, on a grid of cdiv(T, SEL_M) programs).
    ``PDL``: PHASE 2 is launched dependent on PHASE 1 (runtime/kernels/pdl.py): PHASE 1
    lets it launch from the start, PHASE 2 waits for PHASE 1 before any load."""
    if PDL:
        gdc_enter(PHASE == 2)
    # an eager launch passes Python floats as fp32, inductor's (torch.compile) as fp64: pin fp32
    inv_temp, route_scale = tl.cast(inv_temp, tl.float32), tl.cast(route_scale, tl.float32)
    pid_m = tl.program_id(0)
    if PHASE == 2:
        m0 = pid_m * SEL_M
        n_sub = 1
    else:
        pid_n = tl.program_id(1)
        split = pid_n % SPLITS
        m0 = pid_m * BLOCK_M
        rows = m0 + tl.arange(0, BLOCK_M)
        rows64 = rows.to(tl.int64)
        cols = (pid_n // SPLITS) * BLOCK_E + tl.arange(0, BLOCK_E)
        row_ok = rows < T
        col_ok = cols < E
        acc = tl.zeros((BLOCK_M, BLOCK_E), dtype=tl.float32)
        d_lo = split * SPLIT_D
        d_hi = tl.minimum(d_lo + SPLIT_D, D)
        for d0 in range(d_lo, d_hi, BLOCK_D):
            ds = d0 + tl.arange(0, BLOCK_D)
            d_ok = ds < d_hi
            a = tl.load(x_ptr + rows64[:, None] * D + ds[None, :], mask=row_ok[:, None] & d_ok[None, :], other=0.0)
            b = tl.load(w_ptr + cols[None, :].to(tl.int64) * D + ds[:, None], mask=col_ok[None, :] & d_ok[:, None],
                        other=0.0)
            if IEEE:
                acc += tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
            else:
                acc += tl.dot(a, b)
        if ONE_PROGRAM:
            n_sub = 1
        else:
            tl.store(part_ptr + (split * T + rows64)[:, None] * E + cols[None, :], acc,
                     mask=row_ok[:, None] & col_ok[None, :])
            if PHASE == 1:
                n_sub = 0  # the second launch selects
            else:
                tl.debug_barrier()  # every thread's partial is written before the ticket releases them
                ticket = tl.atomic_add(count_ptr + pid_m, 1, sem="acq_rel")
                last = ticket == tl.num_programs(1) - 1
                tl.store(count_ptr + pid_m, 0, mask=last)  # all others have taken theirs: reset for the next call
                n_sub = tl.where(last, (tl.minimum(T - m0, BLOCK_M) + SEL_M - 1) // SEL_M, 0)
    ecols = tl.arange(0, E_PAD)
    e_ok = ecols < E
    kcols = tl.arange(0, BLOCK_K_OUT)
    for sub in range(0, n_sub):
        if ONE_PROGRAM:
            srows = rows
            z = acc
        else:
            srows = m0 + sub * SEL_M + tl.arange(0, SEL_M)
            s_ok = (srows < T)[:, None] & e_ok[None, :]
            z = tl.zeros((SEL_M, E_PAD), dtype=tl.float32)
            for s in tl.static_range(SPLITS):  # split order, whoever finished last
                # .cg: read through L2, never a stale L1 line of another program's partial
                z += tl.load(part_ptr + (s * T + srows.to(tl.int64))[:, None] * E + ecols[None, :], mask=s_ok,
                             other=0.0, cache_modifier=".cg")
        srow_ok = srows < T
        z = z * inv_temp
        if SCORING == 0:  # sqrt(softplus(z)), torch's threshold 20
            soft = tl.maximum(z, 0.0) + tl.log(1.0 + tl.exp(-tl.abs(z)))
            soft = tl.where(z > 20.0, z, soft)
            scores = tl.sqrt(soft)
        elif SCORING == 1:
            scores = 1.0 / (1.0 + tl.exp(-z))
        else:
            zm = tl.where(e_ok[None, :], z, float("-inf"))
            e = tl.exp(zm - tl.max(zm, axis=1)[:, None])
            scores = e / tl.sum(e, axis=1)[:, None]
        bias = tl.load(bias_ptr + ecols, mask=e_ok, other=0.0).to(tl.float32)
        sel = tl.where(e_ok[None, :], scores + bias[None, :], float("-inf"))
        bits = sel.to(tl.int32, bitcast=True)
        key = (bits ^ ((bits >> 31) & 0x7FFFFFFF)).to(tl.int64)  # float order as signed ints
        packed = (key << 32) | (E_PAD - 1 - ecols).to(tl.int64)[None, :]
        gone = tl.full((SEL_M, E_PAD), -1, tl.int64) << 63  # below every live key
        top_w = tl.zeros((SEL_M, BLOCK_K_OUT), dtype=tl.float32)
        top_i = tl.zeros((SEL_M, BLOCK_K_OUT), dtype=tl.int64)
        for i in tl.static_range(TOPK):
            if PAIRED:
                best, w = tl.reduce((packed, scores), 1, _larger_key)
                hit = packed == best[:, None]
            else:
                best = tl.max(packed, axis=1)
                hit = packed == best[:, None]
                w = tl.sum(tl.where(hit, scores, 0.0), axis=1)
            pick = (E_PAD - 1) - (best & 0xFFFF)
            top_w = tl.where(kcols[None, :] == i, w[:, None], top_w)
            top_i = tl.where(kcols[None, :] == i, pick[:, None], top_i)
            packed = tl.where(hit, gone, packed)
        if RENORM:
            top_w = top_w / (tl.sum(top_w, axis=1)[:, None] + 1e-20)
        top_w = top_w * route_scale
        out_mask = srow_ok[:, None] & (kcols[None, :] < TOPK)
        offs = srows.to(tl.int64)[:, None] * TOPK + kcols[None, :]
        tl.store(out_w_ptr + offs, top_w, mask=out_mask)
        tl.store(out_ids_ptr + offs, top_i, mask=out_mask)


class FusedGate:
    """Callable with :func:`runtime.moe.route`'s signature.

    Holds the row-block ticket counters (``runtime/kernels/tickets.py``: int32 zeros,
    one per row block, per device, left at zero by every call)."""

    def __init__(self, policy: GatePolicy | None = None) -> None:
        """``policy``: how calls are tiled (default :class:`GatePolicy`); benchmarks and
        tests pass others (``GatePolicy(one_program=True)``: the first kernel's tiling)."""
        self.kernel = jit(_gate_kernel, helpers=GATE_HELPERS)
        self.policy = policy or GatePolicy()
        self.tickets = TicketCounters()

    def __call__(self, x: torch.Tensor, gate_w: torch.Tensor, bias: torch.Tensor, config: V41Config,
                 num: Numerics) -> tuple[torch.Tensor, torch.Tensor]:
        t, d = x.shape
        e, k = gate_w.shape[0], config.num_experts_per_tok
        if e >= MAX_EXPERTS:
            raise ValueError(f"fused gate: at most {MAX_EXPERTS - 1} experts, got {e}")
        x = x.contiguous()
        w = gate_w.contiguous()
        if x.dtype != w.dtype:
            x, w = x.float(), w.float()
        ieee = x.dtype == torch.float32
        out_w = torch.empty(t, k, dtype=torch.float32, device=x.device)
        out_ids = torch.empty(t, k, dtype=torch.int64, device=x.device)
        if t == 0:
            return out_w, out_ids
        tiles = self.policy.tiling(t, d, e)
        if tiles.one_program(d, e):
            part, count = out_w, out_ids  # not read (ONE_PROGRAM)
        else:
            part = torch.empty(tiles.splits(d), t, e, dtype=torch.float32, device=x.device)
            # a selecting second launch takes no ticket (count not read)
            count = out_ids if tiles.select_rows else self.tickets.get(x.device, tiles.grid(t, d, e)[0])
        args = (x, w, bias.float().contiguous(), part, count, out_w, out_ids, t, e, d, tiles.split_d,
                1.0 / config.gate_temp, config.routed_scaling_factor)
        pdl = dependent_launch(self.policy.dependent_select, x.device)
        for launch_grid, kwargs in gate_launches(tiles, t, d, e, config, ieee, pdl):
            self.kernel[launch_grid](*args, **kwargs)
        return out_w, out_ids


def gate_launches(tiles: GateTiling, t: int, d: int, e: int, config: V41Config,
                  ieee: bool, pdl: bool = False) -> list[tuple[tuple[int, ...], dict]]:
    """(grid, keyword arguments) of each launch of one call: one (PHASE 0), or partials
    then selection (PHASE 1, 2) when the tiling asks for a selecting launch (the sm_90
    compile check, tests/runtime/compile_sm90.py, compiles exactly these); ``pdl``: the
    selection launched dependent on the partials (runtime/kernels/pdl.py)."""
    k = config.num_experts_per_tok
    consts = dict(TOPK=k, BLOCK_K_OUT=max(2, next_pow2(k)), SCORING=SCORING_CODES[config.scoring_func],
                  RENORM=config.norm_topk_prob and k > 1, IEEE=ieee, BLOCK_M=tiles.block_m,
                  BLOCK_E=tiles.block_e, BLOCK_D=tiles.block_d, E_PAD=tiles.e_pad, SPLITS=tiles.splits(d),
                  SEL_M=tiles.sel_m, ONE_PROGRAM=tiles.one_program(d, e), PAIRED=tiles.pair_reduce,
                  num_warps=tiles.num_warps,
                  **({"num_stages": tiles.num_stages} if tiles.num_stages else {}))
    grid = tiles.grid(t, d, e)
    if tiles.select_rows:
        return [(grid, dict(consts, PHASE=1, PAIRED=False, PDL=pdl)),  # selects nothing: one form for both
                ((tiles.select_grid(t),), dict(consts, PHASE=2, num_warps=tiles.select_warps or tiles.num_warps,
                                               PDL=pdl, launch_pdl=pdl))]
    return [(grid, dict(consts, PHASE=0))]
