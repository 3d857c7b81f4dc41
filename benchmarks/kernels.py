"""Per-op kernel benchmark: reference (plain PyTorch) vs fused (Triton), at ``mid`` and
``flash``-like decode/prefill shapes, on one GPU.

For every case: median reference time, median fused time (CUDA events, after warm-up),
speed-up, and the fused kernel's achieved fraction of the H200 roofline: the minimal
bytes the op must move / 4.3 TB/s (memory-bound ops) or FLOPs / 790 TFLOP/s (bf16 dense),
whichever bound is larger ("bound" column says which). Bytes count each input read once
and each output written once (shared weights counted once per call). The same fraction
against the run's own GPU, its copy bandwidth and matrix rate measured at the start
(benchmarks/ceilings.py), is a column beside it; the verdicts stay against the H200's.

    PYTHONPATH=. python benchmarks/kernels.py --out benchmarks/results

Writes kernels_<gpu>.json and kernels_<gpu>.md (GPU, driver, torch/triton, command).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from types import SimpleNamespace

import torch

from benchmarks import ceilings
from benchmarks.ceilings import H200_ISSUE, Ceilings
from benchmarks.cold import cold_graph_ms
from benchmarks.records import command_line, gpu_tag
from runtime.config import V41Config
from runtime.kernels import KernelRegistry
from runtime.kernels.reference import REFERENCE_OPS
from runtime.mhc import HcMix
from runtime.numerics import Numerics

HBM_BYTES_PER_S = H200_ISSUE.copy_bytes_per_s  # measured copy bandwidth of an H200 (issue 4)
BF16_FLOPS_PER_S = H200_ISSUE.bf16_flops_per_s
NUM = Numerics()
LARGE_OP_BYTES = 4 * 2**20  # issue 16: ops moving at least this much are held to the roofline
ROOFLINE_GOAL = 0.60
LAUNCH_GOAL = 2.0  # ops moving less: device time within this many empty launches


@dataclass
class Case:
    op: str
    scale: str
    shape: str
    bytes: float
    flops: float
    ref_ms: float = 0.0
    fused_ms: float = 0.0  # eager: includes Python + launch overhead
    fused_graph_ms: float | None = None  # per call inside a CUDA graph: device time
    fused_cold_ms: float | None = None  # the same with the inputs in HBM (benchmarks/cold.py)
    cold_copies: int = 0  # the input copies the cold reading cycled through
    paired_ms: float | None = None  # small ops: the graph time, replayed alternately with ...
    paired_empty_ms: float | None = None  # ... an empty launch's graph (medians of the rounds)

    @property
    def paired_ratio(self) -> float | None:
        """The op's device time in empty launches, both read in the same rounds (None
        where not read): a per-case ratio that does not move with the run's clock."""
        if self.paired_ms is None or self.paired_empty_ms is None:
            return None
        return self.paired_ms / self.paired_empty_ms

    @property
    def kernel_ms(self) -> float:
        return self.fused_graph_ms if self.fused_graph_ms is not None else self.fused_ms

    @property
    def roofline_ms(self) -> float:
        """The time the roofline is read against: the cold reading where there is one (a
        bandwidth roofline is HBM's: inputs replayed in L2 read faster than it)."""
        return self.fused_cold_ms if self.fused_cold_ms is not None else self.kernel_ms

    @property
    def holds_to_roofline(self) -> bool:
        """Issue 16 holds this case to the roofline (and it gets a cold reading)."""
        return self.bound == "memory" and self.bytes >= LARGE_OP_BYTES

    @property
    def speedup(self) -> float:
        return self.ref_ms / self.fused_ms

    @property
    def bound(self) -> str:
        return "memory" if H200_ISSUE.memory_bound(self.bytes, self.flops) else "compute"

    @property
    def roofline_fraction(self) -> float:
        """Of the issue's roofline (the H200's ceilings): what the verdict reads."""
        return self.fraction_of(H200_ISSUE)

    def fraction_of(self, ceiling: Ceilings) -> float:
        """Of a roofline with these ceilings (this run's own GPU's, measured), on the
        same reading as ``roofline_fraction``."""
        return ceiling.fraction(self.bytes, self.flops, self.roofline_ms * 1e-3)

    def goal(self, empty_launch_ms: float) -> tuple[str, bool | None]:
        """Issue 16's goal for this case and whether it is met: a memory-bound op moving
        >= LARGE_OP_BYTES (4 MiB) must reach 60 % of the roofline; one moving less is bounded by launch cost,
        so its device time must be within 2x an empty kernel's (replayed the same way in
        the same run). Compute-bound cases have no goal here (None). Without a graph time
        the eager time stands in, which only makes the verdict stricter. The roofline is
        read on the cold time where measured (``roofline_ms``)."""
        if self.bound != "memory":
            return "(compute-bound)", None
        if self.holds_to_roofline:
            return f">= {ROOFLINE_GOAL:.0%} roofline", self.roofline_fraction >= ROOFLINE_GOAL
        limit = LAUNCH_GOAL * empty_launch_ms
        return f"<= {limit * 1e3:.2f} us", self.kernel_ms <= limit


