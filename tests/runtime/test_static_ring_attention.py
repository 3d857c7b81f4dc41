"""The static step's fused attention over the slab's ring (runtime/static/ring_attention.py)
against the batched torch core it replaces (runtime/static/attention.py).

CPU: the Triton interpreter in float32 (it cannot compute bfloat16), tiny shapes, with
rings that wrapped once or several times, rings not yet full (negative positions),
window floors inside the window, -1 top-k ids (a row with none), a ratio-0 layer (no
top-k), every slot's invalid ring rows holding finite garbage, and the key list split
(the merge path) or not. The scratch buffers of the split path are never filled: one
test makes every fresh torch.empty NaN, so a slot no partial program wrote would show.

GPU (skipped without CUDA): ``mid`` shapes in float32 (IEEE dots: 2e-5 of the output
scale; the sharp check of which keys are read) and bf16 against the float32 core on the
same bf16 values, each element within a bound derived from the kernel's roundings
(``bf16_bound``; its main term is checked on CPU against an emulation of the rounding).
"""

from __future__ import annotations

import math

import pytest
import torch

from runtime.config import V41Config
from runtime.kv_packing import PackedKV
from runtime.numerics import Numerics
from runtime.static.attention import KeyLayout, decode_attention
from runtime.static.ring_attention import RingAttention, RingKeys

CUDA = torch.cuda.is_available()
# The small cases run where the kernel does: interpreted on CPU tensors, or compiled on CUDA
# ones (with CUDA present the kernel is compiled, and it cannot read CPU tensors).
SMALL = "cuda" if CUDA else "cpu"
NUM = Numerics()


@pytest.fixture
def kernel_cls(monkeypatch):
    """FusedSparseAttention, wrapped after TRITON_INTERPRET is set (CPU) or compiled (CUDA)."""
    if not CUDA:
        monkeypatch.setenv("TRITON_INTERPRET", "1")
    from runtime.kernels.attention import FusedSparseAttention

    return FusedSparseAttention


def slab_case(gen, b, n_heads, hd, window, k, n_entries, dtype, device, with_topk=True):
    """Random slab contents (every ring row finite, valid or not) and per-slot keys."""
    def randn(*shape):
        return torch.randn(*shape, generator=gen).to(device, dtype)

    # positions: a ring not yet full, the first full window, wrapped once and several times
    pos = torch.randint(0, 6 * window, (b,), generator=gen)
    fixed = [0, window - 1, window + 2, 5 * window + 3]
    pos[: min(b, len(fixed))] = torch.tensor(fixed[:b])
    floor = torch.zeros(b, dtype=torch.int64)
    if b > 2:  # a replay floor inside the window (the current position stays valid)
        floor[2] = pos[2] - window // 2
    q, ring, sink = randn(b, n_heads, hd), randn(b, window, hd), randn(n_heads).float()
    entries = topk = None
    if with_topk:
        entries = randn(b, n_entries, hd)
        topk = torch.randint(-1, n_entries, (b, k), generator=gen).sort(1).values
        topk[0] = -1  # nothing selected
        topk = topk.to(device)
    return q, ring, entries, pos.to(device), floor.to(device), topk, sink.to(device)


def both(kernel, case, window, hd):
    q, ring, entries, pos, floor, topk, sink = case
    layout = KeyLayout.for_window(pos, floor, window, hd)
    keys = RingKeys.for_window(pos, floor, window, hd)
    if topk is not None:
        layout, keys = layout.with_topk(topk), keys.with_topk(topk)
    got = RingAttention(kernel)(q, ring, entries, keys, sink, NUM)
    want = decode_attention(q, ring, entries, layout, sink, NUM)
    return got, want


def rel_err(got, want):
    return float((got.float() - want.float()).abs().max()) / max(1.0, float(want.abs().max()))


