"""Programmatic dependent launch (runtime/kernels/pdl.py) in the four two-launch ops:
attention's merge, the gate's selecting launch, mHC's finishing launch and the split
top-k's candidates' select.

- Off CUDA the switches change nothing: each op interpreted with its switch on gives the
  same bits as with it off (the wiring runs; PDL itself is never asked of the interpreter).
- sm_90 (the PTX of each pair of launches, compiled as the ops launch them; no GPU): with
  the switch, the dependent waits (``griddepcontrol.wait``) before its first memory access
  and is compiled for a PDL launch, and the first launch lets it launch before its own
  first access; without it, neither instruction is there.
- On CUDA (skipped here): each op with its switch on equals itself with it off, bit for bit,
  at decode shapes where it takes two launches.
"""

from __future__ import annotations

import textwrap

import pytest
import torch

from benchmarks.dependent_launch import results_equal
from runtime.config import V41Config
from runtime.kernels.pdl import dependent_launch
from runtime.numerics import Numerics

CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"
NUM = Numerics()


@pytest.fixture
def kernels(monkeypatch):
    """The fused ops' modules with kernels compiled on CUDA, interpreted without it (the
    variable is set before the ops wrap their kernels)."""
    if not CUDA:
        monkeypatch.setenv("TRITON_INTERPRET", "1")
    from runtime.kernels import attention, gate, mhc, topk

    return attention, gate, mhc, topk


def test_only_a_hopper_gpu_launches_dependent():
    assert not dependent_launch(True, torch.device("cpu"))
    assert not dependent_launch(False, torch.device("cuda"))
    if CUDA:
        assert dependent_launch(True, torch.device("cuda")) == (torch.cuda.get_device_capability()[0] >= 9)
    else:
        assert not dependent_launch(True, torch.device("cuda"))


