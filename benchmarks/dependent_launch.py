"""The four two-launch ops with and without programmatic dependent launch (Hopper's PDL,
runtime/kernels/pdl.py): attention's merge, the gate's selecting launch, mHC's finishing
launch, the split top-k's later launches (row-bound, chained and register-resident); and, where
an op has a one-launch form (a ticket), that form beside them, so one run says both
whether PDL pays and whether a second launch with PDL beats the ticket.

Variants per case, the first the baseline the others are read against:
- attention: ``pdl off`` (the registry's default), ``pdl`` (``dependent_merge``), ``pdl at
  exit`` (``merge_at_exit``: the partials let the merge launch as they exit, pdl.py);
- gate: ``pdl off`` (a selecting launch at every size, the default since session 43, not
  dependent), ``pdl`` (``dependent_select``, the default since session 23), ``ticket rule +
  pdl`` (the rule before session 43: a ticket unless the selection covers more than 1,024
  (row, padded expert) pairs, ``mid`` from 512 rows and ``flash`` from 3, 2 rows per
  selecting program; else a dependent selecting launch);
- mHC: ``pdl off`` (decode: a finishing launch), ``pdl`` (``dependent_finish_to``: every
  call; the default since session 23 up to 64 rows), ``pdl at exit``
  (``finish_at_exit_from=0``); also at 128-512 rows, where the sweep runs in several waves;
- top-k at the indexer's 64k / 128k keys: ``row bound`` (the default since session 26),
  ``row bound + pdl``, ``chained``, ``chained + pdl``, ``resident``, ``resident + pdl``,
  ``resident 1 launch`` (the ticket form).

Timing as benchmarks/kernels.py's fused ops (20 calls replayed from one CUDA graph, median
of 10 replays: device time), every variant of a case interleaved in each of ``--rounds``
rounds (the order rotating), medians over rounds. "bits" says whether the variant's output
equals the baseline's bit for bit (tests/runtime/test_kernels_pdl.py asserts it for PDL on
/ off). "launches" is the kernels one call of the variant runs (torch.profiler).

    PYTHONPATH=. python benchmarks/dependent_launch.py --out benchmarks/results

Writes dependent_launch_<gpu>.json and .md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from benchmarks.records import command_line, gpu_tag, write
from runtime.config import V41Config

ROUNDS = 3


@dataclass
class Case:
    op: str
    scale: str
    shape: str
    variants: dict  # label -> op, the first the baseline; every op takes ``args``
    args: tuple
    launches: dict = field(default_factory=dict)
    same_bits: dict = field(default_factory=dict)
    us: dict = field(default_factory=dict)  # label -> [us per call, one per round]

    def rows(self) -> list[dict]:
        base = statistics.median(self.us[next(iter(self.variants))])
        return [{"op": self.op, "scale": self.scale, "shape": self.shape, "variant": label,
                 "launches": self.launches[label], "same_bits": self.same_bits[label],
                 "us": statistics.median(self.us[label]), "ratio": statistics.median(self.us[label]) / base,
                 "rounds_us": self.us[label]} for label in self.variants]


def cases() -> list[Case]:
    """Every (op, shape) with its variants and arguments (benchmarks/kernels.py's case
    builders: the same inputs as the kernel table)."""
    from benchmarks.kernels import attention_case, gate_case, mhc_case
    from runtime.kernels.attention import FusedSparseAttention
    from runtime.kernels.gate import FusedGate
    from runtime.kernels.gate_tiles import GatePolicy
    from runtime.kernels.mhc import FusedMhc
    from runtime.kernels.mhc_tiles import MhcPolicy
    from runtime.kernels.topk import FusedTopk
    from runtime.kernels.topk_tiles import CHAINED, TopkSplitPolicy

    always = dict(dependent_finish_to=1 << 30)
    mhc_variants = {"pdl off": FusedMhc(MhcPolicy(dependent_finish_to=0)), "pdl": FusedMhc(MhcPolicy(**always)),
                    "pdl at exit": FusedMhc(MhcPolicy(**always, finish_at_exit_from=0))}
    forms = (
        (attention_case, {"pdl off": FusedSparseAttention(dependent_merge=False),
                          "pdl": FusedSparseAttention(dependent_merge=True),
                          "pdl at exit": FusedSparseAttention(dependent_merge=True, merge_at_exit=True)}),
        (gate_case, {"pdl off": FusedGate(GatePolicy(dependent_select=False)),
                     "pdl": FusedGate(GatePolicy(dependent_select=True)),
                     "ticket rule + pdl": FusedGate(GatePolicy(select_from=1024, wide_select_from=1 << 30,
                                                               dependent_select=True))}),
        (mhc_case, mhc_variants),
    )
    out = []
    for name in ("mid", "flash"):
        c = V41Config.preset(name)
        for t in (1, 8, 64):
            for build, variants in forms:
                case, args = build(None, c, name, t)
                out.append(Case(case.op, name, case.shape, variants, args))
        for t in (128, 256, 512):  # mHC's sweep in more than one wave: PDL lost from 256 rows
            case, args = mhc_case(None, c, name, t)
            out.append(Case(case.op, name, case.shape, mhc_variants, args))
    k = V41Config.preset("flash").index_topk
    topk = {"row bound": TopkSplitPolicy(), "row bound + pdl": TopkSplitPolicy(dependent_select=True),
            "chained": CHAINED, "chained + pdl": replace(CHAINED, dependent_select=True),
            "resident": replace(CHAINED, resident=True),
            "resident + pdl": replace(CHAINED, resident=True, dependent_select=True),
            "resident 1 launch": replace(CHAINED, resident=True, resident_one_launch=True)}
    for t, n in ((1, 65536), (1, 131072), (8, 131072)):
        scores = torch.randn(t, n, device="cuda")
        split = TopkSplitPolicy().split(t, n, k)
        out.append(Case("topk", "flash", f"T={t} N={n} k={k} {split.chunks}x{split.chunk}",
                        {label: FusedTopk(policy=policy) for label, policy in topk.items()}, (scores, k)))
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
    for case in todo:  # compile every variant and compare it with the baseline before any timing
        results = {label: op(*case.args) for label, op in case.variants.items()}
        base = next(iter(results.values()))
        for label, op in case.variants.items():
            case.same_bits[label] = results_equal(base, results[label])
            case.launches[label] = len(kernel_breakdown(lambda op=op, case=case: op(*case.args)))
            case.us[label] = []
    for r in range(rounds):
        for case in todo:
            labels = list(case.variants)
            for label in labels[r % len(labels):] + labels[:r % len(labels)]:  # rotate the order
                op = case.variants[label]
                ms = graph_ms(lambda op=op, case=case: op(*case.args))
                if ms is None:
                    raise RuntimeError(f"benchmarks/dependent_launch.py: {case.op} {case.shape} ({label}) "
                                       "could not be captured in a CUDA graph")
                case.us[label].append(ms * 1e3)
        print(f"round {r + 1} of {rounds} done", flush=True)
    return todo


def markdown(env: dict, command: str, rows: list[dict], rounds: int) -> str:
    lines = ["# Two-launch ops with and without programmatic dependent launch, and their one-launch forms", "",
             f"- GPU: {env['gpu']} ({env['nvidia_smi']}); torch {env['torch']}, triton {env['triton']}, "
             f"CUDA {env['cuda']}",
             f"- Command: `{command}`",
             f"- Per-call device time (us): 20 calls replayed from one CUDA graph, median of 10 replays, median of "
             f"{rounds} rounds, a case's variants interleaved (order rotating). vs first: this variant's time / "
             "the case's first variant's. bits: the output equals the first variant's bit for bit. launches: "
             "kernels per call.", "",
             "| op | scale | shape | variant | launches | us | vs first | bits |",
             "|---|---|---|---|---:|---:|---:|---|"]
    for row in rows:
        lines.append(f"| {row['op']} | {row['scale']} | {row['shape']} | {row['variant']} | {row['launches']} | "
                     f"{row['us']:.2f} | {row['ratio']:.3f} | {'same' if row['same_bits'] else 'DIFFERENT'} |")
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
    rows = [row for case in run(args.rounds) for row in case.rows()]
    env = environment()
    command = command_line("benchmarks/dependent_launch.py", argv if argv is not None else sys.argv[1:])
    doc = {"environment": env, "command": command, "rounds": args.rounds, "cases": rows}
    write(args.out, "dependent_launch_" + gpu_tag(env["gpu"]), doc,
          markdown(env, command, rows, args.rounds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