@pytest.mark.parametrize("b,splits,with_topk", [(5, None, True), (4, 3, True), (3, 2, False), (1, 4, True)])
def test_ring_attention_matches_the_batched_core(kernel_cls, gen, b, splits, with_topk):
    """splits None: the table's tiling (one split off CUDA); else 16-key tiles in that many
    splits of the 32 + 20 keys (3 -> 2 launched, 4 -> 4; the window alone, 2 -> 2)."""
    from runtime.kernels.attention_tiles import AttentionTile

    window, hd = 32, 32
    case = slab_case(gen, b, 4, hd, window, 20, 30, torch.float32, SMALL, with_topk=with_topk)
    kernel = kernel_cls() if splits is None else kernel_cls(tile=AttentionTile(16, 16, splits=splits))
    got, want = both(kernel, case, window, hd)
    assert got.dtype == torch.float32 and got.shape == want.shape
    err = rel_err(got, want)
    assert err <= 2e-5, f"max error {err:.3g} (seed {gen.initial_seed()})"


@pytest.mark.parametrize("splits", [1, 3])
def test_ring_attention_with_ids_ahead_is_bitwise_the_plain_tile(kernel_cls, gen, splits):
    """``AttentionTile.ids_ahead`` (the 32-head rows' default since session 29) on the ring
    layout the static step reads: each tile's top-k ids loaded one iteration ahead move no
    value (wrapped rings, a replay floor, empty slots and a slot with nothing selected), and
    the output is still the batched core's."""
    from runtime.kernels.attention_tiles import AttentionTile

    window, hd = 32, 32
    case = slab_case(gen, 5, 4, hd, window, 40, 50, torch.float32, SMALL)
    plain, _ = both(kernel_cls(tile=AttentionTile(16, 16, splits=splits)), case, window, hd)
    ahead, want = both(kernel_cls(tile=AttentionTile(16, 16, splits=splits, ids_ahead=True)), case, window, hd)
    assert torch.equal(plain, ahead), f"ids_ahead moved the output (seed {gen.initial_seed()})"
    err = rel_err(ahead, want)
    assert err <= 2e-5, f"max error {err:.3g} (seed {gen.initial_seed()})"


def test_split_path_writes_every_scratch_slot(kernel_cls, gen, monkeypatch):
    """No fill kernels: the partial programs write every (query, head, split) slot, so
    scratch that starts as NaN gives the same output as the unsplit kernel."""
    from runtime.kernels.attention_tiles import AttentionTile

    window, hd = 16, 32
    case = slab_case(gen, 4, 4, hd, window, 8, 12, torch.float32, SMALL)
    # 16-key tiles, 4 splits of 24 keys: the last split has 16 keys, some splits hold
    # only invalid keys (slot 0's window before position 0, its all -1 top-k).
    kernel = kernel_cls(tile=AttentionTile(16, 16, splits=4))
    empty = torch.empty

    def nan_empty(*shape, **kw):
        out = empty(*shape, **kw)
        return out.fill_(float("nan")) if out.is_floating_point() else out

    with monkeypatch.context() as m:
        m.setattr(torch, "empty", nan_empty)
        got, _ = both(kernel, case, window, hd)
    _, want = both(kernel_cls(splits=1), case, window, hd)
    assert not torch.isnan(got).any()
    err = rel_err(got, want)
    assert err <= 2e-5, f"max error {err:.3g} (seed {gen.initial_seed()})"


def test_ring_attention_refuses_mismatched_slots(kernel_cls, gen):
    q, ring, entries, pos, floor, topk, sink = slab_case(gen, 3, 4, 32, 8, 6, 10, torch.float32, SMALL)
    with pytest.raises(ValueError, match="3 queries but ring"):
        kernel_cls().ring(q, pos, floor, ring[:2], entries, topk, sink)


