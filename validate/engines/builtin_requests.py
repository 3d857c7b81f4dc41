"""Task requests -> runtime ``GenerateRequest``s, tokenized as lm-eval would.

Generation: the prompt text (or the chat messages rendered with the runtime's chat
template) is encoded without BOS, the same way ``v41val serve`` encodes it, so the
in-process and the HTTP paths see identical ids.

Loglikelihood (multiple choice): lm-eval's causal ``_encode_pair``. Trailing whitespace
of the context moves to the continuation; the context is encoded alone, the whole
``context + continuation`` is encoded, and the continuation's ids are the whole's ids
after the context's length. Each choice becomes one request over context+continuation
with ``max_tokens=0`` and prompt logprobs (k=1, which also tells whether each token is
the argmax); log P(continuation | context) is the sum over the continuation's positions.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime.engine.requests import GenerateRequest
from runtime.server.chat_template import render_chat
from tasks.request import Request
from validate.engines.base import request_label
from validate.engines.errors import EngineError


@dataclass(frozen=True)
class ChoiceIds:
    """One loglikelihood choice: context ids then continuation ids."""

    context: tuple[int, ...]
    continuation: tuple[int, ...]


def prompt_text(request: Request) -> str:
    if request.prompt is not None:
        return request.prompt
    return render_chat((m.role, m.content) for m in request.messages or ())


def encode_pair(tokenizer, context: str, continuation: str) -> ChoiceIds:
    """lm-eval 0.4.13 causal ``_encode_pair`` (and its empty-context rule: the prefix
    token, here BOS, stands in for an empty context)."""
    if not context:
        cont = tuple(tokenizer.encode(continuation))
        bos = tokenizer.bos_id
        if cont and cont[0] == bos:
            return ChoiceIds(cont[:1], cont[1:])
        return ChoiceIds((bos,), cont)
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces:
        context, continuation = context[:-n_spaces], context[-n_spaces:] + continuation
    whole = tuple(tokenizer.encode(context + continuation))
    ctx = tuple(tokenizer.encode(context))
    return ChoiceIds(ctx, whole[len(ctx):])


def check_fits(label: str, n_prompt: int, max_tokens: int, max_positions: int) -> None:
    if n_prompt == 0:
        raise EngineError(f"{label}: the prompt encodes to no tokens")
    if n_prompt + max_tokens > max_positions:
        raise EngineError(f"{label}: prompt of {n_prompt} tokens plus max_tokens {max_tokens} "
                          f"exceeds the model's context of {max_positions} tokens")


def generate_request(request: Request, tokenizer, max_positions: int,
                     top_logprobs: int | None, request_id: str,
                     ignore_eos: bool = False) -> GenerateRequest:
    gen = request.gen
    assert gen is not None
    ids = tuple(tokenizer.encode(prompt_text(request)))
    check_fits(request_label(request), len(ids), gen.max_gen_toks, max_positions)
    sampled = gen.do_sample and gen.temperature > 0
    return GenerateRequest(
        prompt_ids=ids,
        max_tokens=gen.max_gen_toks,
        stop=tuple(gen.until),
        temperature=gen.temperature if sampled else 0.0,
        top_p=gen.top_p if sampled else 1.0,
        seed=gen.seed,
        logprobs=top_logprobs,
        ignore_eos=ignore_eos,
        request_id=request_id,
    )


def choice_requests(request: Request, tokenizer, max_positions: int,
                    request_id: str) -> tuple[list[GenerateRequest], list[ChoiceIds]]:
    label = request_label(request)
    if request.prompt is None:
        raise EngineError(f"{label}: loglikelihood needs a text prompt, not chat messages")
    out, pairs = [], []
    for k, continuation in enumerate(request.continuations):
        pair = encode_pair(tokenizer, request.prompt, continuation)
        if not pair.continuation:
            raise EngineError(f"{label} choice {k}: the continuation encodes to no tokens")
        ids = pair.context + pair.continuation
        check_fits(f"{label} choice {k}", len(ids), 0, max_positions)
        out.append(GenerateRequest(prompt_ids=ids, max_tokens=0, prompt_logprobs=1,
                                   request_id=f"{request_id}/choice{k}"))
        pairs.append(pair)
    return out, pairs


def continuation_score(result, pair: ChoiceIds) -> tuple[float, bool]:
    """(sum of the continuation tokens' logprobs, every one of them the argmax) from a
    result with prompt logprobs (entry i scores prompt token i given tokens < i)."""
    entries = result.prompt_logprobs[len(pair.context):]
    total = 0.0
    greedy = True
    for entry in entries:
        total += float(entry.logprob)
        greedy = greedy and entry.is_greedy
    return total, greedy
