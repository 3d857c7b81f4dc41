"""The training loop: AdamW on cross-entropy of the worked answers + the indexer loss.

One optimizer step:

    view   = release round trip of every weight (straight-through)      [recipe.qat]
    out    = BatchedV41 forward of the [B, T] batch under bf16 autocast
    loss   = CE(answer tokens) + indexer_loss_weight * out.indexer_loss
    AdamW step (decoupled weight decay on matrices only), gradient clipping
    gate bias += bias_update_rate * sign(mean load - load)             (aux-loss free)

The run stops at ``recipe.steps`` or after ``max_seconds`` of this call, saving its state
(``training.state``) so the next call continues; a log line per ``log_every`` steps goes
to ``log.jsonl`` (step, losses, lr, gradient norm, per-task answer-token accuracy,
positions per second).
"""

from __future__ import annotations

import json
import time
from functools import partial
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from runtime.batched import BatchedV41
from runtime.config import V41Config
from runtime.tokenizer import ByteTokenizer
from runtime.weights import V41Weights
from training.batches import IGNORE, Batch, BatchSampler, Prefetcher
from training.qat import quantised_view
from training.recipe import Recipe
from training.schedule import lr_at
from training.state import Progress, has_state, load_state, save_state

LOG = "log.jsonl"
STATE = "state"


def is_gate_bias(name: str) -> bool:
    """The MoE gate bias only steers expert choice; it is balanced, not gradient-trained."""
    return name.endswith("ffn.gate.bias")


class _Forward(nn.Module):
    """The weights as the one submodule, so ``functional_call`` can swap in their
    quantised view while ``BatchedV41`` reads the same module objects."""

    def __init__(self, weights: V41Weights, model: BatchedV41):
        super().__init__()
        self.weights = weights
        self._model = (model,)  # a tuple: not registered as a submodule

    def forward(self, tokens: torch.Tensor):
        return self._model[0](tokens, straight_through=True)


def step_loss(forward: _Forward, recipe: Recipe, n_tasks: int, params: dict[str, torch.Tensor],
              tokens: torch.Tensor, labels: torch.Tensor, task: torch.Tensor):
    """(loss, answer CE, indexer loss, expert load, per-task [hits, supervised]) of a batch."""
    view = quantised_view(params) if recipe.qat else params
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=recipe.autocast == "bf16"):
        out = functional_call(forward, {f"weights.{k}": v for k, v in view.items()}, (tokens,))
    logits = out.logits.float()
    ce = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE)
    loss = ce + recipe.indexer_loss_weight * out.indexer_loss.float()
    with torch.no_grad():
        mask = labels != IGNORE
        hit = (logits.argmax(-1) == labels) & mask
        per_task = torch.zeros(n_tasks, 2, device=logits.device)
        per_task[:, 0].index_add_(0, task, hit.sum(1).float())
        per_task[:, 1].index_add_(0, task, mask.sum(1).float())
    return loss, ce.detach(), out.indexer_loss.detach(), out.expert_load, per_task


def new_weights(recipe: Recipe, device: str) -> V41Weights:
    config = V41Config.preset(recipe.preset)
    weights = V41Weights.random(config, recipe.init_seed, dtype=torch.float32, device=device)
    for name, param in weights.named_parameters():
        param.requires_grad_(not is_gate_bias(name))
    return weights


