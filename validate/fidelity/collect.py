"""Produce per-prompt fidelity records by running the baseline and the variant.

Both paths teacher-force the *baseline's greedy output*: the baseline answers each
generate request greedily, then both models score exactly those tokens after the same
prompt. Multiple-choice requests are scored on each choice's continuation (tokenized
as lm-eval does), one record per choice (``item_id#choiceK``).

- ``exact_fidelity`` (builtin engines): full-vocabulary logits from the real serving
  path (prefill with trim, prefix hit with replay in warm mode, decode steps; see
  ``validate.engines.builtin_teacher``), KL exact.
- ``topk_fidelity`` (OpenAI-compatible endpoints): echo requests with top-k
  logprobs, KL by the lower-bound approximation of ``validate.fidelity.topk``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from tasks.request import Request
from validate.engines.base import EngineResult
from validate.engines.builtin_requests import encode_pair
from validate.fidelity.errors import FidelityError
from validate.fidelity.metrics import kl_per_token, top1_agreement
from validate.fidelity.summary import PromptFidelity
from validate.fidelity.topk import coarse_kl, known_logprobs, top1_of


def greedy_copy(request: Request, max_new_tokens: int | None) -> Request:
    """The request decoded greedily (and at most ``max_new_tokens`` long)."""
    gen = request.gen
    limit = gen.max_gen_toks if max_new_tokens is None else min(gen.max_gen_toks, max_new_tokens)
    return replace(request, gen=replace(gen, do_sample=False, temperature=0.0,
                                        max_gen_toks=limit))


@dataclass(frozen=True)
class Targets:
    """What both models are teacher-forced on: per label, prompt ids and forced ids."""

    labels: tuple[str, ...]
    prompts: tuple[tuple[int, ...], ...]
    forced: tuple[tuple[int, ...], ...]


def exact_targets(base, requests: Sequence[Request], *,
                  max_new_tokens: int | None = None) -> Targets:
    """The baseline's greedy outputs (generate requests) and each choice's continuation
    (loglikelihood requests), as token ids, from a ``BuiltinEngine``."""
    labels, prompts, forced = [], [], []
    generate = [greedy_copy(r, max_new_tokens) for r in requests if r.kind == "generate"]
    for outcome in base.run(generate) if generate else []:
        if isinstance(outcome, EngineResult) and outcome.engine.get("output_token_ids"):
            labels.append(outcome.request.item_id)
            prompts.append(tuple(base.encode(outcome.request)))
            forced.append(tuple(outcome.engine["output_token_ids"]))
    for r in requests:
        if r.kind == "loglikelihood" and r.prompt is not None:
            for k, cont in enumerate(r.continuations):
                pair = encode_pair(base.tokenizer, r.prompt, cont)
                if pair.continuation:
                    labels.append(f"{r.item_id}#choice{k}")
                    prompts.append(pair.context)
                    forced.append(pair.continuation)
    return Targets(tuple(labels), tuple(prompts), tuple(forced))


def exact_records(base, variant, targets: Targets, *, batch: int = 8,
                  on_batch: Callable[[int, int], None] | None = None,
                  on_records: Callable[[list[PromptFidelity]], None] | None = None
                  ) -> list[PromptFidelity]:
    """Per-label KL and top-1 agreement of ``variant`` against ``base`` on ``targets``;
    ``on_batch(done, total)`` after each batch of ``batch`` prompts, ``on_records`` with
    the records so far (to save them)."""
    records = []
    n_batches = -(-len(targets.prompts) // batch)
    for k, start in enumerate(range(0, len(targets.prompts), batch)):
        sl = slice(start, start + batch)
        b_rows = base.teacher_forced(targets.prompts[sl], targets.forced[sl])
        v_rows = variant.teacher_forced(targets.prompts[sl], targets.forced[sl])
        for label, b, v in zip(targets.labels[sl], b_rows, v_rows, strict=True):
            records.append(PromptFidelity(label, tuple(float(x) for x in kl_per_token(b, v)),
                                          tuple(bool(x) for x in top1_agreement(b, v))))
        if on_records is not None:
            on_records(list(records))
        if on_batch is not None:
            on_batch(k + 1, n_batches)
    return records


def exact_fidelity(base, variant, requests: Sequence[Request], *,
                   max_new_tokens: int | None = None, batch: int = 8,
                   progress: Callable[[float], None] | None = None,
                   prior: Sequence[PromptFidelity] = (),
                   on_records: Callable[[list[PromptFidelity]], None] | None = None
                   ) -> list[PromptFidelity]:
    """Records for ``requests`` from two ``BuiltinEngine``s sharing a tokenizer, in the
    targets' order. ``progress(fraction)``: the baseline's targets count as one batch,
    then each teacher-forced batch one more. ``prior``: records an interrupted pass
    saved (their labels are not teacher-forced again); ``on_records``: called with
    every record so far (prior included) after each batch, to save them."""
    targets = exact_targets(base, requests, max_new_tokens=max_new_tokens)
    done = {r.item_id: r for r in prior if r.item_id in set(targets.labels)}
    keep = [i for i, label in enumerate(targets.labels) if label not in done]
    todo = Targets(tuple(targets.labels[i] for i in keep),
                   tuple(targets.prompts[i] for i in keep),
                   tuple(targets.forced[i] for i in keep))
    n_batches = -(-len(todo.prompts) // batch)
    if progress is not None:
        progress(1 / (1 + n_batches))
    on_batch = None if progress is None else (
        lambda finished, total: progress((1 + finished) / (1 + total)))
    saving = None if on_records is None else (
        lambda so_far: on_records([*done.values(), *so_far]))
    new = exact_records(base, variant, todo, batch=batch, on_batch=on_batch, on_records=saving)
    merged = {**done, **{r.item_id: r for r in new}}
    return [merged[label] for label in targets.labels]


async def topk_fidelity(base, variant, requests: Sequence[Request], *, top_k: int = 5,
                        max_new_tokens: int | None = None,
                        concurrency: int = 4) -> list[PromptFidelity]:
    """Records from two ``OpenAIEngine``s (text prompts only; see module doc)."""
    generate = [greedy_copy(r, max_new_tokens) for r in requests
                if r.kind == "generate" and r.prompt is not None]
    targets: list[tuple[str, Request, str]] = []
    async for outcome in base.stream(generate):
        if isinstance(outcome, EngineResult) and outcome.response.text:
            targets.append((outcome.request.item_id, outcome.request, outcome.response.text))
    for r in requests:
        if r.kind == "loglikelihood" and r.prompt is not None:
            targets += [(f"{r.item_id}#choice{k}", r, c) for k, c in enumerate(r.continuations)]
    slots = asyncio.Semaphore(concurrency)

    async def one(label: str, request: Request, continuation: str) -> PromptFidelity:
        async with slots:
            b = await base.teacher_forced(request, continuation, top_k)
            v = await variant.teacher_forced(request, continuation, top_k)
        if [t.token for t in b.tokens] != [t.token for t in v.tokens]:
            raise FidelityError(f"fidelity {label}: the two endpoints tokenize the continuation "
                                f"differently ({len(b.tokens)} vs {len(v.tokens)} tokens)")
        kl, top1 = [], []
        for tb, tv in zip(b.tokens, v.tokens, strict=True):
            kl.append(coarse_kl(known_logprobs(tb.token, tb.logprob, tb.top),
                                known_logprobs(tv.token, tv.logprob, tv.top)))
            top1.append(top1_of(tb.top) == top1_of(tv.top))
        return PromptFidelity(label, tuple(kl), tuple(top1))

    return list(await asyncio.gather(*(one(*t) for t in targets)))
