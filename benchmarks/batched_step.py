"""Training-step speed of the batched forward: tokens/s of forward + backward.

    PYTHONPATH=. python benchmarks/batched_step.py --device cuda --batch 64 --seq 1024 --bf16 --compile

Random testbed weights (float32 master weights, every parameter trainable), loss =
cross-entropy + indexer_loss, as the trainer runs it; prints tokens/s and peak memory.
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F

from runtime.batched.model import BatchedV41
from runtime.config import V41Config
from runtime.weights import V41Weights


def step_fn(model: BatchedV41, bf16: bool):
    def step(tokens: torch.Tensor) -> torch.Tensor:
        with torch.autocast(tokens.device.type, dtype=torch.bfloat16, enabled=bf16):
            out = model(tokens, straight_through=True)
            lm = F.cross_entropy(out.logits[:, :-1].flatten(0, 1), tokens[:, 1:].flatten())
        loss = lm + out.indexer_loss
        loss.backward()
        return loss.detach()

    return step


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="testbed")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--profile", action="store_true", help="print the top kernels of one step")
    args = ap.parse_args()
    config = V41Config.preset(args.preset).replace(torch_dtype="float32")
    weights = V41Weights.random(config, seed=0, device=args.device, draw_on_device=args.device != "cpu")
    for p in weights.parameters():
        p.requires_grad_(True)
    model = BatchedV41(weights)
    step = step_fn(model, args.bf16)
    if args.compile:
        step = torch.compile(step)
    tokens = torch.randint(0, config.vocab_size, (args.batch, args.seq), device=args.device)
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    t0 = time.perf_counter()
    step(tokens)  # warm-up (and compile)
    sync()
    print(f"first step {time.perf_counter() - t0:.1f}s", flush=True)
    t0 = time.perf_counter()
    for _ in range(args.steps):
        weights.zero_grad(set_to_none=True)
        loss = step(tokens)
    sync()
    dt = (time.perf_counter() - t0) / args.steps
    tok = args.batch * args.seq
    mem = torch.cuda.max_memory_allocated() / 2**30 if args.device.startswith("cuda") else float("nan")
    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            weights.zero_grad(set_to_none=True)
            step(tokens)
            sync()
        print(prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=30, max_name_column_width=60))
    print(f"{args.preset} B={args.batch} T={args.seq} bf16={args.bf16} compile={args.compile}: "
          f"{dt * 1e3:.1f} ms/step, {tok / dt:,.0f} tokens/s, peak {mem:.1f} GiB, loss {float(loss):.3f}")


if __name__ == "__main__":
    main()
