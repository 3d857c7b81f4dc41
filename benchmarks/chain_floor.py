"""What one dependent step costs inside a kernel replayed from a CUDA graph: the floor
under issue 16's goal for ops moving less than 4 MiB (device time <= 2x an empty launch).

Why. benchmarks/kernels.py holds the small decode-shape ops (gate, mHC, attention,
compress, indexer) to twice an empty Triton launch replayed the same way (0.88-1.0 us on
the H200, so about one empty launch of time for the op's own work). What such an op does
in that time is a chain of dependent steps: loads whose address or mask needs an earlier
load (counts, top-k ids, a row's position), block-wide reductions and scans (each a trip
through shared memory and a barrier across warps), warp-level ones (shuffles). How many of
each fit in the budget decides which of those ops can meet the goal at all and what a
re-tiling has to remove; this benchmark measures it, on the GPU the table runs on.

Each kind is a kernel doing nothing but ``n`` such steps (n in STEPS), timed like the
table's fused ops (``benchmarks.kernels.graph_ms``: 20 calls in one graph, median of 10
replays), all kinds and counts interleaved and repeated ``--rounds`` times (median);
``time = intercept + n x step`` is fitted by least squares (scipy's ``linregress``):

- "load L2": a pointer chase (each load's address is the previous load's value) through
  a cycle of 4,096 lines (one int32 per 128-byte line, 512 KB), loaded ``.cg`` (from L2,
  never L1): the table's small ops replay on the same tensors, so their inputs sit in L2;
- "load HBM": the same chase through 2^23 lines (1 GiB), each call continuing where the
  last stopped (the cursor lives in memory), so no line is visited twice in a run: a cold
  read, as a real decode step's weights are (random lines: TLB misses included);
- "sum 4 warps": ``x = x / 2 + sum(x) / 1024`` over 1,024 floats on 4 warps (shuffles,
  shared memory, a barrier);
- "scan 4 warps": ``x = cumsum(x) / 1024`` over the same;
- "sum 1 warp": the sum over 256 floats on one warp (shuffles only);
- "atomic acq_rel": an acquire-release atomic add on one counter whose address depends on
  the previous add's value: the ticket a one-launch op (runtime/kernels/tickets.py) puts on
  its last program's path.

    PYTHONPATH=. python benchmarks/chain_floor.py --out benchmarks/results

Writes chain_floor_<gpu>.json and .md: the medians, the fits, and how many steps of each
kind fit in the goal's budget (2 x the smallest empty launch, less the 0-step kernel).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import torch
import triton.language as tl

from benchmarks.kernels import LAUNCH_GOAL
from benchmarks.records import command_line, gpu_tag, write

STEPS = (0, 1, 2, 4, 8, 16, 32)
LINE_INTS = 32  # int32 per 128-byte line: one chase entry per line
L2_LINES = 4096
HBM_LINES = 1 << 23


def _chase_kernel(next_ptr, cursor_ptr, STEPS: tl.constexpr, LINE: tl.constexpr):
    """``STEPS`` dependent loads: line ``at`` holds the next line; the cursor keeps where
    the chase stopped (the next call goes on from there)."""
    at = tl.load(cursor_ptr)
    for _ in tl.static_range(STEPS):
        at = tl.load(next_ptr + at.to(tl.int64) * LINE, cache_modifier=".cg")
    tl.store(cursor_ptr, at)


def _reduce_kernel(x_ptr, out_ptr, STEPS: tl.constexpr, BLOCK: tl.constexpr, SCAN: tl.constexpr):
    """``STEPS`` dependent block-wide sums (or inclusive scans) of a [BLOCK] tile, each
    feeding the next, so none can overlap another."""
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    for _ in tl.static_range(STEPS):
        if SCAN:
            x = tl.cumsum(x, axis=0) * (1.0 / BLOCK)
        else:
            x = x * 0.5 + tl.sum(x, axis=0) * (1.0 / BLOCK)
    tl.store(out_ptr + offs, x)


def _ticket_kernel(count_ptr, STEPS: tl.constexpr):
    """``STEPS`` dependent acq_rel atomic adds on a 2-int counter: each address takes the
    previous value's sign bit (0 while the count is below 2^31), so none can start before
    the last returns."""
    got = tl.zeros([], dtype=tl.int32)
    for _ in tl.static_range(STEPS):
        got = tl.atomic_add(count_ptr + ((got >> 31) & 1), 1, sem="acq_rel")


@dataclass(frozen=True)
class Kind:
    """One kind of step: its label, and for reductions the tile and warps."""

    label: str
    block: int = 0
    warps: int = 1
    scan: bool = False
    lines: int = 0
    ticket: bool = False

    @property
    def is_load(self) -> bool:
        return self.lines > 0


KINDS = (Kind("load L2", lines=L2_LINES), Kind("load HBM", lines=HBM_LINES),
         Kind("sum 4 warps", block=1024, warps=4), Kind("scan 4 warps", block=1024, warps=4, scan=True),
         Kind("sum 1 warp", block=256, warps=1), Kind("atomic acq_rel", ticket=True))


def cycle(lines: int, generator: torch.Generator) -> tuple[torch.Tensor, list[int]]:
    """A random single cycle through ``lines`` lines: the chase buffer [lines x LINE_INTS]
    int32 (line ``i``'s first int is the line after ``i``) and the visiting order."""
    order = torch.randperm(lines, generator=generator)
    buffer = torch.zeros(lines * LINE_INTS, dtype=torch.int32)
    buffer[order * LINE_INTS] = order.roll(-1).to(torch.int32)
    return buffer, order.tolist()


def chase(kernel, buffer: torch.Tensor, cursor: torch.Tensor, steps: int) -> None:
    kernel[(1,)](buffer, cursor, STEPS=steps, LINE=LINE_INTS, num_warps=1)


def tickets(kernel, counter: torch.Tensor, steps: int) -> None:
    kernel[(1,)](counter, STEPS=steps, num_warps=1)


def reduce_chain(kernel, x: torch.Tensor, out: torch.Tensor, kind: Kind, steps: int) -> None:
    kernel[(1,)](x, out, STEPS=steps, BLOCK=kind.block, SCAN=kind.scan, num_warps=kind.warps)


def fit(steps: list[int], us: list[float]) -> dict:
    """Least squares ``us = intercept + steps x per_step`` (scipy), with the slope's
    standard error."""
    from scipy.stats import linregress

    line = linregress(steps, us)
    return {"intercept_us": line.intercept, "per_step_us": line.slope, "per_step_stderr_us": line.stderr,
            "r2": line.rvalue**2}


def steps_within_goal(per_step_us: float, zero_step_us: float, empty_us: float) -> float:
    """How many steps fit between the 0-step kernel and the goal (LAUNCH_GOAL x the empty
    launch); negative when even the 0-step kernel is over it."""
    return (LAUNCH_GOAL * empty_us - zero_step_us) / per_step_us


def run(rounds: int) -> tuple[dict[str, dict[int, list[float]]], list[float]]:
    """{kind: {steps: [us per call, one per round]}} and the empty-launch readings (one
    before each round and one at the end)."""
    from benchmarks.kernels import empty_launch_ms, graph_ms
    from runtime.kernels.backend import jit

    gen = torch.Generator().manual_seed(0)
    chase_kernel, reduce_kernel, ticket_kernel = jit(_chase_kernel), jit(_reduce_kernel), jit(_ticket_kernel)
    counter = torch.zeros(2, dtype=torch.int32, device="cuda")
    buffers = {kind.label: cycle(kind.lines, gen)[0].cuda() for kind in KINDS if kind.is_load}
    cursors = {label: torch.zeros(1, dtype=torch.int32, device="cuda") for label in buffers}
    x = torch.rand(1024, device="cuda")
    out = torch.empty_like(x)
    calls = {}
    for kind in KINDS:
        for n in STEPS:
            if kind.is_load:
                calls[kind.label, n] = (lambda k=kind, n=n: chase(chase_kernel, buffers[k.label], cursors[k.label], n))
            elif kind.ticket:
                calls[kind.label, n] = (lambda n=n: tickets(ticket_kernel, counter, n))
            else:
                calls[kind.label, n] = (lambda k=kind, n=n: reduce_chain(reduce_kernel, x, out, k, n))
    for fn in calls.values():  # compile every variant before any timing
        fn()
    torch.cuda.synchronize()
    times: dict[str, dict[int, list[float]]] = {kind.label: {n: [] for n in STEPS} for kind in KINDS}
    empty = []
    for r in range(rounds):
        empty.append(empty_launch_ms() * 1e3)
        for n in STEPS if r % 2 == 0 else reversed(STEPS):  # alternate the order between rounds
            for kind in KINDS:
                ms = graph_ms(calls[kind.label, n])
                if ms is None:
                    raise RuntimeError(f"benchmarks/chain_floor.py: {kind.label} x {n} could not be captured")
                times[kind.label][n].append(ms * 1e3)
    empty.append(empty_launch_ms() * 1e3)
    return times, empty


def summary(times: dict[str, dict[int, list[float]]], empty: list[float]) -> list[dict]:
    """One row per kind: the medians per step count, the fit, the steps within the goal."""
    rows = []
    for label, per_n in times.items():
        medians = {n: statistics.median(v) for n, v in per_n.items()}
        line = fit(list(medians), list(medians.values()))
        rows.append({"kind": label, "median_us": medians, **line,
                     "steps_within_goal": steps_within_goal(line["per_step_us"], medians[0], min(empty))})
    return rows


def markdown(env: dict, command: str, rows: list[dict], empty: list[float], rounds: int) -> str:
    lines = ["# Dependent steps inside one replayed kernel: the floor under the small-op goal", "",
             f"- GPU: {env['gpu']} ({env['nvidia_smi']}); torch {env['torch']}, triton {env['triton']}, "
             f"CUDA {env['cuda']}",
             f"- Command: `{command}`",
             f"- Per-call device time (us): 20 calls replayed from one CUDA graph, median of 10 replays "
             f"(benchmarks/kernels.py's graph_ms), median of {rounds} interleaved rounds. Empty Triton launch, "
             f"same way, {len(empty)} times: {min(empty):.2f} smallest, {statistics.median(empty):.2f} median, "
             f"{max(empty):.2f} largest; the goal: <= {LAUNCH_GOAL:g} x {min(empty):.2f} = "
             f"{LAUNCH_GOAL * min(empty):.2f} us.",
             "- Fit: us = intercept + steps x per step (least squares over the step counts); within goal: "
             "(goal - the 0-step kernel) / per step, the steps of that kind alone an op could chain and "
             "still meet it.", "",
             "| kind | " + " | ".join(f"{n} steps" for n in STEPS) + " | per step us | intercept us | r2 | "
             "within goal |",
             "|---|" + "---:|" * (len(STEPS) + 4)]
    for row in rows:
        lines.append(f"| {row['kind']} | " + " | ".join(f"{row['median_us'][n]:.2f}" for n in STEPS)
                     + f" | {row['per_step_us']:.3f} +- {row['per_step_stderr_us']:.3f} | "
                     f"{row['intercept_us']:.2f} | {row['r2']:.3f} | {row['steps_within_goal']:.1f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    if args.rounds < 1:
        print(f"benchmarks/chain_floor.py: --rounds: expected a positive count, got {args.rounds}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("benchmarks/chain_floor.py: needs a CUDA GPU", file=sys.stderr)
        return 2
    from benchmarks.kernels import environment

    times, empty = run(args.rounds)
    rows = summary(times, empty)
    env = environment()
    command = command_line("benchmarks/chain_floor.py", argv if argv is not None else sys.argv[1:])
    doc = {"environment": env, "command": command, "rounds": args.rounds, "empty_launch_us": empty,
           "times_us": {label: {str(n): v for n, v in per_n.items()} for label, per_n in times.items()},
           "kinds": [{**row, "median_us": {str(n): v for n, v in row["median_us"].items()}} for row in rows]}
    write(args.out, "chain_floor_" + gpu_tag(env["gpu"]), doc,
          markdown(env, command, rows, empty, args.rounds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
