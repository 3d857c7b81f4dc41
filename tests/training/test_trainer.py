"""The trainer on the CPU: a resumed run equals an uninterrupted one bit for bit, the
loss goes down on a fixed batch, and the export is a loadable checkpoint in the released
naming whose weights are the trained ones."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch

from runtime.checkpoint import load_weights
from training.export import export_testbed
from training.loop import Trainer, is_gate_bias
from training.recipe import Recipe

SMALL = Recipe(task_weights={"testbed_lookup": 1.0, "testbed_arith": 1.0, "testbed_lookup_arith": 1.0},
               tokens_per_batch=2048, lengths=(512, 1024), steps=6, warmup_steps=1, lr=3e-3,
               autocast="none", log_every=1, save_every=100)


pytestmark = pytest.mark.usefixtures("one_thread")


def _params(trainer: Trainer) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in trainer.weights.named_parameters()}


def test_resumed_run_equals_uninterrupted(tmp_path):
    straight = Trainer(SMALL, tmp_path / "a", device="cpu")
    straight.run()
    first = Trainer(SMALL, tmp_path / "b", device="cpu")
    first.run(max_seconds=0.0)  # stops before its first step, saves
    assert first.step == 0
    part = Trainer(replace(SMALL), tmp_path / "b", device="cpu")
    while part.step < 3:
        part.train_step(part.sampler.next_batch())
        part.sampler_state = part.sampler.state()
    part.save()
    resumed = Trainer(SMALL, tmp_path / "b", device="cpu")
    assert resumed.step == 3
    resumed.run()
    a, b = _params(straight), _params(resumed)
    assert [n for n in a if not torch.equal(a[n], b[n])] == []
    rows = [json.loads(x) for x in (tmp_path / "a" / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(1, SMALL.steps + 1))


def test_loss_decreases_and_gate_bias_moves_without_gradient(tmp_path):
    trainer = Trainer(replace(SMALL, steps=12, warmup_steps=1), tmp_path, device="cpu")
    batch = trainer.sampler.next_batch()
    bias_before = {n: p.detach().clone() for n, p in trainer.weights.named_parameters()
                   if is_gate_bias(n)}
    first = float(trainer.train_step(batch)["ce"])
    for _ in range(10):
        last = float(trainer.train_step(batch)["ce"])
    assert last < 0.7 * first
    for name, p in trainer.weights.named_parameters():
        if is_gate_bias(name):
            assert p.grad is None
            assert not torch.equal(p.detach(), bias_before[name])


def test_export_is_the_trained_model(tmp_path):
    trainer = Trainer(replace(SMALL, steps=2), tmp_path / "run", device="cpu")
    trainer.run()
    recipe_file = tmp_path / "recipe.toml"
    recipe_file.write_text("# test recipe\n")
    manifest = export_testbed(tmp_path / "run", trainer.recipe, recipe_file, tmp_path / "out")
    loaded = dict(load_weights(tmp_path / "out", dtype=torch.float32).named_parameters())
    from training.qat import release_roundtrip

    for name, p in trainer.weights.named_parameters():
        assert torch.equal(loaded[name], release_roundtrip(name, p)), name
    assert manifest["steps"] == 2 and manifest["recipe_digest"] == trainer.recipe.digest()
    import hashlib

    for fname, digest in manifest["sha256"].items():
        assert hashlib.sha256((tmp_path / "out" / fname).read_bytes()).hexdigest() == digest
    assert (tmp_path / "out" / "loss_curve.png").read_bytes()[:4] == b"\x89PNG"


def test_dense_warmup_selects_more_entries_then_the_served_top_k(tmp_path):
    """The warm-up attends to up to dense_index_topk entries; after it the config's top-k."""
    from runtime.batched import BatchedV41

    recipe = replace(SMALL, dense_index_steps=2, dense_index_topk=256)
    trainer = Trainer(recipe, tmp_path, device="cpu")
    assert trainer.dense_forward._model[0].config.index_topk == 256
    assert trainer.model.config.index_topk == trainer.weights.config.index_topk == 32
    batch = trainer.sampler.next_batch()
    with torch.no_grad():
        sparse = BatchedV41(trainer.weights)(batch.tokens).logits
        dense = BatchedV41(trainer.weights, index_topk=256)(batch.tokens).logits
        assert not torch.equal(sparse, dense)  # long prompts: more than 32 entries to pick from
        short = batch.tokens[:, :30]  # at most 30 compressed entries per layer: nothing to drop
        assert torch.equal(BatchedV41(trainer.weights)(short).logits,
                           BatchedV41(trainer.weights, index_topk=256)(short).logits)
        at_dense = float(trainer.loss(batch)[0])
        trainer.step = 2
        at_sparse = float(trainer.loss(batch)[0])
    assert at_dense != at_sparse
