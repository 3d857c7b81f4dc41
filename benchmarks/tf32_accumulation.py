"""Why mHC's "tf32x2" projection measured 10x further from a float64 oracle than "tf32x3"
(6.1e-6 vs 5.0e-7 on the H200, runtime/kernels/mhc_tiles.py) although both compute the same
two TF32 products of X' (exact in TF32) with fn's head and remainder: an emulation on the
CPU of the orders the two sum their products in.

Each tensor-core step is emulated as products that are exact in float32 (TF32 x TF32 fits
24 bits) added one by one into its float32 accumulator:

- "running sum" (tf32x2 before session 21): ``m = dot(x, lo, m); m = dot(x, hi, m)``, every
  product added straight into the sum over all of D;
- "per tile, then added" (how Triton lowers one tf32x3 ``dot``, and "tf32x2" since
  session 21): each D tile's products summed from zero, that tile sum added to the running
  sum (a blocked sum: the running sum takes one rounding per tile, not one per product);
- "two running sums": heads and remainders in separate running sums, added at the end.

The shape is the mid site's projection at 64 rows: x [64, 4 x 2048] (bf16 values), fn
[4 x 2048, 32] (N(0, 0.02)), tiles of 16 columns. Error: max |result - float64| / max |float64|.

    PYTHONPATH=. python benchmarks/tf32_accumulation.py --out benchmarks/results

Writes tf32_accumulation_cpu.json and .md.
"""

from __future__ import annotations

import torch

from benchmarks.records import header, seeded_cpu_main
from runtime.kernels.mhc import tf32_split

ORDERS = ("running sum", "per tile, then added", "two running sums")


def add_products(acc: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """acc + a @ b in float32, the products added one k at a time (each exact in float32)."""
    for k in range(a.shape[1]):
        acc = acc + a[:, k:k + 1] * b[k:k + 1, :]
    return acc


def project(order: str, x: torch.Tensor, hi: torch.Tensor, lo: torch.Tensor, tile: int) -> torch.Tensor:
    m = torch.zeros(x.shape[0], hi.shape[1])
    m_lo = torch.zeros_like(m)
    for d0 in range(0, x.shape[1], tile):
        a, b_hi, b_lo = x[:, d0:d0 + tile], hi[d0:d0 + tile], lo[d0:d0 + tile]
        if order == "running sum":
            m = add_products(add_products(m, a, b_lo), a, b_hi)
        elif order == "per tile, then added":
            m = m + add_products(add_products(torch.zeros_like(m), a, b_lo), a, b_hi)
        else:
            m_lo, m = add_products(m_lo, a, b_lo), add_products(m, a, b_hi)
    return m + m_lo


def measure(seed: int, rows: int = 64, width: int = 4 * 2048, cols: int = 32, tile: int = 16) -> list[dict]:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, width, generator=gen).bfloat16().float()
    fn = torch.randn(width, cols, generator=gen) * 0.02
    hi, lo = tf32_split(fn)  # the kernel's own host split
    exact = x.double() @ fn.double()
    scale = exact.abs().max().item()
    return [{"order": order, "error": (project(order, x, hi, lo, tile).double() - exact).abs().max().item() / scale}
            for order in ORDERS]


def markdown(doc: dict) -> str:
    lines = header("TF32 projection: the error of three summation orders (CPU emulation)", doc) + [
        f"x [64, 8192] bf16 values, fn [8192, 32] N(0, 0.02) as TF32 head + remainder, tiles of 16; seeds "
        f"{doc['seeds']}. Error: max |result - float64| / max |float64|, the largest over the seeds.", "",
        "| order | error |", "|---|---:|"]
    for order in ORDERS:
        lines.append(f"| {order} | {max(r['error'] for r in doc['rows'] if r['order'] == order):.2e} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    return seeded_cpu_main("benchmarks/tf32_accumulation.py", "tf32_accumulation_cpu", __doc__.split("\n\n")[0], measure, markdown, argv)


if __name__ == "__main__":
    raise SystemExit(main())
