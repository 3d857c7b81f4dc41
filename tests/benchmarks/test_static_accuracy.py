"""benchmarks/static_accuracy.py's measure without a GPU (``tiny`` on the CPU, reference
kernels): the per-row error against a float64 recompute, and the step alignment of the
teacher-forced loop. Held against an "oracle" that is the bf16 engine itself, the
engine path must come out exact (median 0, every token agreeing); a feed or logits
list one step out of line would not."""

from __future__ import annotations

import torch

from benchmarks.static_accuracy import kernel_set_run, rel_rows
from runtime.config import V41Config
from runtime.model import SeqChunk, V41Model
from runtime.options import RuntimeOptions
from runtime.weights import V41Weights


def test_rel_rows_is_max_abs_over_max_one_and_oracle():
    gen = torch.Generator().manual_seed(3)
    got, want = torch.randn(5, 40, generator=gen), torch.randn(5, 40, generator=gen) * torch.tensor([[0.1], [1], [3], [9], [0.5]])
    g, w = got.double(), want.double()
    expect = (g - w).abs().max(dim=-1).values / torch.maximum(w.abs().max(dim=-1).values, torch.ones(5, dtype=torch.float64))
    torch.testing.assert_close(rel_rows(got, want).double(), expect, rtol=1e-6, atol=0)


def test_the_engine_against_itself_is_exact():
    cfg = V41Config.preset("tiny")
    low = V41Weights.random(cfg, 1234, dtype=torch.bfloat16)
    gen = torch.Generator().manual_seed(5)
    prompts = [torch.randint(0, cfg.vocab_size, (n,), generator=gen) for n in (9, 17)]
    model = V41Model(low, RuntimeOptions(kernels="reference"))
    states = [model.new_state() for _ in prompts]
    outs = model.forward([SeqChunk(s, p) for s, p in zip(states, prompts, strict=True)])
    feeds, wants = [], []
    for _ in range(3):
        feed = torch.cat([o.logits[-1:].argmax(dim=-1) for o in outs])
        outs = model.forward([SeqChunk(s, feed[i : i + 1]) for i, s in enumerate(states)])
        feeds.append(feed)
        wants.append(torch.cat([o.logits for o in outs]).float())
    row = kernel_set_run(low, "reference", prompts, feeds, wants)
    assert row["tokens"] == 6 and row["engine_median"] == 0.0 and row["engine_agree"] == 6
    assert 0 <= row["static_agree"] <= 6 and row["static_median"] >= 0.0
