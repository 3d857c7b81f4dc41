"""How far the fused mHC site's coefficients (pre, post, comb) are from a float64 oracle,
with each projection mode of runtime/kernels/mhc_tiles.py (float32 FMA as ``tl.dot``
"ieee" or without a dot "fma", three TF32 products "tf32x3", two on fn split on the host
"tf32x2", three bf16 ones on fn's three bf16 parts "bf16x3"; in the mixing loop or on X'
re-read), next to the float32
reference op, on the same bf16 streams (what the GPU parity test's "same
streams" check compares). Two cases, as in that test: the site alone, and the site that
first applies the previous site's mixing (``out``, ``prev``), whose coefficients are then
compared with the oracle on each variant's own mixed streams.

    PYTHONPATH=. python benchmarks/mhc_precision.py --out benchmarks/results

Writes mhc_precision_<gpu>.json and .md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from benchmarks.kernels import environment
from benchmarks.records import command_line, gpu_tag
from runtime.config import V41Config
from runtime.kernels.mhc import FusedMhc
from runtime.kernels.mhc_tiles import PROJECTIONS, MhcPolicy
from runtime.kernels.reference import REFERENCE_OPS
from runtime.mhc import HcMix, sinkhorn
from runtime.numerics import Numerics


def oracle(streams, fn, base, scale, c: V41Config):
    """The site's coefficients in float64 from the same streams."""
    t, hc, _ = streams.shape
    flat = streams.reshape(t, -1).double()
    flat = flat * torch.rsqrt(flat.pow(2).mean(-1, keepdim=True) + c.rms_norm_eps)
    m = flat @ fn.double().T
    b, s = base.double(), scale.double()
    pre = torch.sigmoid(m[:, :hc] * s[0] + b[:hc]) + c.hc_eps
    post = 2.0 * torch.sigmoid(m[:, hc:2 * hc] * s[1] + b[hc:2 * hc])
    comb = sinkhorn((m[:, 2 * hc:] * s[2] + b[2 * hc:]).reshape(t, hc, hc), c.hc_sinkhorn_iters, c.hc_eps)
    return {"pre": pre, "post": post, "comb": comb}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    parser.add_argument("--rows", type=int, default=2048)
    parser.add_argument("--seeds", type=int, default=6)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("benchmarks/mhc_precision.py: needs a CUDA GPU", file=sys.stderr)
        return 2
    c = V41Config.preset("mid")
    d, t = c.hidden_size, args.rows
    variants = {"reference (torch float32)": None}
    for projection in PROJECTIONS:  # projected in the mixing loop (a dot's X' pinned: MhcPolicy.pin_mix)
        variants[f"fused {projection}"] = FusedMhc(MhcPolicy(projection=projection, decode_projection=projection,
                                                             reload_d=0, tail_reload_d=0))
    for projection in ("tf32x3", "tf32x2", "bf16x3"):
        variants[f"fused {projection} reload"] = FusedMhc(MhcPolicy(projection=projection, decode_projection=projection,
                                                                    reload_d=128, tail_reload_d=128))
    variants["fused tf32x3 not pinned"] = FusedMhc(MhcPolicy(projection="tf32x3", decode_projection="tf32x3",
                                                             reload_d=0, tail_reload_d=0, pin_mix=False))
    cases = ("site alone", "after the previous mixing")
    worst = {(case, name): {"pre": 0.0, "post": 0.0, "comb": 0.0} for case in cases for name in variants}
    for seed in range(args.seeds):
        g = torch.Generator(device="cuda").manual_seed(seed)
        streams = torch.randn(t, 4, d, generator=g, device="cuda").bfloat16()
        fn = torch.randn(24, 4 * d, generator=g, device="cuda") * (4 * d) ** -0.5
        base = torch.randn(24, generator=g, device="cuda") * 0.5
        scale = torch.randn(3, generator=g, device="cuda").abs() + 0.5
        pre_shift = torch.rand(t, 4, generator=g, device="cuda")
        norm_w = torch.randn(d, generator=g, device="cuda").bfloat16()
        out = torch.randn(t, d, generator=g, device="cuda").bfloat16()
        prev = HcMix(torch.randn(t, 4, generator=g, device="cuda").sigmoid(),
                     2 * torch.randn(t, 4, generator=g, device="cuda").sigmoid(),
                     torch.softmax(torch.randn(t, 4, 4, generator=g, device="cuda"), -1))
        for case, (site_out, site_prev) in zip(cases, [(None, None), (out, prev)], strict=True):
            for name, op in variants.items():
                fn_call = op if op is not None else REFERENCE_OPS["mhc"]
                mixed, mix, _ = fn_call(streams, site_out, site_prev, pre_shift, fn, base, scale, norm_w, c,
                                        Numerics())
                want = oracle(mixed if site_prev is not None else streams, fn, base, scale, c)
                for k, so_far in worst[case, name].items():
                    err = float((getattr(mix, k).double() - want[k]).abs().max())
                    worst[case, name][k] = max(so_far, err)
    env = environment()
    env["allow_tf32"] = torch.backends.cuda.matmul.allow_tf32
    command = command_line("benchmarks/mhc_precision.py", argv or sys.argv[1:])
    lines = ["# mHC coefficients vs a float64 oracle", "",
             f"- GPU: {env['gpu']}; torch {env['torch']}, triton {env['triton']}; torch matmul TF32: "
             f"{env['allow_tf32']}", f"- Command: `{command}`",
             f"- mid, {t} rows of bf16 streams, {args.seeds} seeds; max |coefficient - float64| over all.", "",
             "| case | variant | pre | post | comb |", "|---|---|---:|---:|---:|"]
    lines += [f"| {case} | {name} | {w['pre']:.2e} | {w['post']:.2e} | {w['comb']:.2e} |"
              for (case, name), w in worst.items()]
    tag = gpu_tag(env["gpu"])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"mhc_precision_{tag}.json").write_text(json.dumps(
        {"environment": env, "command": command, "rows": t, "seeds": args.seeds, "max_abs_error": [{"case": case, "variant": name, **w} for (case, name), w in worst.items()]},
        indent=2) + "\n")
    (args.out / f"mhc_precision_{tag}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
