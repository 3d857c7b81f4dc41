"""Fused Mega-Gate tilings on one GPU: the first kernel's tiling ("old": one program per 16
rows over all experts and all of D, ``GatePolicy(one_program=True)``: today's kernel with
that tiling keeps the logits in registers and selects at once, as the first kernel did;
that kernel itself measured 10.2-10.5 us at mid and 91-94 us at flash,
benchmarks/results/kernels_h200.md) against the re-tiled default ("new", ``GatePolicy()``)
and, with ``--sweep``, a grid of D chunks x expert blocks x warps (plus the split limits),
at ``mid`` and ``flash``, T = 1 / 8 / 64 / 512, bf16 inputs as in benchmarks/kernels.py.

Every time is the per-call device time of ``--reps`` calls replayed from one CUDA graph,
the tilings of a case replayed in turn for 9 rounds (medians; ``interleaved_graph_ms``;
before session 43 each tiling's graph was read alone, 10 replays), next to an empty Triton kernel's per-call replay time measured the
same way in the same run, because the issue-16 goal is relative to it; the floor and the
verdict are benchmarks/kernels.py's (``empty_launch_ms``, ``Case.goal``: a memory-bound op
moving >= 4 MiB must reach 60 % of 4.3 TB/s, one moving less <= 2x the empty launch). Each tiling's output is checked against the reference ``route`` first (rows
whose expert sets differ; max weight error on the others), so a fast wrong tiling shows.

    PYTHONPATH=. python benchmarks/gate_tiles.py --out "$OUT" [--sweep] [--scales flash] [--rows 1,8]

Writes gate_tiles_<gpu>[_sweep][_stages][_<scales>][_top<k>].json and .md under --out (the suffixes when
--sweep or --stages is given, the scales / rows are not the default, or ``--topk`` is given),
rewritten after every case, so a run cut short keeps the cases it finished. A full sweep
compiles about 30 tilings per case: run it one scale at a time (``--sweep --scales flash``).

``--baseline DIR``: a folder holding an earlier revision of ``runtime/kernels/gate.py``
(``git show REV:runtime/kernels/gate.py > DIR/gate.py``), timed on every case at its
default tiling as "baseline", with its launches apart, next to today's kernel.

``--stages``: also the variants of rows per program, pipelined stages and the selecting
launch's warps (``STAGE_VARIANTS``); a tiling that needs more shared memory than an SM has
is skipped and named in the note. ``--only LABEL [LABEL ...]``: time only those variants.

``--topk K``: every case with K experts per token (the release: 6), reference included, as
a diagnostic: the selection is K rounds of a block-wide max, one waiting on the last, so
comparing the per-launch times at K = 1 and 6 says what the rounds cost.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch

from benchmarks.kernels import (
    HBM_BYTES_PER_S,
    Case,
    empty_launch_ms,
    environment,
    gate_case,
    interleaved_graph_ms,
    kernel_breakdown,
    verdict,
)
from benchmarks.records import command_line, gpu_tag
from benchmarks.tile_sweep import baseline_ops, chosen
from runtime.config import V41Config
from runtime.kernels.gate_tiles import GatePolicy
from runtime.moe import route


@dataclass
class Row:
    """One tiling at one case; ``case`` carries bytes, FLOPs and the graph time, and its
    ``goal`` is benchmarks/kernels.py's reading of issue 16 (the same verdict there)."""

    case: Case
    t: int
    variant: str
    tiling: str
    programs: int
    empty_us: float
    ids_differ: int
    weight_err: float
    kernels_us: dict | None = None  # per launch of a call (new / two launches only)

    @property
    def us(self) -> float | None:
        return None if self.case.fused_graph_ms is None else self.case.fused_graph_ms * 1e3

    @property
    def roofline(self) -> float | None:
        return None if self.us is None else self.case.roofline_fraction

    def goal(self) -> tuple[str, bool | None]:
        return ("(no graph)", None) if self.us is None else self.case.goal(self.empty_us * 1e-3)


