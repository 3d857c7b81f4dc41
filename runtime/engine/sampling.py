"""Next-token choice and logprobs from one row of logits.

Why per-request generators: a request's random draws must not depend on which other
requests share its batch, so each request owns a ``torch.Generator`` and draws exactly
one uniform number per step, whatever its settings. The draw is turned into a token by
inverting the CDF of the filtered distribution (float64 on the CPU), so the result is
a pure function of (logits row, settings, generator state).

Ties are broken towards the lowest token id everywhere (greedy argmax, top-k/top-p
ordering, top-k logprobs), so results do not depend on a sort implementation.
"""

from __future__ import annotations

import torch

from runtime.engine.requests import TokenLogprob


def new_generator(seed: int) -> torch.Generator:
    g = torch.Generator(device="cpu")
    g.manual_seed(int(seed))
    return g


def _descending(values: torch.Tensor) -> torch.Tensor:
    """Indices of ``values`` [V] from largest to smallest, equal values by ascending id."""
    return torch.sort(values, descending=True, stable=True).indices


def greedy(logits: torch.Tensor) -> int:
    """Argmax of a [V] row; the lowest id wins a tie (compared in float64, exact for
    float32 rows and for the float64 rows of ``penalties``)."""
    return int(_descending(logits.double())[0])


def filtered_probs(logits: torch.Tensor, temperature: float, top_k: int = 0,
                   top_p: float = 1.0, min_p: float = 0.0) -> torch.Tensor:
    """The sampling distribution [V] (float64): softmax(logits / T), then min-p (drop the
    tokens less likely than ``min_p`` times the most likely one, renormalised: vLLM's
    order, min-p before top-k/top-p), then top-k, then top-p (keep the smallest set of
    most likely tokens whose mass reaches ``top_p``), renormalised."""
    z = logits.detach().to("cpu", torch.float64) / temperature
    probs = torch.softmax(z, dim=-1)
    if min_p > 0:
        probs = torch.where(probs >= min_p * probs.max(), probs, torch.zeros_like(probs))
        probs = probs / probs.sum()
    order = _descending(probs)
    keep = torch.ones_like(probs, dtype=torch.bool)
    if top_k > 0:
        keep[order[top_k:]] = False
    if top_p < 1.0:
        sorted_p = probs[order] * keep[order]
        mass_before = torch.cumsum(sorted_p, 0) - sorted_p
        drop = mass_before >= top_p
        drop[0] = False
        keep[order[drop]] = False
    probs = probs * keep
    return probs / probs.sum()


def sample(logits: torch.Tensor, temperature: float, generator: torch.Generator,
           top_k: int = 0, top_p: float = 1.0, min_p: float = 0.0) -> int:
    """One token from a [V] row. Always draws exactly one uniform from ``generator``."""
    u = float(torch.rand((), generator=generator, dtype=torch.float64))
    if temperature == 0:
        return greedy(logits)
    probs = filtered_probs(logits, temperature, top_k, top_p, min_p)
    cdf = torch.cumsum(probs, 0)
    idx = int(torch.searchsorted(cdf, torch.tensor([u * float(cdf[-1])], dtype=torch.float64),
                                 right=True)[0])
    idx = min(idx, probs.numel() - 1)
    # Never return a token whose probability was filtered to zero (float edge at the top).
    while probs[idx] == 0 and idx > 0:
        idx -= 1
    return idx


def log_softmax(logits: torch.Tensor) -> torch.Tensor:
    """float32 log-probabilities of a [..., V] tensor of logits."""
    return torch.log_softmax(logits.detach().float(), dim=-1)


def token_logprob(logprobs_row: torch.Tensor, token_id: int, k: int) -> TokenLogprob:
    """The chosen token's logprob and the top-``k`` (ids, logprobs) of a [V] row."""
    top_ids: tuple[int, ...] = ()
    top_lp: tuple[float, ...] = ()
    if k > 0:
        order = _descending(logprobs_row)[:k]
        top_ids = tuple(int(i) for i in order)
        top_lp = tuple(float(logprobs_row[i]) for i in order)
    value = logprobs_row[token_id]
    rank = int((logprobs_row > value).sum()) + 1
    return TokenLogprob(int(token_id), float(value), top_ids, top_lp, rank)
