"""What a request's sampling settings do to a row of logits before a token is chosen:
``logit_bias``, ``min_tokens``, and vLLM's three penalties, in vLLM's order and meaning.

1. ``logit_bias`` (OpenAI): ``bias`` is added to the logit of its token id.
2. ``min_tokens`` (vLLM): until that many tokens are out, EOS and the request's stop
   token ids get ``-inf``, so generation cannot end on a token before then.
3. ``repetition_penalty`` p (vLLM, after CTRL): a token seen in the prompt *or* the output
   has its logit divided by p when positive, multiplied by p otherwise (p = 1: no-op).
4. ``frequency_penalty`` f and ``presence_penalty`` r (OpenAI): a token generated c times
   so far loses ``f * c + r * (c > 0)``; only the *output* counts, not the prompt
   (f = r = 0: no-op).

The result is float64 on the CPU (the sampler works in float64), so a recompute from the
engine's raw logits gives the same numbers. Logprobs are not taken from it: like vLLM's
default ``raw_logprobs``, reported logprobs are the model's own distribution.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

import torch


def needs_adjusting(request) -> bool:
    """False when every setting is its no-op value (the row is used as it is)."""
    return bool(request.logit_bias or request.min_tokens or request.presence_penalty
                or request.frequency_penalty or request.repetition_penalty != 1.0)


def adjusted_logits(row: torch.Tensor, request, prompt: Sequence[int], output: Sequence[int],
                    end_ids: Iterable[int]) -> torch.Tensor:
    """``row`` [V] with the request's bias, ``min_tokens`` ban and penalties applied
    (see the module doc); ``end_ids`` are the ids that would end generation (EOS, stop
    token ids)."""
    z = row.detach().to("cpu", torch.float64).clone()
    for token_id, bias in request.logit_bias:
        z[token_id] += bias
    if len(output) < request.min_tokens:
        banned = [t for t in end_ids if 0 <= t < z.numel()]
        if banned:
            z[banned] = float("-inf")
    p = request.repetition_penalty
    if p != 1.0:
        seen = torch.zeros(z.numel(), dtype=torch.bool)
        ids = list(prompt) + list(output)
        if ids:
            seen[torch.tensor(ids, dtype=torch.long)] = True
        scaled = torch.where(z > 0, z / p, z * p)
        z = torch.where(seen, scaled, z)
    if output and (request.frequency_penalty or request.presence_penalty):
        counts = Counter(output)
        ids = torch.tensor(list(counts), dtype=torch.long)
        c = torch.tensor([counts[int(i)] for i in ids], dtype=torch.float64)
        z[ids] -= request.frequency_penalty * c + request.presence_penalty
    return z