# ``--stages``: rows per program, the D loop's pipelined stages and the selecting launch's warps
# (GatePolicy.block_m / num_stages / select_warps). The first two for the many-row calls, where
# every tiling of the sweep stayed at 27-41 % of the roofline (gate_tiles_h200_sweep_mid_4096.md):
# split tilings with more stages, and one program per 32 or 64 rows over all of D (no
# partials, no ticket: 128 / 64 programs at 4,096 rows) with wider D chunks so more bytes
# are in flight per program
STAGE_VARIANTS = (
    ("stages 2", GatePolicy(num_stages=2)), ("stages 4", GatePolicy(num_stages=4)),
    ("stages 5", GatePolicy(num_stages=5)), ("m32", GatePolicy(block_m=32)),
    ("m32 stages 4", GatePolicy(block_m=32, num_stages=4)),
    ("tail 16K stages 4", GatePolicy(tail_bytes=16 * 1024, num_stages=4)),
    *((f"one program m{m} d{dd} s{st}", GatePolicy(one_program=True, block_m=m, block_d=dd, num_stages=st))
      for m, dd, st in ((32, 128, 3), (32, 128, 4), (32, 128, 5), (32, 256, 3), (32, 256, 4), (64, 128, 4))),
    # decode: the selection in a second launch of 1 / 2 warps (GatePolicy.select_warps), and
    # that launch from every row count
    ("select w1", GatePolicy(select_warps=1)), ("select w2", GatePolicy(select_warps=2)),
    ("two launches select w1", GatePolicy(select_from=0, select_warps=1)),
    ("two launches select w4", GatePolicy(select_from=0, select_warps=4)),
    ("two launches select w2", GatePolicy(select_from=0, select_warps=2)),
    ("two launches select w1 rows 4", GatePolicy(select_from=0, select_rows=4, select_warps=1, wide_select_from=1 << 30)),
    ("from 2048 select w4", GatePolicy(select_from=2048, select_warps=4, wide_select_from=1 << 30)),  # the default before 2026-12-04
    # each selection round one reduction of (key, score) pairs (GatePolicy.pair_from), or never
    ("paired", GatePolicy(pair_from=0)), ("paired ticket", GatePolicy(select_from=1 << 30, wide_select_from=1 << 30, pair_from=0)),
    ("unpaired", GatePolicy(pair_from=1 << 30)),
    ("m32 two launches select w1", GatePolicy(block_m=32, select_from=0, select_warps=1)),
    # one row per selecting program (session 43): at flash a program's 2 x 512 pairs span 4
    # warps, so each of the 6 rounds crosses them through shared memory and a barrier (the
    # selecting launch 4.2 of 7.6 us at 8 rows on an H100); one row on 1-2 warps keeps a round
    # in one warp's lanes or halves what crosses. (The one-warp form lost before with 2 rows:
    # 32 pairs a lane.)
    ("rows 1 w1", GatePolicy(select_rows=1, select_warps=1)), ("rows 1 w2", GatePolicy(select_rows=1, select_warps=2)),
    ("rows 1 w4", GatePolicy(select_rows=1, select_warps=4)),
    ("two launches rows 1 w1", GatePolicy(select_from=0, select_rows=1, select_warps=1)),
    ("two launches rows 1 w2", GatePolicy(select_from=0, select_rows=1, select_warps=2)),
    ("two launches rows 1 w4", GatePolicy(select_from=0, select_rows=1, select_warps=4)),
    # the one-row selection on 8 warps (slower: gate_tiles_h100_session43_groups_1.md)
    ("select w8", GatePolicy(select_warps=8)),
)


