"""Is the fused mHC site's mixing closer to the exact X' with fused multiply-adds or without?
A CPU emulation of its two float32 forms against a float64 recompute.

Why: with ``MhcPolicy.fma_mix_from`` at 8 rows (session 41) the decode sweep mixes X'_j =
post_j * out + sum_i comb[i, j] * X_i as a chain of fused multiply-adds, where the
reference (``runtime.mhc.expand``) rounds every product and every add to float32. Rounded
to bf16, the two differ by one ulp where the float32 value sits near a rounding boundary:
on the H100 the site's max relative error against the reference went from 2.4e-7 to
2.6e-4 .. 2.3e-3 at ``mid`` 8-64 rows (tile_sweep_h100_session41_mhc_fma_mix.md). That is
a difference from the reference, not by itself an error: this measures which form lands
on the correctly rounded bf16 X' more often.

- "separate": the reference op itself (``runtime.mhc.expand`` on float32 streams holding
  the bf16 values), each product and add rounded to float32;
- "fma": the kernel's ``FMA_MIX`` chain, ``fma(q_j, o, fma(c3j, x3, fma(c2j, x2,
  fma(c1j, x1, c0j * x0))))``, each fma emulated as the float64 sum of an exact float64
  product and a float32 value, rounded to float32 (a double rounding that can differ from
  a true fma only when the float64 sum falls exactly on a float32 midpoint);
- "exact": all in float64, then rounded to the nearest bf16 (the nearest of torch's
  rounding and its two bf16 neighbours, so no double rounding decides it).

Inputs as a site sees them: X and out bf16 N(0, 1), post = 2 sigmoid(N(0, 1)), comb a
Sinkhorn-normalised 4 x 4 (``runtime.mhc.sinkhorn``, 20 iterations), per row.

    PYTHONPATH=. python benchmarks/fma_mixing.py --out benchmarks/results

Writes fma_mixing_cpu.json and .md.
"""

from __future__ import annotations

import torch

from benchmarks.records import header, seeded_cpu_main
from runtime.mhc import HcMix, expand, sinkhorn

FORMS = ("separate", "fma")


def fma32(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """float32 fma(a, b, c): a * b is exact in float64 (24 + 24 bits), the add rounded once
    to float64 and then to float32."""
    return (a.double() * b.double() + c.double()).float()


def mix(form: str, x: torch.Tensor, out: torch.Tensor, post: torch.Tensor, comb: torch.Tensor) -> torch.Tensor:
    """X' [T, 4, D] in float32 (before the bf16 store). x [T, 4, D], out [T, D] float32
    holding bf16 values, post [T, 4], comb [T, 4, 4] float32."""
    if form == "separate":  # the reference; it reads no pre
        return expand(out, x, HcMix(pre=torch.zeros_like(post), post=post, comb=comb))
    cols = []
    for j in range(4):
        s = comb[:, 0, j, None] * x[:, 0]
        for i in (1, 2, 3):
            s = fma32(comb[:, i, j, None], x[:, i], s)
        cols.append(fma32(post[:, j, None], out, s))
    return torch.stack(cols, dim=1)


def nearest_bf16(exact: torch.Tensor) -> torch.Tensor:
    """The bf16 value nearest to each float64 value (ties: torch's own rounding)."""
    cand = exact.to(torch.bfloat16)
    up = torch.nextafter(cand, torch.full_like(cand, float("inf")))
    down = torch.nextafter(cand, torch.full_like(cand, float("-inf")))
    best = cand.double()
    for other in (up.double(), down.double()):
        closer = (other - exact).abs() < (best - exact).abs()
        best = torch.where(closer, other, best)
    return best


def measure(seed: int, rows: int = 64, d: int = 2048) -> list[dict]:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, 4, d, generator=gen).bfloat16().float()
    out = torch.randn(rows, d, generator=gen).bfloat16().float()
    post = 2 * torch.randn(rows, 4, generator=gen).sigmoid()
    comb = sinkhorn(torch.randn(rows, 4, 4, generator=gen), 20, 1e-6)
    exact = (comb.double().transpose(1, 2).unsqueeze(-1) * x.double().unsqueeze(1)).sum(2) \
        + post.double().unsqueeze(-1) * out.double().unsqueeze(1)
    target = nearest_bf16(exact)
    scale = exact.abs().max().item()
    result, stored = [], {}
    for form in FORMS:
        y = mix(form, x, out, post, comb)
        stored[form] = y.to(torch.bfloat16)
        result.append({"form": form, "elements": exact.numel(),
                       "not_nearest_bf16": int((stored[form].double() != target).sum()),
                       "float32_error": (y.double() - exact).abs().max().item() / scale})
    result.append({"form": "fma vs separate", "elements": exact.numel(),
                   "bf16_differ": int((stored["fma"] != stored["separate"]).sum())})
    return result


def markdown(doc: dict) -> str:
    rows = doc["rows"]
    total = sum(r["elements"] for r in rows if r["form"] == "separate")
    lines = header("mHC mixing: fused multiply-adds against separate roundings (CPU emulation)", doc) + [
        f"X' of 64 rows x 4 streams x 2,048 (the ``mid`` site), seeds {doc['seeds']}: {total:,} elements. "
        "not nearest bf16: stored X' elements that are not the bf16 value nearest to the float64 X'; "
        "float32 error: max |X' before the store - float64| / max |float64|, the largest over the seeds.", "",
        "| form | not nearest bf16 | share | float32 error |", "|---|---:|---:|---:|"]
    for form in FORMS:
        mine = [r for r in rows if r["form"] == form]
        bad = sum(r["not_nearest_bf16"] for r in mine)
        lines.append(f"| {form} | {bad:,} | {bad / total:.2e} | {max(r['float32_error'] for r in mine):.2e} |")
    differ = sum(r["bf16_differ"] for r in rows if r["form"] == "fma vs separate")
    lines += ["", f"Stored X' that differ between the two forms: {differ:,} of {total:,} ({differ / total:.2e})."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    return seeded_cpu_main("benchmarks/fma_mixing.py", "fma_mixing_cpu", __doc__.split("\n\n")[0], measure, markdown, argv)


if __name__ == "__main__":
    raise SystemExit(main())