def median_ms(fn, warmup: int = 5, iters: int = 30) -> float:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def graph_ms(fn, reps: int = 20) -> float | None:
    """Per-call time of ``fn`` replayed from a CUDA graph of ``reps`` calls (no Python or
    launch overhead): what the kernels themselves take. None if ``fn`` cannot be captured."""
    return graph_calls_ms([fn] * reps)


def capture(fns: list):
    """One CUDA graph of the calls ``fns`` in order (each run once before the capture), or
    None (reported) if they cannot be captured."""
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for fn in dict.fromkeys(fns):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for fn in fns:
                fn()
        return graph
    except Exception as exc:  # noqa: BLE001 - report and carry on with eager numbers
        print(f"  (no CUDA graph: {type(exc).__name__}: {exc})", flush=True)
        return None


def graph_calls_ms(fns: list) -> float | None:
    """Per-call time of the calls ``fns`` replayed from one CUDA graph in order (each run
    once before the capture). None if they cannot be captured."""
    graph = capture(fns)
    return None if graph is None else median_ms(graph.replay, warmup=2, iters=10) / len(fns)


def alternate_medians(timers: dict, rounds: int) -> dict[str, float]:
    """Each timer (a callable returning one reading) called once per round, in turn, and
    the median of each one's readings: readings taken side by side, so a drift of the
    machine through the rounds (clocks, another process) reaches all of them alike."""
    readings: dict[str, list[float]] = {name: [] for name in timers}
    for _ in range(rounds):
        for name, timer in timers.items():
            readings[name].append(timer())
    return {name: statistics.median(values) for name, values in readings.items()}


def interleaved_graph_ms(fns: list, reps: int = 20, rounds: int = 9, most: int = 16) -> list[float | None]:
    """Per-call device time of each of ``fns``, each replayed from its own CUDA graph of
    ``reps`` calls, the graphs replayed in turn for ``rounds`` rounds (``alternate_medians``
    of 3-replay medians); None for a call that cannot be captured.

    Why: variants read one after another each meet the machine as it is at their turn
    (the empty launch read alone through one run moved 0.69-0.93 us,
    kernels_h200_session20_runs.md), so the ranking of two variants a few percent apart
    can be the drift's. Read in turn, a drift reaches every variant alike.

    At most ``most`` graphs are alive at once: each keeps one call's outputs (an attention
    candidate's float32 partials at 512 queries and 16 splits are about 1 GB), so a long
    sweep is read in groups, each group's graphs freed before the next is captured. The
    first of ``fns`` (attention_tiles' table row, tile_sweep's mHC default, gate_tiles'
    first variant) is replayed in every group, so each variant is read in turn beside it;
    its time is its first group's."""
    return interleaved_lists_ms([[fn] * reps for fn in fns], rounds, most)


def interleaved_lists_ms(call_lists: list[list], rounds: int = 9, most: int = 16) -> list[float | None]:
    """Per-call device time of each list of calls in ``call_lists``, each list captured as one
    CUDA graph and the graphs replayed in turn as ``interleaved_graph_ms`` says (its groups
    of at most ``most``, the first list in every group); None for a list that cannot be
    captured. A list may hold different calls: a cold reading's calls cycle through copies
    of their inputs (benchmarks/cold.py)."""
    out: list[float | None] = [None] * len(call_lists)
    others = list(range(1, len(call_lists)))
    step = max(1, most - 1)
    for start in range(0, max(1, len(others)), step):
        group = ([0] if call_lists else []) + others[start:start + step]
        graphs = {i: capture(call_lists[i]) for i in group}
        timers = {i: (lambda g=g, n=len(call_lists[i]): median_ms(g.replay, warmup=1, iters=3) / n)
                  for i, g in graphs.items() if g is not None}
        medians = alternate_medians(timers, rounds) if timers else {}
        for i in group:
            if i or not start:
                out[i] = medians.get(i)
        del graphs, timers  # this group's graph pools go back before the next group's capture
    return out


