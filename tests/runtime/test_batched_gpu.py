"""GPU checks of the batched forward that the CPU cannot run: the model's roundings under
``torch.compile`` equal eager bit for bit, and the compiled forward equals the eager one
up to each row's first differing rounding (the same bound as the CPU parity tests)."""

from __future__ import annotations

import pytest
import torch

from runtime.batched.model import BatchedV41
from runtime.batched.rounding import FORMATS, round_to
from runtime.config import V41Config
from runtime.weights import V41Weights

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_compiled_rounding_equals_eager(fmt):
    gen = torch.Generator(device="cuda").manual_seed(0)
    # |x| <= ~2.7e3: NVFP4 without a global scale overflows its e4m3 scale (NaN) above 6 * 448
    x = torch.randn(4096, 256, device="cuda", generator=gen) * torch.logspace(
        -4, 2.5, 256, device="cuda")
    eager = round_to(x, fmt, True)
    compiled = torch.compile(lambda v: round_to(v, fmt, True))(x)
    assert torch.equal(eager, compiled)


def test_compiled_forward_equals_eager_on_most_rows():
    config = V41Config.preset("testbed")
    weights = V41Weights.random(config, seed=0, device="cuda", draw_on_device=True)
    model = BatchedV41(weights)
    gen = torch.Generator(device="cuda").manual_seed(1)
    tokens = torch.randint(0, config.vocab_size, (8, 512), device="cuda", generator=gen)
    with torch.no_grad():
        eager = model(tokens)
        compiled = torch.compile(model.forward)(tokens)
    rel = (compiled.logits - eager.logits).abs().amax(-1) / eager.logits.abs().amax(-1)
    assert float(rel.median()) <= 1e-5
    assert torch.equal(eager.expert_load, compiled.expert_load)