def variants(sweep: bool, stages: bool = False) -> list[tuple[str, GatePolicy]]:
    out = [("old", GatePolicy(one_program=True)), ("new", GatePolicy()), ("ticket", GatePolicy(select_from=1 << 30, wide_select_from=1 << 30)),
           ("two launches", GatePolicy(select_from=0)),  # the partials' launch timed apart from the selection's
           ("wide from 17", GatePolicy(wide_experts_rows=17)),  # 32 experts per program above 16 rows (before session 41)
           # flash's selection from 3 rows in a second launch, 2 rows per program, and mid's decode
           # in one launch (the rule before session 43); mid's decode in one launch alone
           ("select 2 rows", GatePolicy(select_from=1024, wide_select_from=1 << 30)),
           ("one launch at decode", GatePolicy(select_from=1024))]
    if sweep:
        for block_d, block_e, warps in itertools.product((32, 64, 128, 256), (16, 32, 64), (2, 4)):
            out.append((f"d{block_d} e{block_e} w{warps}", GatePolicy(block_d=block_d, block_e=block_e,
                                                                      num_warps=warps)))
        out += [("tail 16K", GatePolicy(tail_bytes=16 * 1024)), ("tail 256K", GatePolicy(tail_bytes=256 * 1024)),
                ("programs 128", GatePolicy(programs=128)), ("programs 512", GatePolicy(programs=512)),
                # more, shorter D splits: at flash with 64 rows the partials' launch took 8.2 of
                # 13.2 us for 288 programs of 7 dependent 256-column steps each
                ("programs 1024", GatePolicy(programs=1024)), ("programs 2048", GatePolicy(programs=2048))]
    if stages:
        out += list(STAGE_VARIANTS)
    return out


def check(gate, args) -> tuple[int, float]:
    """(rows whose expert sets differ from the reference, max weight error on the rest)."""
    fw, fi = gate(*args)
    rw, ri = route(*args)
    same = (fi.sort(1).values == ri.sort(1).values).all(1)
    err = (fw.gather(1, fi.sort(1).indices) - rw.gather(1, ri.sort(1).indices))[same].abs()
    return int((~same).sum()), float(err.max()) if err.numel() else 0.0


def run(scales: list[str], rows: list[int], sweep: bool, reps: int, topk: int | None = None,
        baseline=None, stages: bool = False, only: tuple[str, ...] | None = None,
        unfit: list[str] | None = None, save=None) -> list[Row]:
    """``baseline``: an earlier revision's gate (``--baseline``), timed on every case as
    "baseline" at its default tiling; ``only``: the variant labels to time (None: all);
    ``unfit``: collects "scale T=t label" of tilings the GPU cannot launch (more shared
    memory than an SM has: a stage count too deep for a wide tile), which are skipped;
    ``save(done)``: called after every case, so a run cut short keeps what it timed."""
    from triton.runtime.errors import OutOfResources

    from runtime.kernels.gate import FusedGate

    empty = empty_launch_ms() * 1e3
    print(f"empty Triton kernel: {empty:.2f} us per call (graph replay)", flush=True)
    done = []
    for name in scales:
        c = V41Config.preset(name)
        c = c if topk is None else c.replace(num_experts_per_tok=topk)
        d, e = c.hidden_size, c.n_routed_experts
        for t in rows:
            case, args = gate_case(None, c, name, t)
            seen: dict[tuple, str] = {}
            ready = []  # (label, gate, tiles, ids differ, weight err) of the variants that launch
            for label, policy in chosen(variants(sweep, stages), only) + ([("baseline", GatePolicy())] if baseline else []):
                tiles = policy.tiling(t, d, e)
                key = tuple(asdict(tiles).values())
                if key in seen and label != "baseline":
                    continue  # the same tiling as an earlier variant of this case
                seen[key] = label
                gate = baseline if label == "baseline" else FusedGate(policy)
                try:
                    differ, err = check(gate, args)
                except OutOfResources as exc:
                    print(f"{name:6s} T={t:<4d} {label}: skipped, does not fit ({exc})", flush=True)
                    if unfit is not None:
                        unfit.append(f"{name} T={t} {label}")
                    continue
                ready.append((label, gate, tiles, differ, err))
            # every variant of the case timed together, their graphs replayed in turn
            times = interleaved_graph_ms([lambda gate=gate, args=args: gate(*args) for _, gate, *_ in ready], reps=reps)
            for (label, gate, tiles, differ, err), ms in zip(ready, times, strict=True):
                row_blocks, cols = tiles.grid(t, d, e)
                desc = (f"m{tiles.block_m} e{tiles.block_e} d{tiles.block_d} split {tiles.split_d}x"
                        f"{tiles.splits(d)} sel {tiles.sel_m}{' 2nd launch' if tiles.select_rows else ''} "
                        f"w{tiles.num_warps}{f' s{tiles.num_stages}' if tiles.num_stages else ''}"
                        f"{f' sel w{tiles.select_warps}' if tiles.select_warps else ''}"
                        f"{' paired' if tiles.pair_reduce else ''}")
                row = Row(replace(case, fused_graph_ms=ms), t, label, desc, row_blocks * cols, empty, differ, err)
                if label in ("new", "two launches", "baseline", "paired", "unpaired"):
                    row.kernels_us = kernel_breakdown(lambda gate=gate, args=args: gate(*args))
                done.append(row)
                print(line(row), flush=True)
            if save is not None:
                save(done)
    return done