def kernel_breakdown(fn, calls: int = 20) -> dict[str, float]:
    """Mean device microseconds per call of each CUDA kernel ``fn`` launches (torch.profiler),
    one entry per launch of a call in launch order ("name #2": a call's second launch),
    so two launches of one kernel (mHC's sweep and finish, the gate's partials and
    selection) are told apart. If the kernels do not divide evenly into calls, by name."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    kernels = sorted((e for e in prof.events() if e.device_type == DeviceType.CUDA and e.time_range.elapsed_us() > 0),
                     key=lambda e: e.time_range.start)
    if not kernels or len(kernels) % calls:
        return {e.key[:60]: e.device_time_total / calls for e in prof.key_averages() if e.device_time_total > 0}
    per_call = len(kernels) // calls
    out: dict[str, float] = {}
    for i, e in enumerate(kernels):
        label = f"{e.name.split('(')[0][:60]} #{i % per_call + 1}"
        out[label] = out.get(label, 0.0) + e.time_range.elapsed_us() / calls
    return out


def _empty_kernel(x_ptr):
    pass


def empty_launch():
    """One launch of a Triton kernel that does nothing: the floor any single-kernel op sits on."""
    from runtime.kernels.backend import jit

    kernel = jit(_empty_kernel)
    x = torch.empty(1, device="cuda")
    return lambda: kernel[(1,)](x)


def empty_launch_ms() -> float:
    """Per-call device time of the empty launch, replayed from a CUDA graph exactly like
    the fused ops."""
    ms = graph_ms(empty_launch())
    if ms is None:
        raise RuntimeError("benchmarks/kernels.py: an empty Triton kernel could not be captured in a CUDA graph")
    return ms


def paired_with_empty_ms(fn, reps: int = 20, rounds: int = 9) -> tuple[float | None, float | None]:
    """(fn's, the empty launch's) per-call time, each replayed from its own graph of
    ``reps`` calls, the two graphs replayed alternately for ``rounds`` rounds (medians).

    Why: the empty launch read alone at several points of one run moved 0.69-0.93 us
    while the small ops moved 0.11 us at the median case (kernels_h200_session20_runs.md),
    so the table's verdict against the run's smallest reading moved with it. Read beside
    each op, the ratio is the op's own. (None, None) if either cannot be captured."""
    op_ms, empty_ms = interleaved_graph_ms([fn, empty_launch()], reps, rounds)
    if op_ms is None or empty_ms is None:
        return None, None
    return op_ms, empty_ms


def r(*shape, dtype=torch.bfloat16, scale=1.0):
    return (torch.randn(*shape, device="cuda") * scale).to(dtype)


def gate_case(ops, c: V41Config, name: str, t: int):
    d, e = c.hidden_size, c.n_routed_experts
    x, w, b = r(t, d), r(e, d, scale=d**-0.5), r(e, dtype=torch.float32, scale=0.1)
    args = (x, w, b, c, NUM)
    bytes_ = 2 * (t * d + e * d) + 4 * e + 12 * t * c.num_experts_per_tok
    return Case("gate", name, f"T={t} D={d} E={e} k={c.num_experts_per_tok}", bytes_, 2 * t * d * e), args


def mhc_case(ops, c: V41Config, name: str, t: int):
    d = c.hidden_size
    streams, out = r(t, 4, d), r(t, d)
    prev = HcMix(torch.rand(t, 4, device="cuda"), torch.rand(t, 4, device="cuda") * 2,
                 torch.softmax(torch.randn(t, 4, 4, device="cuda"), -1))
    args = (streams, out, prev, torch.rand(t, 4, device="cuda"), r(24, 4 * d, dtype=torch.float32, scale=0.01),
            r(24, dtype=torch.float32), torch.ones(3, device="cuda"), r(d), c, NUM)
    bytes_ = 2 * (t * 4 * d * 2 + t * d * 2) + 4 * 24 * 4 * d + 2 * d + 4 * t * 24
    flops = t * (2 * 24 * 4 * d + 12 * 4 * d)
    return Case("mhc", name, f"T={t} D={d} hc=4 (post+pre+norm)", bytes_, flops), args


def indexer_case(ops, c: V41Config, name: str, t: int, n: int):
    ni, di = c.index_n_heads, c.index_head_dim
    q, hw, keys = r(t, ni, di), r(t, ni, dtype=torch.float32), r(n, di)
    counts = torch.full((t,), n, dtype=torch.int64, device="cuda")
    bytes_ = 2 * (t * ni * di + n * di) + 4 * t * n
    return Case("indexer", name, f"T={t} N={n} nI={ni} dI={di}", bytes_, 2 * t * ni * n * di), (q, hw, keys, counts, NUM)


def indexer_topk_case(ops, c: V41Config, name: str, t: int, n: int, topk=None):
    """The registry's indexer then the registry's top-k, or ``topk`` (against the reference
    pair); the shape names the top-k's split (runtime/kernels/topk_tiles.py) so a reading is
    tied to it."""
    case, args = indexer_case(ops, c, name, t, n)
    case.op = "indexer+topk"
    case.bytes += 4 * t * n + 8 * t * c.index_topk
    policy = getattr(topk or ops.topk, "policy", None)  # the fused top-k's; the reference has none
    if policy is not None:
        split = policy.split(t, n, c.index_topk)
        case.shape += f" k={c.index_topk} " + ("one pass" if split.chunk == 0 else f"{split.chunks}x{split.chunk}")
        case.shape += (" resident" if split.resident else "") + (" 1 launch" if split.one_launch else "")
        case.shape += " row bound" if split.row_bound is not None else ""
        case.shape += " pdl" if split.chunk and policy.dependent_select else ""
    return case, args


