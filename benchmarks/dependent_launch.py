"""The four two-launch ops with and without programmatic dependent launch (Hopper's PDL,
runtime/kernels/pdl.py): attention's merge, the gate's selecting launch, mHC's finishing
launch, the split top-k's candidates' select (chained and register-resident).

Each case is timed both ways in the same run, interleaved (off, on, off, on ... over
``--rounds`` rounds, the order alternating), as benchmarks/kernels.py times its fused ops
(20 calls replayed from one CUDA graph, median of 10 replays: device time), and both ways
must give the same bits (checked first; a difference stops the run). Shapes: decode
(``mid`` and ``flash``, 1 / 8 / 64 rows) for attention, the gate and mHC; the top-k at the
indexer's 64k / 128k keys, 1 and 8 rows, each op's registry policy otherwise. "launches"
is the kernels one call runs without PDL (torch.profiler): where it is 1 the switch has
nothing to overlap, and the ratio measures noise.

    PYTHONPATH=. python benchmarks/dependent_launch.py --out benchmarks/results

Writes dependent_launch_<gpu>.json and .md; the table ends with the ratio on / off
(median over rounds) per case.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch

from benchmarks.records import command_line, write
from runtime.config import V41Config

ROUNDS = 3


@dataclass
class Case:
    op: str
    scale: str
    shape: str
    ops: tuple  # (off, on): callables with the same arguments
    args: tuple
    launches: int = 0
    us: dict = field(default_factory=lambda: {"off": [], "on": []})

    def row(self) -> dict:
        off, on = statistics.median(self.us["off"]), statistics.median(self.us["on"])
        return {"op": self.op, "scale": self.scale, "shape": self.shape, "launches": self.launches,
                "off_us": off, "on_us": on, "ratio": on / off, "rounds_off_us": self.us["off"],
                "rounds_on_us": self.us["on"]}


def cases() -> list[Case]:
    """Every (op, shape) with its ops off / on and its arguments (benchmarks/kernels.py's
    case builders: the same inputs as the kernel table)."""
    from benchmarks.kernels import attention_case, gate_case, mhc_case
    from runtime.kernels.attention import FusedSparseAttention
    from runtime.kernels.gate import FusedGate
    from runtime.kernels.gate_tiles import GatePolicy
    from runtime.kernels.mhc import FusedMhc
    from runtime.kernels.mhc_tiles import MhcPolicy
    from runtime.kernels.topk import FusedTopk
    from runtime.kernels.topk_tiles import TopkSplitPolicy

    out = []
    for name in ("mid", "flash"):
        c = V41Config.preset(name)
        for t in (1, 8, 64):
            for build, pair in ((attention_case, [FusedSparseAttention(dependent_merge=on) for on in (False, True)]),
                                (gate_case, [FusedGate(GatePolicy(dependent_select=on)) for on in (False, True)]),
                                (mhc_case, [FusedMhc(MhcPolicy(dependent_finish=on)) for on in (False, True)])):
                case, args = build(None, c, name, t)
                out.append(Case(case.op, name, case.shape, tuple(pair), args))
    k = V41Config.preset("flash").index_topk
    for t, n in ((1, 65536), (1, 131072), (8, 131072)):
        scores = torch.randn(t, n, device="cuda")
        for form, resident in (("chained", False), ("resident", True)):
            pair = tuple(FusedTopk(policy=TopkSplitPolicy(resident=resident, dependent_select=on)) for on in (False, True))
            split = pair[0].policy.split(t, n, k)
            shape = f"T={t} N={n} k={k} {split.chunks}x{split.chunk} {form}"
            out.append(Case("topk", "flash", shape, pair, (scores, k)))
    return out


def results_equal(a, b) -> bool:
    """The same bits: tensors, or tuples / mix records of them."""
    if isinstance(a, torch.Tensor):
        return a.dtype == b.dtype and a.shape == b.shape and torch.equal(
            a.view(torch.int32) if a.dtype == torch.float32 else a, b.view(torch.int32) if b.dtype == torch.float32 else b)
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(results_equal(x, y) for x, y in zip(a, b, strict=True))
    return all(results_equal(getattr(a, f), getattr(b, f)) for f in ("pre", "post", "comb"))


def run(rounds: int) -> list[Case]:
    from benchmarks.kernels import graph_ms, kernel_breakdown

    todo = cases()
    for case in todo:  # compile both forms and check them before any timing
        off, on = (op(*case.args) for op in case.ops)
        if not results_equal(off, on):
            raise RuntimeError(f"benchmarks/dependent_launch.py: {case.op} {case.scale} {case.shape}: "
                               "PDL changed the result")
        case.launches = len(kernel_breakdown(lambda case=case: case.ops[0](*case.args)))
    for r in range(rounds):
        for case in todo:
            for label in ("off", "on") if r % 2 == 0 else ("on", "off"):
                op = case.ops[label == "on"]
                ms = graph_ms(lambda op=op, case=case: op(*case.args))
                if ms is None:
                    raise RuntimeError(f"benchmarks/dependent_launch.py: {case.op} {case.shape} ({label}) "
                                       "could not be captured in a CUDA graph")
                case.us[label].append(ms * 1e3)
        print(f"round {r + 1} of {rounds} done", flush=True)
    return todo


def markdown(env: dict, command: str, rows: list[dict], rounds: int) -> str:
    lines = ["# Two-launch ops with and without programmatic dependent launch", "",
             f"- GPU: {env['gpu']} ({env['nvidia_smi']}); torch {env['torch']}, triton {env['triton']}, "
             f"CUDA {env['cuda']}",
             f"- Command: `{command}`",
             f"- Per-call device time (us): 20 calls replayed from one CUDA graph, median of 10 replays, median of "
             f"{rounds} rounds, off and on interleaved; outputs equal bit for bit (checked before timing). "
             "launches: kernels per call without PDL (1: nothing to overlap).", "",
             "| op | scale | shape | launches | off us | on us | on / off |",
             "|---|---|---|---:|---:|---:|---:|"]
    for row in rows:
        lines.append(f"| {row['op']} | {row['scale']} | {row['shape']} | {row['launches']} | {row['off_us']:.2f} | "
                     f"{row['on_us']:.2f} | {row['ratio']:.3f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    args = parser.parse_args(argv)
    if args.rounds < 1:
        print(f"benchmarks/dependent_launch.py: --rounds: expected a positive count, got {args.rounds}",
              file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("benchmarks/dependent_launch.py: needs a CUDA GPU", file=sys.stderr)
        return 2
    from benchmarks.kernels import environment

    torch.manual_seed(0)
    rows = [case.row() for case in run(args.rounds)]
    env = environment()
    command = command_line("benchmarks/dependent_launch.py", argv if argv is not None else sys.argv[1:])
    doc = {"environment": env, "command": command, "rounds": args.rounds, "cases": rows}
    write(args.out, "dependent_launch_" + env["gpu"].split()[-1].lower(), doc,
          markdown(env, command, rows, args.rounds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