def bf16_bound(case, window: int) -> torch.Tensor:
    """Per output element, the largest |fused bf16 - float32 core| the kernel's roundings
    allow, both computed from the same bf16 values (the core in float32 throughout).

    Logits: both paths multiply bf16 exactly and sum hd products in float32, each within
    hd * 2^-23 * sum_i |q_i k_i| (a generous accumulation bound), so after the 1/sqrt(hd)
    scale the two logits differ by at most d = 2 * hd * 2^-23 * scale * max sum_i |q_i k_i|
    and every probability p_j by a factor within exp(+-2d). The PV product rounds each
    (unnormalised) probability to bf16 (relative 2^-8); the float32 sums, rescales and the
    split merge add at most a few ulps per key (4 (W + K) 2^-24, generous). Each error is
    relative to its term p_j |v_jd|, so element d of a row is within
    sum_j p_j |v_jd| * (2^-8 + expm1(2d) (1 + 2^-8) + 4 (W + K) 2^-24),
    p_j the exact probabilities (float64 here, the sink in the denominator)."""
    q, ring, entries, pos, floor, topk, sink = case
    b, n_heads, hd = q.shape
    layout = KeyLayout.for_window(pos, floor, window, hd)
    index = [ring.double().gather(1, layout.window)]
    if entries is not None:
        layout = layout.with_topk(topk)
        index.append(entries.double().gather(1, layout.entries))
    keys = torch.cat(index, dim=1)  # [B, W + K, hd]
    logits = torch.matmul(q.double(), keys.transpose(1, 2)) * hd**-0.5 + layout.bias.double()[:, None, :]
    sinks = sink.double().view(1, n_heads, 1).expand(b, n_heads, 1)
    probs = torch.softmax(torch.cat([logits, sinks], dim=-1), dim=-1)[..., :-1]
    dots = torch.matmul(q.double().abs(), keys.abs().transpose(1, 2))
    d = 2 * hd * 2.0**-23 * hd**-0.5 * float(dots.max())
    u = 2.0**-8
    return torch.matmul(probs, keys.abs()) * (u + math.expm1(2 * d) * (1 + u) + 4 * keys.shape[1] * 2.0**-24)


def test_bf16_bound_covers_rounding_the_probabilities(gen):
    """The bound's main term on CPU: an emulation of the kernel's bf16 PV product (each
    unnormalised probability rounded to bf16, everything else exact, float64) stays within
    it, on bf16-valued keys; and the bound is not vacuous (the emulation reaches a
    sizeable part of it somewhere)."""
    window, hd = 16, 64
    case = slab_case(gen, 6, 4, hd, window, 12, 20, torch.bfloat16, "cpu")
    case = tuple(x.float() if x is not None and x.is_floating_point() else x for x in case)
    q, ring, entries, pos, floor, topk, sink = case
    layout = KeyLayout.for_window(pos, floor, window, hd).with_topk(topk)
    keys = torch.cat([ring.double().gather(1, layout.window), entries.double().gather(1, layout.entries)], 1)
    logits = torch.matmul(q.double(), keys.transpose(1, 2)) * hd**-0.5 + layout.bias.double()[:, None, :]
    top = torch.maximum(logits.amax(-1), sink.double()[None, :])[..., None]
    p = torch.exp(logits - top)
    denom = p.sum(-1, keepdim=True) + torch.exp(sink.double()[None, :, None] - top)
    exact = torch.matmul(p, keys) / denom
    emulated = torch.matmul(p.to(torch.bfloat16).double(), keys) / denom
    ratio = float(((emulated - exact).abs() / bf16_bound(case, window)).max())
    assert 0.05 < ratio <= 1.0, f"emulated error / bound {ratio:.3g} (seed {gen.initial_seed()})"


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
@pytest.mark.parametrize("b", [1, 8, 64, 200])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("with_topk", [True, False])
def test_ring_attention_gpu(kernel_cls, gen, b, dtype, with_topk):
    cfg = V41Config.preset("mid")
    window, hd, k = cfg.sliding_window, cfg.head_dim, cfg.index_topk
    case = slab_case(gen, b, cfg.num_attention_heads, hd, window, k, 1024 // 2, dtype, "cuda",
                     with_topk=with_topk)
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        got, want = both(kernel_cls(), case, window, hd)  # the core computes in float32
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    diff = (got - want).abs().double()
    if dtype == torch.float32:  # the sharp check of which keys are read (IEEE dots)
        bound = torch.full_like(diff, 2e-5 * max(1.0, float(want.abs().max())))
    else:
        bound = bf16_bound(case, window)
    worst = float((diff / bound).max())
    print(f"b={b} {dtype} topk={with_topk}: max error {float(diff.max()):.3g}, worst error / bound {worst:.3g}")
    assert worst <= 1.0, f"error {worst:.3g}x its bound (seed {gen.initial_seed()})"