def attention_bytes(t: int, heads: int, head_dim: int, window: int, topk: int, packed: bool = False) -> float:
    """What T queries' sparse attention moves: each query's keys read once (bf16; packed: an
    e4m3 byte + a ue8m0 byte per 32 for the window, two e2m1 a byte + an e4m3 byte per 16
    for the entries), q read (bf16), the output written (float32), the top-k ids (int64).
    The count for both this table and benchmarks/attention_tiles.py."""
    if packed:
        keys = window * (head_dim + head_dim // 32) + topk * (head_dim // 2 + head_dim // 16)
    else:
        keys = (window + topk) * head_dim * 2
    return t * (keys + heads * head_dim * 2 + heads * head_dim * 4 + 8 * topk)


def attention_flops(t: int, heads: int, head_dim: int, window: int, topk: int) -> float:
    """The two products of T queries over their window + top-k keys (scores and the
    value sum, 2 FLOPs per multiply-add each), for both attention case builders."""
    return 4 * t * heads * (window + topk) * head_dim


def attention_case(ops, c: V41Config, name: str, t: int):
    """T queries of one request (the engine's layout): every query reads the same window and
    compressed caches. The bytes count each query's 640 keys as gathered, as T requests with
    caches of their own would have to read them (the ring rows below: a decode batch); here
    the queries share the caches, so many gathered rows are L2 hits (under ncu on an H100,
    flash with 512 queries moved 124 MB of DRAM where this counts 438 MB:
    benchmarks/results/ncu_h100_attention_flash.md)."""
    h, hd, w, k = c.num_attention_heads, c.head_dim, c.sliding_window, c.index_topk
    ctx = 8192
    q = r(t, h, hd)
    positions = torch.randint(w, ctx, (t,), device="cuda")
    floor = torch.zeros(t, dtype=torch.int64, device="cuda")
    swa, comp = r(ctx, hd), r(ctx // 2, hd)
    topk = torch.randint(0, ctx // 2, (t, k), device="cuda").sort(1).values
    sink = r(h, dtype=torch.float32)
    args = (q, positions, floor, swa, w, comp, topk, sink, NUM)
    return Case("attention", name, f"T={t} H={h} hd={hd} W={w} topk={k}", attention_bytes(t, h, hd, w, k),
                attention_flops(t, h, hd, w, k)), args


TABLE_OPS = ("gate", "mhc", "inv_rope", "attention", "attention_ring", "attention_packed", "indexer", "compress",
             "rope_quant", "engram", "indexer+topk")  # what --ops may name, in the table's order
RING_OPS = ("attention_ring", "attention_packed")  # the static decode step's attention (ring caches)
RING_CONTEXT = 8192  # the ring rows' slots: positions just below it, RING_CONTEXT / 2 global entries each


def attention_ring_case(ops, c: V41Config, name: str, t: int, packed: bool = False, device: str = "cuda",
                        dtype: torch.dtype = torch.bfloat16):
    """A decode batch: T requests, each with its own window ring and global KV (the static
    decode step's slab, read by ``FusedSparseAttention.ring``), so no key row is shared
    between queries and each gathered row is a read from HBM, as the bytes count it (the
    engine rows above share one request's caches). ``packed``: the ring in fp8 and the
    entries in NVFP4 (``runtime.kv_packing``), decoded in the kernel; the reference unpacks
    them, then runs the batched torch core (``decode_attention``). ``device`` / ``dtype``:
    the GPU's bf16 here; the CPU test builds float32 rows for the interpreter."""
    from runtime.kv_packing import pack
    from runtime.static.attention import KeyLayout

    def rand(*shape, dtype=dtype):
        return torch.randn(*shape, device=device).to(dtype)

    h, hd, w, k = c.num_attention_heads, c.head_dim, c.sliding_window, c.index_topk
    n = RING_CONTEXT // 2
    q = rand(t, h, hd)
    positions = torch.randint(RING_CONTEXT - 64, RING_CONTEXT, (t,), device=device)
    floor = torch.zeros(t, dtype=torch.int64, device=device)
    ring, entries = rand(t, w, hd), rand(t, n, hd)
    keys = (pack(ring, "fp8"), pack(entries, "nvfp4")) if packed else (ring, entries)
    topk = torch.randint(0, n, (t, k), device=device).sort(1).values
    layout = KeyLayout.for_window(positions, floor, w, hd).with_topk(topk)  # the reference's, built once per step
    args = (q, positions, floor, *keys, topk, rand(h, dtype=torch.float32), layout)
    op = "attention_packed" if packed else "attention_ring"
    storage = "fp8 ring nvfp4 entries" if packed else "bf16"
    return Case(op, name, f"B={t} H={h} hd={hd} W={w} topk={k} {storage}", attention_bytes(t, h, hd, w, k, packed),
                attention_flops(t, h, hd, w, k)), args


def ring_reference(q, positions, floor, ring, entries, topk, sink, layout):
    """The ring cases' reference: the static step's batched torch core on the values (packed
    caches unpacked first, as a torch step reading packed storage must)."""
    from runtime.kv_packing import PackedKV
    from runtime.static.attention import decode_attention

    if isinstance(ring, PackedKV):
        ring, entries = ring.unpack(q.dtype), entries.unpack(q.dtype)
    return decode_attention(q, ring, entries, layout, sink, NUM)


def inv_rope_case(ops, c: V41Config, name: str, t: int):
    h, hd, half = c.num_attention_heads, c.head_dim, c.qk_rope_head_dim // 2
    out = r(t, h, hd, dtype=torch.float32)
    ang = torch.randn(t, half, device="cuda")
    args = (out, ang.cos(), ang.sin(), torch.bfloat16)
    return Case("inv_rope", name, f"R={t} H={h} hd={hd}", t * h * hd * 6 + 8 * t * half, 0.0), args


def compress_case(ops, c: V41Config, name: str, rows: int):
    """Compressor pooling of ``rows`` fresh rows (rows / 2 groups at ratio 2) + RMSNorm."""
    ratio, hd = 2, c.head_dim
    kv, gate = r(rows, hd, dtype=torch.float32), r(rows, hd, dtype=torch.float32)
    args = (kv, gate, ratio, r(hd), c.rms_norm_eps, torch.bfloat16)
    bytes_ = 2 * 4 * rows * hd + 2 * hd + 2 * (rows // ratio) * hd
    return Case("compress", name, f"R={rows} G={rows // ratio} C={hd} ratio={ratio}", bytes_, 0.0), args


ROPE_QUANT_USES = {  # use -> (fmt, vector shape after the row dimension)
    "window KV fp8": ("fp8", lambda c: (c.head_dim,)),
    "entries nvfp4": ("nvfp4", lambda c: (c.head_dim,)),
    "index q mxfp4": ("mxfp4", lambda c: (c.index_n_heads, c.index_head_dim)),
}


def rope_quant_case(ops, c: V41Config, name: str, rows: int, use: str):
    fmt, tail = ROPE_QUANT_USES[use]
    shape = (rows, *tail(c))
    half = c.qk_rope_head_dim // 2
    ang = torch.randn(rows, half, device="cuda")
    x = r(*shape)
    args = (x, ang.cos(), ang.sin(), fmt)
    bytes_ = 2 * 2 * x.numel() + 8 * rows * half
    return Case("rope_quant", name, f"{use} x={list(shape)}", bytes_, 0.0), args


ENGRAM_BENCH_ROWS = 4_000_000  # flash's real tables (3.8e8 rows, 197 GB in bf16) do not fit on one GPU


def engram_case(ops, c: V41Config, name: str, t: int):
    """One engram layer: gather the hashed rows of each token -> wkv GEMM -> gate-and-add into
    the hc streams. Minimal bytes: the looked-up table rows, the ids, wkv and the q/k weights
    once, the streams read and written; the gathered [T, cols*hd] matrix and kv are
    intermediates (not counted, so the fused fraction is a lower bound). wkv dominates."""
    hc, d, hd = c.hc_mult, c.hidden_size, c.engram_head_dim
    cols = (c.engram_max_ngram_size - 1) * c.engram_n_heads
    rows = min(c.engram_num_embeddings[0], ENGRAM_BENCH_ROWS)
    w = SimpleNamespace(
        embed=SimpleNamespace(weight=r(rows, hd)),
        wkv=SimpleNamespace(weight=r((hc + 1) * d, cols * hd, scale=(cols * hd) ** -0.5)),
        q_weight=r(hc, d), k_weight=r(hc, d),
    )
    streams = r(t, hc, d)
    ids = torch.randint(0, rows, (t, cols), device="cuda")
    bytes_ = 2 * (t * cols * hd + (hc + 1) * d * cols * hd + 2 * hc * d + 2 * t * hc * d) + 8 * t * cols
    flops = 2 * t * cols * hd * (hc + 1) * d + 8 * t * hc * d
    shape = f"T={t} D={d} hc={hc} cols={cols}x{hd} rows={rows}"
    return Case("engram", name, shape, bytes_, flops), (streams, ids, w, c, NUM)


def fused_call(ops, op: str, topk=None, k: int = 0):
    """The fused op as a function of its argument tuple; "indexer+topk": the indexer, then
    ``topk`` keeping ``k``."""
    if op == "indexer+topk":
        return lambda args: topk(ops.indexer(*args), k)
    if op in RING_OPS:  # (q, positions, floor, ring, entries, topk, sink); the layout is the reference's
        return lambda args: ops.attention.ring(*args[:7])
    return lambda args: getattr(ops, op)(*args)


def run(ops, only: tuple[str, ...] = (), topk_resident: bool = False, topk_chained: bool = False) -> list[Case]:
    """Measure every case (or only those of the ops in ``only``); ``topk_resident``: the
    indexer + top-k cases twice more with the register-resident top-k (the chained
    policy's ``resident=True`` twin, scale "flash 128k resident", and its splits in one
    launch, "flash 128k resident 1 launch"); ``topk_chained``: once more with the chained
    split the registry's row-bound top-k replaced (``topk_tiles.CHAINED``, "flash 128k
    chained")."""
    mid, flash = V41Config.preset("mid"), V41Config.preset("flash")
    cases = []
    for name, c in (("mid", mid), ("flash", flash)):
        for t in (1, 8, 64, 512, 4096):  # decode batches, then prefill chunks
            cases.append(("gate", *gate_case(ops, c, name, t)))
            cases.append(("mhc", *mhc_case(ops, c, name, t)))
            cases.append(("inv_rope", *inv_rope_case(ops, c, name, t)))
        for t in (1, 8, 64, 512):
            cases.append(("attention", *attention_case(ops, c, name, t)))
        for packed in (False, True):  # decode batches of T requests, the static step's layout
            for t in (1, 8, 64):
                case, args = attention_ring_case(ops, c, name, t, packed)
                cases.append((case.op, case, args))
        for t, n in ((1, 8192), (8, 8192), (1, 65536), (1, 131072), (8, 131072)):
            cases.append(("indexer", *indexer_case(ops, c, name, t, n)))
        for rows in (2, 64, 4096):
            cases.append(("compress", *compress_case(ops, c, name, rows)))
        for rows in (1, 8, 64, 4096):
            for use in ROPE_QUANT_USES:
                cases.append(("rope_quant", *rope_quant_case(ops, c, name, rows, use)))
        for t in (1, 8, 64, 4096):
            cases.append(("engram", *engram_case(ops, c, name, t)))
    topks = {"flash 128k": ops.topk}
    if topk_resident or topk_chained:
        from runtime.kernels.topk import FusedTopk
        from runtime.kernels.topk_tiles import CHAINED
    if topk_resident:
        topks["flash 128k resident"] = FusedTopk(policy=replace(CHAINED, resident=True))
        topks["flash 128k resident 1 launch"] = FusedTopk(policy=replace(CHAINED, resident=True,
                                                                         resident_one_launch=True))
    if topk_chained:
        topks["flash 128k chained"] = FusedTopk(policy=CHAINED)
    for t, n in ((1, 131072), (2, 131072), (8, 131072), (1, 65536)):
        for scale, topk in topks.items():  # interleaved: a shape's top-k's back to back
            cases.append(("indexer+topk", *indexer_topk_case(ops, flash, scale, t, n, topk)))
    if only:
        cases = [entry for entry in cases if entry[0] in only]
    done = []
    # The floor is measured before every change of op and once after the last case: one reading
    # moved from 0.68 to 0.84 us between two runs (kernels_h200.md), which alone moved
    # cases across the 2x line. Ops are held to the smallest reading (the strictest).
    empty_samples = []
    for op, case, args in cases:
        if not done or done[-1].op != op:
            empty_samples.append(empty_launch_ms())
            print(f"empty Triton kernel, graph replay: {empty_samples[-1] * 1e3:.2f} us per launch", flush=True)
        empty_ms = min(empty_samples)
        if op == "indexer+topk":
            k = flash.index_topk
            ref = REFERENCE_OPS["indexer"], REFERENCE_OPS["topk"]
            case.ref_ms = median_ms(lambda ref=ref, a=args, k=k: ref[1](ref[0](*a), k), iters=10)
        else:
            reference = ring_reference if op in RING_OPS else REFERENCE_OPS[op]
            case.ref_ms = median_ms(lambda reference=reference, a=args: reference(*a), iters=15)
        fused = fused_call(ops, op, topks.get(case.scale), flash.index_topk)
        case.fused_ms = median_ms(lambda fused=fused, a=args: fused(a))
        case.fused_graph_ms = graph_ms(lambda fused=fused, a=args: fused(a))
        if case.holds_to_roofline:
            case.fused_cold_ms, case.cold_copies = cold_graph_ms(fused, args, case.bytes, graph_calls_ms,
                                                                 case.fused_graph_ms)
        elif case.bound == "memory":
            case.paired_ms, case.paired_empty_ms = paired_with_empty_ms(lambda fused=fused, a=args: fused(a))
        done.append(case)
        graph = f"{case.fused_graph_ms:7.4f}" if case.fused_graph_ms is not None else "    n/a"
        cold = f"{case.fused_cold_ms:7.4f}" if case.fused_cold_ms is not None else "    n/a"
        paired = f"{case.paired_ratio:5.2f}" if case.paired_ratio is not None else "  n/a"
        goal, met = case.goal(empty_ms)
        print(f"{case.op:13s} {case.scale:10s} {case.shape:40s} ref {case.ref_ms:8.3f} ms  fused "
              f"{case.fused_ms:7.3f} ms (graph {graph}, cold {cold}, x empty paired {paired})  x{case.speedup:6.1f}  roofline "
              f"{case.roofline_fraction:5.1%} ({case.bound})  goal {goal}: {verdict(met)}", flush=True)
    empty_samples.append(empty_launch_ms())
    return done, empty_samples


def floor_line(empty_samples: list[float]) -> str:
    """The Markdown line on the empty-launch floor: its readings and the goal they set."""
    low, mid, high = min(empty_samples), statistics.median(empty_samples), max(empty_samples)
    return (f"- Empty Triton kernel, replayed the same way, measured {len(empty_samples)} times through the run "
            f"(before every change of op and at the end): {low * 1e3:.2f} us smallest, {mid * 1e3:.2f} median, "
            f"{high * 1e3:.2f} largest. Goal (issue 16): a memory-bound op moving >= "
            f"{LARGE_OP_BYTES / 2**20:.0f} MiB reaches >= {ROOFLINE_GOAL:.0%} of the roofline; one moving "
            f"less takes <= {LAUNCH_GOAL:.0f}x the smallest empty launch ({LAUNCH_GOAL * low * 1e3:.2f} us).")


def verdict(met: bool | None) -> str:
    return "-" if met is None else ("met" if met else "NOT met")


def environment() -> dict:
    import triton

    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
    return {"gpu": torch.cuda.get_device_name(0), "nvidia_smi": smi, "torch": torch.__version__,
            "triton": triton.__version__, "cuda": torch.version.cuda, "python": platform.python_version()}


def own_roofline_lines(cases: list[Case], own: Ceilings) -> list[str]:
    """The header line on this run's measured ceilings, and the summary line: the cases
    held to the roofline that reach the goal's fraction of this GPU's own."""
    held = [c for c in cases if c.holds_to_roofline]
    reach = sum(c.fraction_of(own) >= ROOFLINE_GOAL for c in held)
    return [f"- This GPU's ceilings, measured at the start of the run (benchmarks/ceilings.py): a 1 GiB "
            f"device-to-device copy {own.copy_bytes_per_s / 1e12:.2f} TB/s (read + written), an 8192^3 bf16 "
            f"matrix product {own.bf16_flops_per_s / 1e12:.0f} TFLOP/s. \"own roofline\": the roofline "
            f"column's reading against them; the goal and verdict columns stay against the H200's "
            f"{H200_ISSUE.copy_bytes_per_s / 1e12:.1f} TB/s and {H200_ISSUE.bf16_flops_per_s / 1e12:.0f} TFLOP/s.",
            f"Against this GPU's own measured ceilings, {reach} of {len(held)} cases held to the roofline reach "
            f"{ROOFLINE_GOAL:.0%} of it."]


def markdown(env: dict, cases: list[Case], command: str, empty_samples: list[float],
             own: Ceilings | None = None) -> str:
    """The table; ``own``: this run's measured ceilings (an "own roofline" column and a
    line each in the header and the summary), None where not measured."""
    empty_ms = min(empty_samples)
    own_lines = own_roofline_lines(cases, own) if own is not None else []
    own_head, own_rule = (" own roofline |", "---:|") if own is not None else ("", "")
    lines = [
        "# Kernel benchmark: reference vs fused (Triton)", "",
        f"- GPU: {env['gpu']} ({env['nvidia_smi']}); torch {env['torch']}, triton {env['triton']}, CUDA {env['cuda']}",
        f"- Command: `{command}`",
        "- Medians of 30 (fused) / 10-15 (reference) CUDA-event timings after warm-up, both eager "
        "(Python + launches included; speed-up = reference eager / fused eager). \"fused graph\" = per-call "
        "time replaying 20 calls from one CUDA graph on the same inputs (device time; inputs under the L2's "
        "size read partly from L2); \"cold graph\" = the same with the calls cycling through copies of the "
        "inputs (how many: \"copies\") so that none is in L2 when read (benchmarks/cold.py), measured where the "
        "roofline goal applies (memory-bound, >= 4 MiB); roofline = max(bytes / 4.3 TB/s, FLOPs / 790 TFLOP/s) / "
        "cold graph time, else fused graph time (eager time where capture failed).",
        floor_line(empty_samples), *own_lines[:1], "",
        "- \"x empty, paired\" (memory-bound ops under 4 MiB): the op's graph time in empty launches, the two "
        "graphs replayed alternately in the same rounds (medians of 9): the ratio the clock does not move. The "
        "verdict stays against the run's smallest reading (the strictest).",
        "- attention: T queries of one request, sharing its caches (many gathered rows are L2 hits); "
        "attention_ring / attention_packed: a decode batch, B requests with a window ring and 4,096 global "
        "entries each (bf16, or an fp8 ring and NVFP4 entries decoded in the kernel; the reference unpacks, "
        "then runs the static step's batched torch core). The bytes count each query's keys in both.", "",
        "| op | scale | shape | MB moved | reference ms | fused ms | fused graph ms | cold graph ms | copies "
        f"| x empty, paired | speed-up | roofline |{own_head} bound | goal | met |",
        f"|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|{own_rule}---|---|---|",
    ]
    for c in cases:
        graph = f"{c.fused_graph_ms:.5f}" if c.fused_graph_ms is not None else "n/a"
        cold = f"{c.fused_cold_ms:.5f}" if c.fused_cold_ms is not None else ("n/a" if c.holds_to_roofline else "-")
        copies = str(c.cold_copies) if c.cold_copies else "-"
        paired = f"{c.paired_ratio:.2f}x" if c.paired_ratio is not None else "-"
        goal, met = c.goal(empty_ms)
        own_cell = f" {c.fraction_of(own):.0%} |" if own is not None else ""
        lines.append(f"| {c.op} | {c.scale} | {c.shape} | {c.bytes / 1e6:.2f} | {c.ref_ms:.3f} | {c.fused_ms:.3f} | "
                     f"{graph} | {cold} | {copies} | {paired} | {c.speedup:.1f}x | {c.roofline_fraction:.0%} |"
                     f"{own_cell} {c.bound} | {goal} | {verdict(met)} |")
    met = [m for m in (c.goal(empty_ms)[1] for c in cases) if m is not None]
    lines += ["", f"Goal met on {sum(met)} of {len(met)} memory-bound cases.", *own_lines[1:]]
    ratios = [c.paired_ratio for c in cases if c.paired_ratio is not None]
    if ratios:
        lines.append(f"Read beside an empty launch (paired), {sum(x <= LAUNCH_GOAL for x in ratios)} of {len(ratios)} "
                     f"ops under {LARGE_OP_BYTES / 2**20:.0f} MiB are within {LAUNCH_GOAL:.0f}x of it.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    parser.add_argument("--ops", default="", help="comma-separated ops to measure (default: all), "
                        "e.g. compress,rope_quant,engram; the result files get a suffix")
    parser.add_argument("--topk-resident", action="store_true",
                        help="also run indexer + top-k with the register-resident top-k, in two launches and in one "
                             "(scales 'flash 128k resident', 'flash 128k resident 1 launch')")
    parser.add_argument("--topk-chained", action="store_true",
                        help="also run indexer + top-k with the chained split top-k that the row-bound one replaced "
                             "(scale 'flash 128k chained')")
    args = parser.parse_args(argv)
    only = tuple(op.strip() for op in args.ops.split(",") if op.strip())
    unknown = [op for op in only if op not in TABLE_OPS]
    if unknown:
        print(f"benchmarks/kernels.py: --ops: unknown {', '.join(unknown)}; expected some of {', '.join(TABLE_OPS)}",
              file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("benchmarks/kernels.py: needs a CUDA GPU", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    own = ceilings.measure(median_ms)
    ops = KernelRegistry("fused", device="cuda", on_unavailable="error")
    cases, empty_samples = run(ops, only, args.topk_resident, args.topk_chained)
    empty_ms = min(empty_samples)
    env = environment()
    tag = gpu_tag(env["gpu"]) + ("_" + "_".join(only) if only else "")
    args.out.mkdir(parents=True, exist_ok=True)
    command = command_line("benchmarks/kernels.py", argv or sys.argv[1:])
    doc = {"environment": env, "command": command, "hbm_bytes_per_s": HBM_BYTES_PER_S,
           "bf16_flops_per_s": BF16_FLOPS_PER_S, "measured_ceilings": asdict(own), "empty_launch_ms": empty_ms, "empty_launch_samples_ms": empty_samples,
           "cases": [{**asdict(c), "speedup": c.speedup, "roofline_fraction": c.roofline_fraction,
                      "own_roofline_fraction": c.fraction_of(own),
                      "bound": c.bound, "kernel_ms": c.kernel_ms, "paired_ratio": c.paired_ratio,
                      "goal": c.goal(empty_ms)[0],
                      "goal_met": c.goal(empty_ms)[1]} for c in cases]}
    (args.out / f"kernels_{tag}.json").write_text(json.dumps(doc, indent=2) + "\n")
    note = markdown(env, cases, command, empty_samples, own)
    (args.out / f"kernels_{tag}.md").write_text(note)
    print(note)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