def make_optimizer(recipe: Recipe, weights: V41Weights, device: str) -> torch.optim.AdamW:
    decay, keep = [], []
    for param in weights.parameters():
        if param.requires_grad:
            (decay if param.ndim >= 2 else keep).append(param)
    groups = [{"params": decay, "weight_decay": recipe.weight_decay},
              {"params": keep, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=recipe.lr, betas=(recipe.beta1, recipe.beta2),
                             fused=torch.device(device).type == "cuda")


class Trainer:
    """Owns the weights, optimizer and sampler of one run folder."""

    def __init__(self, recipe: Recipe, run_dir: str | Path, device: str = "cuda"):
        self.recipe, self.device = recipe, device
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.weights = new_weights(recipe, device)
        self.model = BatchedV41(self.weights)
        self.forward = _Forward(self.weights, self.model)
        self.dense_forward = _Forward(self.weights, BatchedV41(
            self.weights, index_topk=recipe.dense_index_topk)) if recipe.dense_index_steps else None
        self.optimizer = make_optimizer(recipe, self.weights, device)
        self.tokenizer = ByteTokenizer(vocab_size=self.weights.config.vocab_size)
        self.sampler = BatchSampler(recipe.task_weights, recipe.lengths, recipe.tokens_per_batch,
                                    recipe.data_seed, self.tokenizer)
        self.step, self.elapsed = 0, 0.0
        self.sampler_state = self.sampler.state()  # after the last batch trained on
        self.params = dict(self.weights.named_parameters())
        self.biases = [(i, layer.ffn.gate.bias) for i, layer in enumerate(self.weights.layers)]
        # compiled as one region: QAT view + forward + loss fuse; params are inputs, so
        # the fresh view tensors of every step do not recompile
        wrap = partial(torch.compile, dynamic=False) if recipe.compile else (lambda f: f)
        n_tasks = len(self.sampler.tasks)
        self._loss = wrap(partial(step_loss, self.forward, recipe, n_tasks))
        self._dense_loss = (wrap(partial(step_loss, self.dense_forward, recipe, n_tasks))
                            if self.dense_forward is not None else None)
        if has_state(self.state_dir):
            progress = load_state(self.state_dir, self.weights, self.optimizer, recipe.digest())
            self.step, self.elapsed = progress.step, progress.elapsed_s
            self.sampler.restore(progress.sampler)
            self.sampler_state = progress.sampler

    @property
    def state_dir(self) -> Path:
        return self.run_dir / STATE

    def save(self) -> None:
        save_state(self.state_dir, self.weights, self.optimizer,
                   Progress(self.step, self.elapsed, self.sampler_state, self.recipe.digest()))

    def loss(self, batch: Batch) -> tuple[torch.Tensor, dict]:
        dense = self._dense_loss is not None and self.step < self.recipe.dense_index_steps
        fn = self._dense_loss if dense else self._loss
        if self.recipe.compile and self.recipe.compile_dynamic:
            for t in (batch.tokens, batch.labels):
                torch._dynamo.mark_dynamic(t, 0)
                torch._dynamo.mark_dynamic(t, 1)
            torch._dynamo.mark_dynamic(batch.task, 0)
        loss, ce, idx, load, per_task = fn(self.params, batch.tokens, batch.labels, batch.task)
        return loss, {"ce": ce, "indexer_loss": idx, "load": load, "per_task": per_task}

    def train_step(self, batch: Batch) -> dict:
        r = self.recipe
        lr = lr_at(r, self.step)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        loss, parts = self.loss(batch)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(
            [p for p in self.params.values() if p.requires_grad], r.grad_clip)
        self.optimizer.step()
        with torch.no_grad():
            load = parts["load"]  # [layers, experts]
            for i, bias in self.biases:
                bias.add_(r.bias_update_rate * torch.sign(load[i].mean() - load[i]))
        self.step += 1
        return {"loss": loss.detach(), "grad_norm": grad_norm.detach(), "lr": lr, **parts}

    def run(self, max_seconds: float | None = None) -> dict:
        """Train until the recipe's last step or ``max_seconds``; save; return a summary."""
        r = self.recipe
        call_started = started = time.perf_counter()
        last_log, positions, real = started, 0, 0
        log = (self.run_dir / LOG).open("a")
        stop_reason = "done"
        feed = Prefetcher(self.sampler)
        try:
            while self.step < r.steps:
                if max_seconds is not None and time.perf_counter() - call_started >= max_seconds:
                    stop_reason = "time"
                    break
                batch, self.sampler_state = feed.next()
                batch = batch.to(self.device)
                info = self.train_step(batch)
                positions += batch.tokens.numel()
                real += batch.real_tokens
                if self.step % r.log_every == 0 or self.step == r.steps:
                    now = time.perf_counter()
                    log.write(json.dumps(self._log_row(info, positions, real, now - last_log)) + "\n")
                    log.flush()
                    last_log, positions, real = now, 0, 0
                if self.step % r.save_every == 0:
                    self.elapsed += time.perf_counter() - started
                    started = time.perf_counter()
                    self.save()
        finally:
            feed.close()
            self.sampler.restore(self.sampler_state)  # the thread drew ahead of the last step
            log.close()
        self.elapsed += time.perf_counter() - started
        self.save()
        return {"step": self.step, "elapsed_s": self.elapsed, "stopped": stop_reason,
                "dropped_too_long": self.sampler.too_long}

    def _log_row(self, info: dict, positions: int, real: int, seconds: float) -> dict:
        per_task = info["per_task"].tolist()
        return {
            "step": self.step, "loss": float(info["loss"]), "ce": float(info["ce"]),
            "indexer_loss": float(info["indexer_loss"]), "lr": info["lr"],
            "grad_norm": float(info["grad_norm"]),
            "answer_token_acc": {t: (h / n if n else None)
                                 for t, (h, n) in zip(self.sampler.tasks, per_task, strict=True)},
            "positions_per_s": positions / seconds if seconds > 0 else None,
            "real_tokens_per_s": real / seconds if seconds > 0 else None,
            "elapsed_s": self.elapsed,
        }


def train(recipe: Recipe, run_dir: str | Path, device: str = "cuda",
          max_seconds: float | None = None) -> dict:
    return Trainer(recipe, run_dir, device).run(max_seconds)