def attention_pair(attention, gen, t: int, heads: int, hd: int, window: int, k: int, ctx: int, splits: int | None):
    q = torch.randn(t, heads, hd, generator=gen).to(DEVICE)
    positions = torch.randint(window, ctx, (t,), generator=gen).to(DEVICE)
    floor = torch.zeros(t, dtype=torch.int64, device=DEVICE)
    swa, comp = torch.randn(ctx, hd, generator=gen).to(DEVICE), torch.randn(ctx // 2, hd, generator=gen).to(DEVICE)
    topk = torch.randint(-1, ctx // 2, (t, k), generator=gen).to(DEVICE)
    sink = torch.randn(heads, generator=gen).to(DEVICE)
    args = (q, positions, floor, swa, window, comp, topk, sink, NUM)
    # off, on, on with the partials triggering at exit
    return [attention.FusedSparseAttention(splits=splits, dependent_merge=on, merge_at_exit=at_exit)(*args)
            for on, at_exit in ((False, False), (True, False), (True, True))]


def gate_pair(gate, gen, t: int, c: V41Config, dtype: torch.dtype):
    from runtime.kernels.gate_tiles import GatePolicy

    d, e = c.hidden_size, c.n_routed_experts
    x = torch.randn(t, d, generator=gen).to(DEVICE, dtype)
    w = (torch.randn(e, d, generator=gen) * d**-0.5).to(DEVICE, dtype)
    bias = (torch.randn(e, generator=gen) * 0.1).to(DEVICE)
    # select_from=0: every call selects in a second launch, so the pair is there at any size
    return [gate.FusedGate(GatePolicy(select_from=0, dependent_select=on))(x, w, bias, c, NUM) for on in (False, True)]


def mhc_pair(mhc, gen, t: int, c: V41Config, dtype: torch.dtype):
    from runtime.kernels.mhc_tiles import INTERPRETED, MhcPolicy
    from runtime.mhc import HcMix

    d = c.hidden_size
    streams, out = torch.randn(t, 4, d, generator=gen).to(DEVICE, dtype), torch.randn(t, d, generator=gen).to(DEVICE, dtype)
    prev = HcMix(torch.rand(t, 4, generator=gen).to(DEVICE), torch.rand(t, 4, generator=gen).to(DEVICE) * 2,
                 torch.softmax(torch.randn(t, 4, 4, generator=gen), -1).to(DEVICE))
    args = (streams, out, prev, torch.rand(t, 4, generator=gen).to(DEVICE),
            (torch.randn(24, 4 * d, generator=gen) * 0.01).to(DEVICE), torch.randn(24, generator=gen).to(DEVICE),
            torch.ones(3, device=DEVICE), torch.randn(d, generator=gen).to(DEVICE, dtype), c, NUM)
    # tail_rows past t: the finish is a second launch (decode's form) at any size
    base = MhcPolicy(tail_rows=1 << 20) if CUDA else INTERPRETED
    results = []
    for on, at_exit in ((False, False), (True, False), (True, True)):  # off, on, on triggering at exit
        policy = {**vars(base), "dependent_finish_to": (1 << 30) if on else 0, "finish_at_exit_from": 0 if at_exit else 1 << 30}
        new_streams, mix, x = mhc.FusedMhc(type(base)(**policy))(*args)
        results.append(torch.cat([new_streams.float().flatten(), mix.pre.flatten(), mix.post.flatten(),
                                  mix.comb.flatten(), x.float().flatten()]))
    return results


def topk_pairs(topk, gen, t: int, n: int, k: int):
    """(off, on) ids of the split top-k's chained, resident and row-bound forms."""
    from runtime.kernels.topk_tiles import RowBound, TopkSplit, TopkSplitPolicy

    scores = torch.randn(t, n, generator=gen).to(DEVICE)
    scores[:, ::7] = 0.0  # ties
    chunk = n // 4
    out = []
    for form in ({}, {"resident": True}, {"row_bound": RowBound()}):
        split = TopkSplit(4, chunk, 64, 4, **form)
        out.append([topk.FusedTopk(policy=TopkSplitPolicy(dependent_select=on)).run(scores, k, split)
                    for on in (False, True)])
    return out


def test_the_switches_change_nothing_on_the_interpreter_or_the_gpu(kernels, gen):
    """Small shapes (interpreted here, compiled on CUDA), every op in its two-launch form."""
    attention, gate, mhc, topk = kernels
    tiny = V41Config.preset("tiny")
    seed = gen.initial_seed()
    off, on, at_exit = attention_pair(attention, gen, 2, 4, 32, 8, 16, 64, splits=3)
    assert results_equal(off, on) and results_equal(off, at_exit), f"attention (seed {seed})"
    (w_off, ids_off), (w_on, ids_on) = gate_pair(gate, gen, 3, tiny, torch.float32)
    assert results_equal(w_off, w_on) and torch.equal(ids_off, ids_on), f"gate (seed {seed})"
    off, on, at_exit = mhc_pair(mhc, gen, 2, tiny, torch.float32)
    assert results_equal(off, on) and results_equal(off, at_exit), f"mhc (seed {seed})"
    for off, on in topk_pairs(topk, gen, 2, 512, 16):
        assert torch.equal(off, on), f"top-k (seed {seed})"


@pytest.mark.skipif(not CUDA, reason="needs CUDA")
@pytest.mark.parametrize("name", ["mid", "flash"])
@pytest.mark.parametrize("t", [1, 8, 64])
def test_dependent_launches_match_on_gpu(kernels, gen, name, t):
    """Decode shapes in bf16, each op's two launches with and without PDL: the same bits.
    64 rows: where dependent_launch_h200.md found the gate's "2 launches + pdl" differing
    from the one-launch default at ``mid`` (a different form), this says whether PDL is
    part of that difference."""
    attention, gate, mhc, topk = kernels
    c = V41Config.preset(name)
    seed = gen.initial_seed()
    off, on, at_exit = attention_pair(attention, gen, t, c.num_attention_heads, c.head_dim, c.sliding_window,
                                      c.index_topk, 8192, splits=None)
    assert results_equal(off, on) and results_equal(off, at_exit), f"attention (seed {seed})"
    (w_off, ids_off), (w_on, ids_on) = gate_pair(gate, gen, t, c, torch.bfloat16)
    assert results_equal(w_off, w_on) and torch.equal(ids_off, ids_on), f"gate (seed {seed})"
    off, on, at_exit = mhc_pair(mhc, gen, t, c, torch.bfloat16)
    assert results_equal(off, on) and results_equal(off, at_exit), f"mhc (seed {seed})"
    for off, on in topk_pairs(topk, gen, t, 65536, c.index_topk):
        assert torch.equal(off, on), f"top-k (seed {seed})"


PDL_PTX = textwrap.dedent("""
    import re
    from tests.runtime.compile_sm90 import compile_sm90, pdl_launch_pairs, pdl_roles

    MEMORY = re.compile(r"\\b(ld\\.global|st\\.global|cp\\.async|atom\\.|red\\.)")

    def first(lines, pattern):
        return next((i for i, line in enumerate(lines) if re.search(pattern, line)), -1)

    for pdl, at_exit in ((False, False), (True, False), (True, True)):
        for op, *launches in pdl_launch_pairs(pdl, at_exit):
            for role, (kernel, sig, kwargs) in zip(pdl_roles(launches), launches):
                compiled = compile_sm90(kernel, sig, kwargs)
                lines = compiled.asm["ptx"].splitlines()
                memory = next(i for i, line in enumerate(lines) if MEMORY.search(line))
                print("|".join(str(v) for v in (op, role, int(pdl) + int(at_exit), first(lines, r"griddepcontrol\\.wait"),
                                                 first(lines, r"griddepcontrol\\.launch_dependents"), memory,
                                                 int(bool(compiled.metadata.launch_pdl)))))
""")


@pytest.mark.slow
def test_the_dependent_waits_before_its_first_access_on_sm90(run_sm90_script):
    stdout = run_sm90_script(PDL_PTX)
    rows = [line.split("|") for line in stdout.strip().splitlines() if line.count("|") == 6]
    # 5 pairs x 2 roles and the row-bound top-k's 3 launches, PDL off / on, and attention's
    # and mHC's pairs triggering at exit
    assert len(rows) == 30, stdout
    for op, role, pdl, wait, trigger, memory, launch_pdl in rows:
        wait, trigger, memory = int(wait), int(trigger), int(memory)
        where = f"{op} {role} pdl={pdl}: wait {wait}, trigger {trigger}, first access {memory}"
        if pdl == "0":
            assert wait == trigger == -1 and launch_pdl == "0", where
        elif role == "dependent":
            assert 0 <= wait < memory and trigger == -1 and launch_pdl == "1", where
        elif role == "middle":  # waits for the launch before it, then lets the next one launch
            assert 0 <= wait < trigger < memory and launch_pdl == "1", where
        elif pdl == "2":  # at exit: no trigger, the exit is one
            assert wait == trigger == -1 and launch_pdl == "0", where
        else:
            assert 0 <= trigger < memory and wait == -1 and launch_pdl == "0", where
