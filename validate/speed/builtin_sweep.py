"""Headline operating points of builtin variants on synthetic prompts.

    python -m validate.speed.builtin_sweep --preset tiny --device cuda \\
        --variants exact,bounded --levels 1,2,4,8,16 --prompt-tokens 512 --max-tokens 64

Each variant (``RuntimeOptions(swa=...)``) is swept over the concurrency levels on the
same requests (prompts of ``prompt_tokens`` random letters, each a token of the byte
tokenizer; ``max_tokens`` output tokens with EOS ignored, so every variant produces the
same number of tokens), then compared with the first variant (the baseline):
single-stream tokens/s and TTFT with paired CIs, and throughput at the target per-user
rate. Output: one JSON document on stdout.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from dataclasses import replace

from runtime.options import RuntimeOptions
from tasks.request import GenerationParams, Request
from validate.engines.builtin import BuiltinEngine, BuiltinEngineConfig
from validate.engines.builtin_source import ModelSource, WeightsPool
from validate.speed.headline import compare_headlines, headline
from validate.speed.sweep import concurrency_sweep, warm_up


def synthetic_requests(n: int, prompt_tokens: int, max_tokens: int, seed: int = 0) -> list:
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    return [Request("synthetic", f"s{k}", "generate",
                    prompt="".join(rng.choice(letters) for _ in range(prompt_tokens)),
                    gen=GenerationParams(max_gen_toks=max_tokens)) for k in range(n)]


def sweep_variants(source: ModelSource, variants: dict[str, RuntimeOptions], requests, *,
                   levels, target: float, user_quantile: float = 0.1) -> dict:
    pool = WeightsPool()
    sweeps, out = {}, {"variants": {}, "comparisons": []}
    for name, options in variants.items():
        config = BuiltinEngineConfig(source=source, options=options, variant=name,
                                     ignore_eos=True)
        def factory(c, config=config):
            return BuiltinEngine(replace(config, scheduling=replace(config.scheduling,
                                                                 max_batch_requests=c)), pool)

        failure = warm_up(factory, requests, levels)
        if failure is not None:
            raise failure.error
        sweeps[name] = concurrency_sweep(factory, requests, levels=levels,
                                         target_tokens_per_s_per_user=target,
                                         user_quantile=user_quantile, stop_after_miss=False)
        out["variants"][name] = {"sweep": sweeps[name].to_dict(),
                                 "headline": headline(sweeps[name], name).to_dict()}
    names = list(variants)
    for name in names[1:]:
        out["comparisons"].append(compare_headlines(sweeps[names[0]], sweeps[name],
                                                    variant_name=name,
                                                    baseline_name=names[0]).to_dict())
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="tiny")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default=None)
    p.add_argument("--variants", default="exact,bounded")
    p.add_argument("--levels", default="1,2,4,8")
    p.add_argument("--requests", type=int, default=16)
    p.add_argument("--prompt-tokens", type=int, default=256)
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--target", type=float, default=150.0)
    a = p.parse_args(argv)
    source = ModelSource(preset=a.preset, seed=a.seed, device=a.device, dtype=a.dtype)
    variants = {v: RuntimeOptions(swa=v) for v in a.variants.split(",")}
    requests = synthetic_requests(a.requests, a.prompt_tokens, a.max_tokens)
    result = sweep_variants(source, variants, requests,
                            levels=[int(x) for x in a.levels.split(",")], target=a.target)
    result["setup"] = {**vars(a), "source": source.describe()}
    json.dump(result, sys.stdout, indent=1, default=str)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
