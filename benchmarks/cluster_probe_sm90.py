"""Does this Triton compile a reduction across a thread-block cluster for sm_90?

Why: the fused gate and mHC sum their D splits through an atomic ticket (the last program
of a row block adds the others' partials), a floor of a few microseconds at decode
(runtime/kernels/gate_tiles.py). A cluster's CTAs could add them through distributed
shared memory instead, and Triton launches clusters with ``num_ctas > 1``. This compiles
the gate's first step at ``mid``'s decode shape, [32 experts, 2048] x [2048] -> [32]
scores and then their max, for 1, 2 and 4 CTAs a program, and prints which compile (with
how Triton laid the [E, D] tile over the CTAs, and the PTX's cluster operations) and,
for those that do not, the pass that failed and its first error. Static, on a CPU (the
ptxas in Triton's wheel, through benchmarks/sm90_compile.py, which aligns the pointers as a
launch does); no GPU is needed and nothing is timed.

    PYTHONPATH=<triton 3.6 dir>:. python benchmarks/cluster_probe_sm90.py
"""

from __future__ import annotations

import re
import subprocess
import sys

import triton
import triton.language as tl

from benchmarks.sm90_compile import compile_sm90


@triton.jit
def scores(x_ptr, w_ptr, out_ptr, D: tl.constexpr, E: tl.constexpr, TO_ONE: tl.constexpr):
    d = tl.arange(0, D)
    e = tl.arange(0, E)
    x = tl.load(x_ptr + d).to(tl.float32)                                # [D]
    w = tl.load(w_ptr + e[:, None] * D + d[None, :]).to(tl.float32)     # [E, D]
    s = tl.sum(w * x[None, :], axis=1)                                   # [E]
    if TO_ONE:
        tl.store(out_ptr, tl.max(s, axis=0))
    else:
        tl.store(out_ptr + e, s)


def compile_one(num_ctas: int, reduction: str) -> str:
    kernel = compile_sm90(scores, {"x_ptr": "*bf16", "w_ptr": "*bf16", "out_ptr": "*fp32"},
                          {"D": 2048, "E": 32, "TO_ONE": reduction == "max", "num_warps": 4, "num_ctas": num_ctas})
    ptx = kernel.asm["ptx"]
    # how the [E, D] tile is laid over the cluster's CTAs: bases [1, 0], [2, 0] split E; [0, 1] D
    split = re.search(r"sizePerThread = \[\d+, \d+\].*CGALayout = (\[(?:\[[^\]]*\](?:, )?)*\])",
                      kernel.asm["ttgir"])
    return (f"ok (PTX: {ptx.count('mapa')} mapa, {ptx.count('barrier.cluster')} cluster barriers; "
            f"[E, D] over the CTAs: {split.group(1) if split else 'one CTA'})")


def probe(num_ctas: int, reduction: str) -> str:
    """One compile in a process of its own: a failing MLIR pass can abort the process."""
    done = subprocess.run([sys.executable, __file__, "--one", str(num_ctas), reduction],
                          capture_output=True, text=True, timeout=300)
    if done.returncode == 0:
        return done.stdout.strip().splitlines()[-1]
    text = done.stdout + done.stderr
    failed_pass = re.search(r"while executing \[`(\w+)`", text)
    first_error = re.search(r"error: (.+)", text)
    return (f"error in {failed_pass.group(1) if failed_pass else '?'}: "
            f"{first_error.group(1).strip() if first_error else text.strip().splitlines()[-1]}")


def main(argv: list[str]) -> int:
    if argv[:1] == ["--one"]:
        print(compile_one(int(argv[1]), argv[2]))
        return 0
    print(f"triton {triton.__version__}, sm_90, scores [32, 2048] -> [32] (sum) and -> one value (max)")
    print("| CTAs a program | reduction | compile |")
    print("|---:|---|---|")
    for num_ctas in (1, 2, 4):
        for reduction in ("sum", "max"):
            print(f"| {num_ctas} | {reduction} | {probe(num_ctas, reduction)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
