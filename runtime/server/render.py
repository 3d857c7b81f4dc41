"""OpenAI-API reply objects from runtime results: token strings, logprobs, offsets.

Token strings: a token whose bytes are valid UTF-8 is that text; a piece of a
multi-byte character is written ``bytes:\\xe2\\x80`` (OpenAI's convention), so distinct
tokens never share a string. ``text_offset`` of token i is the number of characters of
the text before it (a character whose bytes are still incomplete is not counted), so
for the echoed prompt the offsets index the prompt string exactly.
"""

from __future__ import annotations

import time
import uuid


def token_text(tokenizer, token_id: int) -> str:
    if token_id < tokenizer.byte_offset:
        return tokenizer.specials[token_id]
    raw = tokenizer.token_bytes(token_id)
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


def _top_dict(tokenizer, lp) -> dict:
    top: dict[str, float] = {}
    for i, v in zip(lp.top_ids, lp.top_logprobs, strict=True):
        key = token_text(tokenizer, i)
        top[key] = max(float(v), top.get(key, float("-inf")))
    return top


def completion_logprobs(tokenizer, prompt_ids, prompt_lps, out_ids, out_lps,
                        prompt_text: str | None) -> dict:
    """The /completions ``logprobs`` object over (echoed prompt +) generated tokens."""
    tokens, values, tops, offsets = [], [], [], []
    if prompt_lps is not None:
        tokens += [token_text(tokenizer, t) for t in prompt_ids]
        for lp in prompt_lps:
            values.append(None if lp is None else float(lp.logprob))
            tops.append(None if lp is None else _top_dict(tokenizer, lp))
        offsets += text_offsets(tokenizer, prompt_ids)
    base = len(prompt_text) if prompt_text is not None else 0
    tokens += [token_text(tokenizer, t) for t in out_ids]
    for lp in out_lps or ():
        values.append(float(lp.logprob))
        tops.append(_top_dict(tokenizer, lp))
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


def usage(result) -> dict:
    n_prompt, n_out = len(result.prompt_ids), len(result.token_ids)
    return {"prompt_tokens": n_prompt, "completion_tokens": n_out,
            "total_tokens": n_prompt + n_out,
            "prompt_tokens_details": {"cached_tokens": result.timings.prefix_hit_tokens}}


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


def now() -> int:
    return int(time.time())
