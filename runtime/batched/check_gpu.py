"""GPU checks of the batched forward that CPU CI cannot run (``python -m
runtime.batched.check_gpu``): the compiled forward against the eager one, and the
model's roundings under torch.compile against eager, bit for bit."""

from __future__ import annotations

import torch

from runtime.batched.model import BatchedV41
from runtime.batched.rounding import FORMATS, round_to
from runtime.config import V41Config
from runtime.weights import V41Weights


def main() -> None:
    device = "cuda"
    gen = torch.Generator(device=device).manual_seed(0)
    # |x| <= ~2.7e3: NVFP4 without a global scale overflows its e4m3 scale (NaN) above 6 * 448
    x = torch.randn(4096, 256, device=device, generator=gen) * torch.logspace(-4, 2.5, 256, device=device)
    for fmt in sorted(FORMATS):
        eager = round_to(x, fmt, True)
        compiled = torch.compile(lambda v, f=fmt: round_to(v, f, True))(x)
        print(f"round_to {fmt}: compiled == eager: {torch.equal(eager, compiled)} "
              f"(differing values: {int((eager != compiled).sum())}, NaN: {int(eager.isnan().sum())})")
    config = V41Config.preset("testbed")
    weights = V41Weights.random(config, seed=0, device=device, draw_on_device=True)
    model = BatchedV41(weights)
    tokens = torch.randint(0, config.vocab_size, (8, 512), device=device, generator=gen)
    with torch.no_grad():
        eager = model(tokens)
        compiled = torch.compile(model.forward)(tokens)
        rel = (compiled.logits - eager.logits).abs().amax(-1) / eager.logits.abs().amax(-1)
        print(f"model fp32 compiled vs eager: median row {rel.median():.2e}, max {rel.max():.2e}, "
              f"indexer_loss {float(eager.indexer_loss):.6f} vs {float(compiled.indexer_loss):.6f}, "
              f"expert_load equal: {torch.equal(eager.expert_load, compiled.expert_load)}")
        first = (rel > 1e-5).nonzero()
        print("first position beyond 1e-5 (row, pos):", first[:1].tolist())


if __name__ == "__main__":
    main()
