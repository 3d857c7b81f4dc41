"""Fused vs reference, per op, on random inputs drawn fresh every run (the seed is in
every failure message). Without CUDA the kernels run through the Triton interpreter on
tiny shapes; with CUDA the same checks run at ``mid``/``flash`` shapes in bf16 and fp32.

Tolerances (max |fused - reference|; "rel" is relative to max |ref|):
  fp32: streams 1e-5 rel, coefficients 2e-5, x 2e-5 rel. bf16: streams 1 ulp (2^-7 rel),
  coefficients 1e-2 vs the full reference (ulp flips of X' feed the 24 projections) and
  5e-5 given the same rounded streams, x 4 ulps
"""

from __future__ import annotations

import pytest
import torch

from runtime.kernels.reference import REFERENCE_OPS
from runtime.mhc import HcMix
from tests.runtime.parity import CUDA, FLASH, MID, NUM, TINY, close, randn


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


@pytest.mark.parametrize("projection,t,dtype", [("ieee", 20, torch.float32), ("tf32x2", 40, torch.float32),
                                                ("bf16x3", 3, torch.bfloat16), ("ieee", 3, torch.bfloat16)])
def test_mhc_projection_apart_matches_the_reference(fused, gen, projection, t, dtype):
    """The projection in a launch of its own (``MhcPolicy.apart_from``): a sweep that mixes
    without projecting, the projection re-reading X' per split in tiles cut to divide the
    split (32 columns of a 96-column split, the last split running past D), then the
    finishing launch, against the reference at the usual tolerances.

    bf16 streams on 3 rows, as test_mhc_parity_small: Triton's interpreter rounds float32 to
    bf16 toward zero where the reference rounds to nearest (test_mhc_bf16x3_matches_the_reference
    says more), so with a previous output mixed in about half of X' differs in its last bit,
    and at ``tiny`` with 12-40 rows the coefficients passed check_mhc's 1e-2 in 2-3 of 40
    seeds under every tiling, the default interpreted one included; at 3 rows in none
    (largest 5.8e-3)."""
    from runtime.kernels.mhc import FusedMhc
    from runtime.kernels.mhc_tiles import MhcPolicy

    policy = MhcPolicy(projection=projection, decode_rows=2, apart_from=3, apart_sweep_t=8, apart_sweep_d=16,
                       apart_programs=3 * -(-t // 8), apart_t=16, apart_d=64)
    tiles = policy.tiling(t, TINY.hidden_size, cuda=False)
    assert tiles.apart and not tiles.tail and tiles.split_d % tiles.apart_d == 0 and tiles.apart_d < tiles.split_d
    assert tiles.splits(TINY.hidden_size) * tiles.split_d > TINY.hidden_size > tiles.split_d
    fused.mhc = FusedMhc(policy)
    check_mhc(fused, gen, TINY, t, dtype, with_out=True)
    check_mhc(fused, gen, TINY, t, dtype, with_out=False)


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
@pytest.mark.parametrize("projection", ["tf32x3", "bf16x3"])
@pytest.mark.parametrize("config,t", [(MID, 256), (MID, 512), (MID, 4096), (FLASH, 333), (FLASH, 4096)])
def test_mhc_projection_apart_parity_gpu(fused, gen, projection, config, t):
    """The projection in a launch of its own (``MhcPolicy.apart_from``, off by default),
    compiled, on bf16 streams, from 256 rows (the sweep variants "apart")."""
    from runtime.kernels.mhc import FusedMhc
    from runtime.kernels.mhc_tiles import MhcPolicy

    fused.mhc = FusedMhc(MhcPolicy(projection=projection, apart_from=256))
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