# ---------------------------------------------------------------------------- packed caches
def random_packed(gen, lead: tuple[int, ...], hd: int, fmt: str, device) -> PackedKV:
    """Every code at random (all e4m3 bytes but NaN; every e2m1 nibble pair), scales in
    a range that keeps the logits finite: what the kernel's bit decoding must get right,
    beyond the codes a quantiser happens to produce."""
    if fmt == "fp8":
        codes = torch.randint(0, 256, (*lead, hd), generator=gen, dtype=torch.uint8)
        codes = torch.where(codes & 0x7F == 0x7F, codes & 0xF0, codes)
        scales = torch.randint(118, 124, (*lead, hd // 32), generator=gen, dtype=torch.uint8)
    else:
        codes = torch.randint(0, 256, (*lead, hd // 2), generator=gen, dtype=torch.uint8)
        scales = torch.randint(0, 0x38, (*lead, hd // 16), generator=gen, dtype=torch.uint8)  # e4m3 below 1
    return PackedKV(codes.to(device), scales.to(device), fmt)


@pytest.mark.parametrize("group", [False, True])
@pytest.mark.parametrize("b,splits,with_topk", [(5, None, True), (4, 3, True), (3, 2, False)])
def test_packed_ring_attention_is_bitwise_the_unpacked(kernel_cls, gen, b, splits, with_topk, group):
    """In-kernel dequant vs the same kernel over the unpacked float32 caches: wrapped
    rings, rings not yet full, a floor inside the window, -1 ids, split or not; ``group``:
    the decode per scale group (``AttentionTile.group_decode``: scales broadcast, e4m3 by
    conversion, nibbles split from one byte load)."""
    from dataclasses import replace

    from runtime.kernels.attention_tiles import AttentionTile, tile_for

    window, hd = 32, 64
    q, _, _, pos, floor, topk, sink = slab_case(gen, b, 4, hd, window, 20, 30, torch.float32, SMALL,
                                                with_topk=with_topk)
    ring = random_packed(gen, (b, window), hd, "fp8", SMALL)
    entries = random_packed(gen, (b, 30), hd, "nvfp4", SMALL) if with_topk else None
    tile = AttentionTile(16, 16, splits=splits) if splits is not None else None
    if group:
        tile = replace(tile or tile_for(b, hd, packed=True), group_decode=True, decode_once=True)
    kernel = kernel_cls(tile=tile) if tile is not None else kernel_cls()
    got = kernel.ring(q, pos, floor, ring, entries, topk, sink)
    want = kernel.ring(q, pos, floor, ring.unpack(), None if entries is None else entries.unpack(), topk, sink)
    assert torch.isfinite(want).all()
    assert torch.equal(got.view(torch.int32), want.view(torch.int32)), \
        f"max |diff| {(got - want).abs().max():.3g} (seed {gen.initial_seed()})"
    # and the unpacked caches through the batched torch core (which keys are read)
    cached = (q, ring.unpack(), None if entries is None else entries.unpack(), pos, floor, topk, sink)
    _, core = both(kernel, cached, window, hd)
    assert rel_err(got, core) <= 2e-5


@pytest.mark.parametrize("window", [32, 24])
@pytest.mark.parametrize("group", [False, True])
@pytest.mark.parametrize("b,splits", [(5, 1), (4, 3)])
def test_packed_ring_split_sources(kernel_cls, gen, b, splits, group, window):
    """``AttentionTile.split_sources`` on packed caches (each tile decodes one format): at a
    window of whole 16-key tiles bit for bit the single loop's output (which decodes both
    formats per tile and selects), at one that is not within float32 rounding of the
    batched torch core over the unpacked caches."""
    from runtime.kernels.attention_tiles import AttentionTile

    hd = 64
    q, _, _, pos, floor, topk, sink = slab_case(gen, b, 4, hd, window, 20, 30, torch.float32, SMALL)
    ring = random_packed(gen, (b, window), hd, "fp8", SMALL)
    entries = random_packed(gen, (b, 30), hd, "nvfp4", SMALL)
    single, split = (kernel_cls(tile=AttentionTile(16, 16, splits=splits, group_decode=group, split_sources=on,
                                                   decode_once=group))
                     .ring(q, pos, floor, ring, entries, topk, sink) for on in (False, True))
    if window % 16 == 0:
        assert torch.equal(split.view(torch.int32), single.view(torch.int32)), \
            f"max |diff| {(split - single).abs().max():.3g} (seed {gen.initial_seed()})"
    cached = (q, ring.unpack(), entries.unpack(), pos, floor, topk, sink)
    _, core = both(kernel_cls(), cached, window, hd)
    assert rel_err(split, core) <= 2e-5


def test_decode_once_is_off_in_the_interpreter(kernel_cls, gen):
    """``AttentionTile.decode_once`` is inline PTX, which the interpreter cannot run: there the
    launch leaves it out, and the output is the same bit for bit."""
    from runtime.kernels.attention_tiles import AttentionTile

    q, _, _, pos, floor, topk, sink = slab_case(gen, 3, 4, 64, 32, 20, 30, torch.float32, SMALL)
    ring, entries = random_packed(gen, (3, 32), 64, "fp8", SMALL), random_packed(gen, (3, 30), 64, "nvfp4", SMALL)
    plain, once = (kernel_cls(tile=AttentionTile(16, 16, splits=2, decode_once=on)).ring(q, pos, floor, ring, entries,
                                                                                         topk, sink)
                   for on in (False, True))
    assert torch.equal(once.view(torch.int32), plain.view(torch.int32))


def test_packed_ring_attention_ignores_the_value_split(kernel_cls, gen):
    """Packed caches decode every column once: a tile's value split does not apply to them
    (the same program as without it, bit for bit), while the unpacked caches under that tile
    are split and still match the batched core."""
    from runtime.kernels.attention_tiles import AttentionTile

    window, hd = 32, 64
    q, _, _, pos, floor, topk, sink = slab_case(gen, 3, 4, hd, window, 20, 30, torch.float32, SMALL)
    ring, entries = random_packed(gen, (3, window), hd, "fp8", SMALL), random_packed(gen, (3, 30), hd, "nvfp4", SMALL)
    split = kernel_cls(tile=AttentionTile(16, 16, splits=2, value_d=16))
    whole = kernel_cls(tile=AttentionTile(16, 16, splits=2))
    got = split.ring(q, pos, floor, ring, entries, topk, sink)
    assert torch.equal(got.view(torch.int32), whole.ring(q, pos, floor, ring, entries, topk, sink).view(torch.int32))
    cached = (q, ring.unpack(), entries.unpack(), pos, floor, topk, sink)
    unpacked, core = both(split, cached, window, hd)
    assert rel_err(unpacked, core) <= 2e-5 and rel_err(got, core) <= 2e-5


def test_packed_ring_attention_refuses_mixed_layouts(kernel_cls, gen):
    q, ring, entries, pos, floor, topk, sink = slab_case(gen, 2, 4, 32, 8, 6, 10, torch.float32, SMALL)
    packed_ring = random_packed(gen, (2, 8), 32, "fp8", SMALL)
    with pytest.raises(ValueError, match="both be packed or neither"):
        kernel_cls().ring(q, pos, floor, packed_ring, entries, topk, sink)
    with pytest.raises(ValueError, match="packed ring must be fp8 and entries nvfp4"):
        kernel_cls().ring(q, pos, floor, random_packed(gen, (2, 8), 32, "nvfp4", SMALL),
                          random_packed(gen, (2, 10), 32, "nvfp4", SMALL), topk, sink)
    with pytest.raises(ValueError, match="packed caches are the static slab's"):
        kernel_cls()(q[0:1], pos[:1], floor[:1], packed_ring, 8, None, None, sink, NUM)


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
@pytest.mark.parametrize("b", [1, 64, 200])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_packed_ring_attention_gpu(kernel_cls, gen, b, dtype):
    """``mid`` shapes compiled: packed vs the unpacked caches in the query dtype (every
    packed value is exact in bf16), both under the packed caches' tiles. float32 (IEEE
    dots): bit for bit, the same FMA order
    over the same values. bf16: the decoded tile reaches the tensor cores from registers,
    the loaded one from memory, so the compiler may pick other MMA instructions and the
    float32 sums another order (measured on the H200: max |diff| 2.9e-6 at batch 1,
    2.9e-3 at batch 64). bf16 then gets the attention parity tolerance, 2e-2 of the output
    scale (tests/runtime/test_kernels_parity_attention.py). ``bf16_bound`` was tried first and gave NaN
    ratios on the H200: random codes of every value make logits so large that its expm1
    term overflows (inf times a zero term)."""
    cfg = V41Config.preset("mid")
    window, hd, k, n = cfg.sliding_window, cfg.head_dim, cfg.index_topk, 512
    q, _, _, pos, floor, topk, sink = slab_case(gen, b, cfg.num_attention_heads, hd, window, k, n, dtype, "cuda")
    ring = random_packed(gen, (b, window), hd, "fp8", "cuda")
    entries = random_packed(gen, (b, n), hd, "nvfp4", "cuda")
    from runtime.kernels.attention_tiles import PACKED_TILES, TILES

    got = kernel_cls().ring(q, pos, floor, ring, entries, topk, sink)  # packed caches take PACKED_TILES' row
    # the unpacked caches under the same tiles (TILES' row may split the keys elsewhere)
    same_tiles = kernel_cls(table={**TILES, **PACKED_TILES})
    want = same_tiles.ring(q, pos, floor, ring.unpack(dtype), entries.unpack(dtype), topk, sink)
    assert torch.equal(same_tiles.ring(q, pos, floor, ring, entries, topk, sink), got)
    assert bool(torch.isfinite(want).all()), f"unpacked output not finite (seed {gen.initial_seed()})"
    if dtype == torch.float32:
        assert torch.equal(got, want), f"max |diff| {(got - want).abs().max():.3g} (seed {gen.initial_seed()})"
    else:
        err = rel_err(got, want)
        assert err <= 2e-2, f"relative error {err:.3g} > 2e-2 (seed {gen.initial_seed()})"


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
@pytest.mark.parametrize("flags", ["group_decode,decode_once", "split_sources", "decode_once", "ids_ahead",
                                   "ids_ahead,group_decode,split_sources,decode_once"])
@pytest.mark.parametrize("scale", ["mid", "flash"])
@pytest.mark.parametrize("b", [1, 8, 64, 200])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_packed_ring_switch_gpu(kernel_cls, gen, scale, b, dtype, flags):
    """``AttentionTile.group_decode`` (the decode per scale group), ``split_sources`` (the
    window's and the top-k's slots in two loops, each tile decoding one format) and
    ``decode_once`` (the decoded tile computed once for both products), and ``ids_ahead`` (each
    tile's ids loaded an iteration ahead), alone and together (all four: the rows since
    session 32), compiled on the packed tiles' own rows (window 128: whole tiles): float32 (IEEE dots)
    bit for bit the row's own output without them; bf16 within the attention parity
    tolerance of it (the decoded tiles reach the tensor cores through other code, as in
    test_packed_ring_attention_gpu), and the unpacked caches' output within it too."""
    from dataclasses import replace

    from runtime.kernels.attention_tiles import tile_for

    cfg = V41Config.preset(scale)
    window, hd, k, n = cfg.sliding_window, cfg.head_dim, cfg.index_topk, 512
    q, _, _, pos, floor, topk, sink = slab_case(gen, b, cfg.num_attention_heads, hd, window, k, n, dtype, "cuda")
    ring = random_packed(gen, (b, window), hd, "fp8", "cuda")
    entries = random_packed(gen, (b, n), hd, "nvfp4", "cuda")
    tile = replace(tile_for(b, hd, packed=True, heads=cfg.num_attention_heads), ids_ahead=False,
                   group_decode=False, split_sources=False, decode_once=False)  # the row's tiling, every switch off
    plain = kernel_cls(tile=tile).ring(q, pos, floor, ring, entries, topk, sink)
    switched = kernel_cls(tile=replace(tile, **dict.fromkeys(flags.split(","), True))).ring(q, pos, floor, ring,
                                                                                         entries, topk, sink)
    unpacked = kernel_cls(tile=tile).ring(q, pos, floor, ring.unpack(dtype), entries.unpack(dtype), topk, sink)
    assert bool(torch.isfinite(switched).all()), f"not finite (seed {gen.initial_seed()})"
    if dtype == torch.float32:
        assert torch.equal(switched, plain), \
            f"max |diff| {(switched - plain).abs().max():.3g} (seed {gen.initial_seed()})"
    for other in (plain, unpacked):
        err = rel_err(switched, other)
        assert err <= (0.0 if dtype == torch.float32 and other is plain else 2e-2), \
            f"relative error {err:.3g} (seed {gen.initial_seed()})"