def line(r: Row) -> str:
    us = f"{r.us:8.2f}" if r.us is not None else "     n/a"
    x = f"{r.us / r.empty_us:5.2f}x" if r.us is not None else "  n/a"
    roof = f"{r.roofline:6.1%}" if r.roofline is not None else "   n/a"
    goal, met = r.goal()
    return (f"{r.case.scale:6s} T={r.t:<4d} {r.variant:14s} {r.tiling:44s} progs {r.programs:5d}  {us} us  "
            f"{x} empty  roofline {roof}  goal {goal}: {verdict(met)}  ids differ {r.ids_differ}  "
            f"w err {r.weight_err:.1e}")


def markdown(env: dict, rows: list[Row], command: str, empty: float, reps: int, topk: int | None = None,
             unfit: list[str] | None = None) -> str:
    lines = [
        "# Fused gate tilings: old (one program per 16 rows) vs re-tiled", "",
        f"- GPU: {env['gpu']} ({env['nvidia_smi']}); torch {env['torch']}, triton {env['triton']}, CUDA {env['cuda']}",
        f"- Command: `{command}`",
        *([f"- A diagnostic: top-{topk} instead of the release's top-6, the reference too."] if topk else []),
        f"- Per-call device time: {reps} calls replayed from one CUDA graph per tiling, the tilings of a case "
        "replayed in turn for 9 rounds (medians). "
        f"Empty Triton kernel, same way, same run: **{empty:.2f} us**. Goal (issue 16, as benchmarks/kernels.py "
        "reads it): memory-bound and >= 4 MiB moved -> >= 60 % of 4.3 TB/s, less -> <= 2x the empty launch; "
        "compute-bound cases have none. bf16 x and weight, float32 bias.",
        "- old: `GatePolicy(one_program=True)`, the first kernel's tiling (one program per 16 rows over all "
        "experts and all of D); new: `GatePolicy()`; ticket: the default tiling with the selection always in "
        "the ticket-holder (one launch, `select_from` unbounded); two launches: partials and selection always in "
        "two launches (`select_from` 0), timed apart below; baseline: `--baseline`'s earlier gate.py at its "
        "default tiling, timed apart below; other rows: `--sweep` variants "
        "(`runtime/kernels/gate_tiles.py`). A variant whose tiling equals an earlier one's is not repeated.",
        "- ids differ: rows whose expert set differs from `runtime.moe.route` (bf16 near-ties can do that); "
        "w err: max |weight - reference| on the other rows.",
        *([f"- Skipped, more shared memory than an SM has: {', '.join(unfit)}."] if unfit else []), "",
        "| scale | T | variant | tiling | programs | MB moved | us | x empty | roofline | goal | ids differ | w err |",
        "|---|---:|---|---|---:|---:|---:|---:|---:|---|---:|---:|",
    ]
    for r in rows:
        us = f"{r.us:.2f}" if r.us is not None else "n/a"
        x = f"{r.us / r.empty_us:.2f}" if r.us is not None else "n/a"
        roof = f"{r.roofline:.0%}" if r.roofline is not None else "n/a"
        goal, met = r.goal()
        lines.append(f"| {r.case.scale} | {r.t} | {r.variant} | {r.tiling} | {r.programs} | {r.case.bytes / 1e6:.2f} | "
                     f"{us} | {x} | {roof} | {goal}: {verdict(met)} | {r.ids_differ} | {r.weight_err:.1e} |")
    lines += ["", "Device time per launch of a call (torch.profiler, eager; #n: the call's n-th launch):", ""]
    lines += [f"- {r.case.scale} T={r.t} {r.variant}: " + ", ".join(f"{k} {v:.2f} us" for k, v in r.kernels_us.items())
              for r in rows if r.kernels_us]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    parser.add_argument("--sweep", action="store_true", help="also D chunks x expert blocks x warps, split limits")
    parser.add_argument("--scales", default="mid,flash", help="comma-separated presets (default: mid,flash)")
    parser.add_argument("--rows", default="1,8,64,512", help="comma-separated row counts T (default: 1,8,64,512)")
    parser.add_argument("--stages", action="store_true",
                        help="also rows per program, pipelined stages and selecting warps (STAGE_VARIANTS)")
    parser.add_argument("--only", nargs="+", default=None,
                        help="time only the variants with these labels (e.g. new 'two launches select w1')")
    parser.add_argument("--reps", type=int, default=20, help="calls per CUDA graph (default: 20)")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="a folder with an earlier revision's gate.py to time alongside (one folder; loaded by tile_sweep.py's baseline_ops)")
    parser.add_argument("--topk", type=int, default=None,
                        help="a diagnostic: every case with this many experts per token (the release: 6)")
    args = parser.parse_args(argv)
    try:
        rows = [int(v) for v in args.rows.split(",") if v.strip()]
    except ValueError:
        parser.error(f"--rows: expected comma-separated integers, got {args.rows!r}")
    scales = [v.strip() for v in args.scales.split(",") if v.strip()]
    for name in scales:
        if name not in ("tiny", "mid", "flash"):
            parser.error(f"--scales: expected tiny, mid or flash, got {name!r}")
    if not rows or min(rows) < 1 or args.reps < 1:
        parser.error("--rows and --reps: expected positive integers")
    fewest = min(V41Config.preset(name).n_routed_experts for name in scales) if scales else 0
    if args.topk is not None and not 1 <= args.topk <= fewest:
        parser.error(f"--topk: expected 1 to {fewest} (the fewest experts of --scales), got {args.topk}")
    known = {label for label, _ in variants(True, True)}
    for label in args.only or ():
        if label not in known:
            parser.error(f"--only: no variant labelled {label!r} (see variants() and STAGE_VARIANTS)")
    if args.baseline is not None and not (args.baseline / "gate.py").is_file():
        parser.error(f"--baseline {args.baseline}: no gate.py there")
    if not torch.cuda.is_available():
        print("benchmarks/gate_tiles.py: needs a CUDA GPU", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    baseline = baseline_ops(args.baseline, ("gate",))["gate"][0][1] if args.baseline else None
    unfit: list[str] = []
    env = environment()
    command = command_line("benchmarks/gate_tiles.py", argv or sys.argv[1:])
    tag = gpu_tag(env["gpu"]) + ("_sweep" if args.sweep else "") + ("_stages" if args.stages else "")
    tag += "" if args.scales == "mid,flash" and args.rows == "1,8,64,512" else "_" + "_".join(scales)
    tag += "" if args.topk is None else f"_top{args.topk}"
    args.out.mkdir(parents=True, exist_ok=True)

    def save(done: list[Row]) -> str:
        """Write the JSON and the note of what is timed so far; returns the note."""
        empty = done[0].empty_us if done else 0.0
        doc = {"environment": env, "command": command, "hbm_bytes_per_s": HBM_BYTES_PER_S, "empty_us": empty,
               "reps": args.reps, "topk": args.topk, "unfit": unfit,
               "rows": [{**asdict(r), "us": r.us, "roofline": r.roofline, "goal": r.goal()[0],
                         "goal_met": r.goal()[1]} for r in done]}
        (args.out / f"gate_tiles_{tag}.json").write_text(json.dumps(doc, indent=2) + "\n")
        note = markdown(env, done, command, empty, args.reps, args.topk, unfit)
        (args.out / f"gate_tiles_{tag}.md").write_text(note)
        return note

    done = run(scales, rows, args.sweep, args.reps, args.topk, baseline, args.stages,
               None if args.only is None else tuple(args.only), unfit, save)
    if not done:  # every tiling asked for was unfit: nothing to write (save ran after each case)
        print(f"benchmarks/gate_tiles.py: no case was timed (unfit: {'; '.join(unfit) or 'none'}); nothing written",
              file=sys.stderr)
        return 2
    print(markdown(env, done, command, done[0].empty_us, args.reps, args.topk, unfit))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
