"""Teacher-forced full-vocabulary logits through the model's real serving path.

Fidelity compares the variant's next-token distribution with the baseline's at every
position of a fixed continuation (the baseline's greedy output). Asking the engine for
prompt logprobs over ``prompt + continuation`` would be wrong for that: such requests
keep every row's logits, so decoder trim never engages, and they bypass the prefix
cache, so encoder replay never engages either -- a bounded variant would look exact.

This driver instead runs the steps a served request runs: a prefill of the prompt
whose logits are "last" (trimmed when the variant trims), optionally after a prefix
hit (``warm``: the prompt's block-aligned prefix is computed first, snapshotted and
restored, so bounded replay engages exactly as it does on a prefix-cache hit), then
one decode step per forced token. Row j of the output is the distribution that
predicts ``forced[j]``. Requests are batched into one ``model.forward`` per step.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from validate.engines.errors import EngineError


def warm_prefix_tokens(n_prompt: int, block_tokens: int) -> int:
    """Length of the prefix a warm prefix cache would hold for an ``n_prompt``-token
    prompt: the last whole block that leaves at least one token to compute."""
    return ((n_prompt - 1) // block_tokens) * block_tokens


def teacher_forced_logits(model, prompts: Sequence[Sequence[int]],
                          forced: Sequence[Sequence[int]], *, warm: bool = False,
                          block_tokens: int = 64) -> list[torch.Tensor]:
    """Float32 logits ``[len(forced[i]), vocab]`` of each request (see module doc)."""
    from runtime.model import SeqChunk

    if len(prompts) != len(forced):
        raise EngineError(f"teacher forcing: {len(prompts)} prompts but {len(forced)} "
                          f"continuations")
    device = model.device
    states, feeds = [], []
    for k, prompt in enumerate(prompts):
        if not prompt:
            raise EngineError(f"teacher forcing: prompt {k} is empty")
        state = model.new_state()
        hit = warm_prefix_tokens(len(prompt), block_tokens) if warm else 0
        if hit > 0:
            primer = model.new_state()
            with torch.inference_mode():
                model.forward([SeqChunk(primer, torch.tensor(prompt[:hit], device=device),
                                        "last")])
            state = model.new_state(primer.export_prefix(hit))
        states.append(state)
        feeds.append(torch.as_tensor(list(prompt), dtype=torch.long)[state.num_computed:])
    rows: list[list[torch.Tensor]] = [[] for _ in prompts]
    with torch.inference_mode():
        todo = [k for k in range(len(prompts)) if len(forced[k]) > 0]
        if todo:
            outs = model.forward([SeqChunk(states[k], feeds[k].to(device), "last") for k in todo])
            for k, out in zip(todo, outs, strict=True):
                rows[k].append(out.logits[-1].float().cpu())
        step = 0
        while True:
            todo = [k for k in range(len(prompts)) if step + 1 < len(forced[k])]
            if not todo:
                break
            chunks = [SeqChunk(states[k], torch.tensor([int(forced[k][step])], device=device),
                               "last") for k in todo]
            for k, out in zip(todo, model.forward(chunks), strict=True):
                rows[k].append(out.logits[-1].float().cpu())
            step += 1
    vocab = model.config.vocab_size
    return [torch.stack(r) if r else torch.zeros(0, vocab) for r in rows]
