"""OpenAI-API reply objects from runtime results: token strings, logprobs, offsets.

Token strings: a token whose bytes are valid UTF-8 is that text; a piece of a
multi-byte character is written ``bytes:\\xe2\\x80`` (OpenAI's and vLLM's convention); an
id that stands for no bytes and is no special token (the test tokenizer's ids above its
merges) is ``token_id:N`` (the spelling of vLLM's ``--return-tokens-as-token-ids``). So
distinct tokens get distinct strings, and a completions ``top_logprobs`` dict, keyed by
those strings, holds as many entries as were asked for (should two ids still share a
string, the second is keyed ``token_id:N``). ``text_offset`` of token i is the number of characters of
the text before it (a character whose bytes are still incomplete is not counted), so
for the echoed prompt the offsets index the prompt string exactly.
"""

from __future__ import annotations

import time
import uuid


def token_text(tokenizer, token_id: int) -> str:
    special = tokenizer.special_text(token_id)
    if special is not None:
        return special
    raw = tokenizer.token_bytes(token_id)
    if not raw:
        return f"token_id:{token_id}"
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return "bytes:" + "".join(f"\\x{b:02x}" for b in raw)


def text_offsets(tokenizer, ids, base: int = 0) -> list[int]:
    out, raw = [], b""
    for token_id in ids:
        out.append(base + len(raw.decode("utf-8", "ignore")))
        raw += tokenizer.token_bytes(int(token_id))
    return out


def _top_dict(tokenizer, lp, k: int | None = None) -> dict:
    top: dict[str, float] = {}
    pairs = list(zip(lp.top_ids, lp.top_logprobs, strict=True))[:k]
    for i, v in pairs:
        key = token_text(tokenizer, i)
        top[key if key not in top else f"token_id:{i}"] = float(v)
    return top


def completion_logprobs(tokenizer, prompt_ids, prompt_lps, out_ids, out_lps,
                        prompt_text: str | None, k: int | None = None) -> dict:
    """The /completions ``logprobs`` object over (echoed prompt +) generated tokens, with
    the top ``k`` alternatives (None: all the engine gave)."""
    tokens, values, tops, offsets = [], [], [], []
    if prompt_lps is not None:
        tokens += [token_text(tokenizer, t) for t in prompt_ids]
        for lp in prompt_lps:
            values.append(None if lp is None else float(lp.logprob))
            tops.append(None if lp is None else _top_dict(tokenizer, lp, k))
        offsets += text_offsets(tokenizer, prompt_ids)
    base = len(prompt_text) if prompt_text is not None else 0
    tokens += [token_text(tokenizer, t) for t in out_ids]
    for lp in out_lps or ():
        values.append(float(lp.logprob))
        tops.append(_top_dict(tokenizer, lp, k))
    offsets += text_offsets(tokenizer, out_ids, base)
    return {"tokens": tokens, "token_logprobs": values, "top_logprobs": tops,
            "text_offset": offsets}


def chat_logprob_entry(tokenizer, lp) -> dict:
    def one(token_id, value):
        text = token_text(tokenizer, token_id)
        return {"token": text, "logprob": float(value),
                "bytes": list(tokenizer.token_bytes(token_id))}

    entry = one(lp.token_id, lp.logprob)
    entry["top_logprobs"] = [one(i, v) for i, v in zip(lp.top_ids, lp.top_logprobs, strict=True)]
    return entry


def prompt_logprobs(tokenizer, prompt_ids, lps, k: int) -> list:
    """vLLM's ``prompt_logprobs``: None for the first prompt token, then per position a
    dict keyed by token id (a string in JSON) holding the prompt token and the top ``k``,
    each ``{"logprob", "rank", "decoded_token"}``."""
    out: list = []
    for token_id, lp in zip(prompt_ids, lps, strict=True):
        if lp is None:
            out.append(None)
            continue
        entry = {str(token_id): {"logprob": float(lp.logprob), "rank": lp.rank,
                                 "decoded_token": token_text(tokenizer, token_id)}}
        for rank, (i, v) in enumerate(list(zip(lp.top_ids, lp.top_logprobs, strict=True))[:k]):
            entry.setdefault(str(i), {"logprob": float(v), "rank": rank + 1,
                                      "decoded_token": token_text(tokenizer, i)})
        out.append(entry)
    return out


def usage(results, per_prompt: int = 1) -> dict:
    """Usage of one answer's results (``per_prompt`` choices of each prompt, in order):
    every prompt counted once, every choice's output tokens counted."""
    results = list(results) if isinstance(results, (list, tuple)) else [results]
    firsts = results[::per_prompt]
    n_prompt = sum(len(r.prompt_ids) for r in firsts)
    n_out = sum(len(r.token_ids) for r in results)
    return {"prompt_tokens": n_prompt, "completion_tokens": n_out,
            "total_tokens": n_prompt + n_out,
            "prompt_tokens_details": {"cached_tokens": sum(r.timings.prefix_hit_tokens
                                                           for r in firsts)}}


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


def now() -> int:
    return int(time.time())
