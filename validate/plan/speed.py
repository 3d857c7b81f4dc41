"""The plan's optional ``[speed]`` table: the concurrency sweep behind the two headline
operating points (single-stream speed, and throughput while every user still gets
>= ``target_tokens_per_s`` tokens/s).

Example::

    [speed]
    sweep_levels = [1, 2, 4, 8]     # concurrency levels; must start at 1 (single stream)
    target_tokens_per_s = 150.0     # per-user decode rate to keep (AgentX constraint)
    user_quantile = 0.1             # this quantile of users must reach the target
    prompt_tokens = 256             # synthetic prompt length (tokens of the byte tokenizer)
    max_tokens = 32                 # output tokens per request (EOS ignored)
    requests_per_level = 16         # requests served at each level (>= the highest level)
    ignore_eos = true               # over HTTP: send vLLM/SGLang's ignore_eos (see below)
    rounds = 8                      # optional: interleaved rounds at the plan's concurrency

``sweep_levels = []`` with ``rounds`` > 0 measures the rounds alone, with no headline
sweep (the demo does: the sweep is one window per variant, the rounds are not).

``rounds`` > 0 adds interleaved speed rounds after every variant's quality pass: each
round serves ``requests_per_level`` synthetic requests once per variant at the plan's
``concurrency``, the variants' order alternating from round to round, and the speed-ups
come with intervals that resample rounds (``validate/speed/interleaved.py``): speed
that drift of the host between variants cannot fake. It needs every variant's engine
at once (builtin, openai); not on vllm, where that is one server per variant at once.

Engines: builtin (a fresh in-process engine per level on the run's weights pool),
openai (the variant's endpoint, one client per level holding ``level`` requests in
flight) and vllm (the variant's server started once for the sweep, one client per
level). Over HTTP, ``ignore_eos = true`` adds ``"ignore_eos": true`` to every request
body, an extension vLLM and SGLang accept, so every variant produces ``max_tokens``
tokens; set it to false for a server that refuses unknown fields (output lengths then
vary by variant, which the per-token figures tolerate and the throughput ones do not).

The sweep settings do not change a quality response, so they stay out of the plan hash
(like ``concurrency``); the runner keys a stored sweep by its settings instead, so a
rerun with other settings sweeps again and a rerun with the same ones does not.
"""

from __future__ import annotations

from dataclasses import dataclass

# validate.speed.sweep's defaults, repeated so that reading a plan imports no numpy (the
# CLI loads plans before any heavy library); a test keeps the two equal.
DEFAULT_TARGET = 150.0
DEFAULT_USER_QUANTILE = 0.1


@dataclass(frozen=True)
class SpeedSpec:
    """A validated ``[speed]`` table (see the module doc for the meaning of each field)."""

    sweep_levels: tuple[int, ...] = (1, 2, 4, 8)
    target_tokens_per_s: float = DEFAULT_TARGET
    user_quantile: float = DEFAULT_USER_QUANTILE
    prompt_tokens: int = 256
    max_tokens: int = 32
    requests_per_level: int = 16
    ignore_eos: bool = True
    rounds: int = 0

    def to_dict(self) -> dict:
        extra = {"rounds": self.rounds} if self.rounds else {}  # older sweeps stay reusable
        return {**extra, "sweep_levels": list(self.sweep_levels),
                "target_tokens_per_s": self.target_tokens_per_s,
                "user_quantile": self.user_quantile, "prompt_tokens": self.prompt_tokens,
                "max_tokens": self.max_tokens, "requests_per_level": self.requests_per_level,
                "ignore_eos": self.ignore_eos}


SPEED_KEYS: dict[str, type] = {"sweep_levels": list, "target_tokens_per_s": float,
                               "user_quantile": float, "prompt_tokens": int, "max_tokens": int,
                               "requests_per_level": int, "ignore_eos": bool, "rounds": int}


def parse_speed(w, value) -> SpeedSpec:
    """``[speed]`` -> ``SpeedSpec``; ``w`` is the loader's error builder (``_Where``)."""
    table = w.table(value, "speed")
    w.unknown(table, SPEED_KEYS, "speed")
    t = {k: w.typed(v, SPEED_KEYS[k], f"speed.{k}") for k, v in table.items()}
    defaults = SpeedSpec()
    levels = tuple(t.get("sweep_levels", defaults.sweep_levels))
    for i, level in enumerate(levels):
        w.typed(level, int, f"speed.sweep_levels[{i}]")
    if not levels and not t.get("rounds"):
        raise w.error("speed.sweep_levels", "expected strictly increasing integers >= 1 "
                                            "(or [] with speed.rounds > 0: rounds alone), got []")
    if levels and (any(c < 1 for c in levels) or list(levels) != sorted(set(levels))):
        raise w.error("speed.sweep_levels", f"expected strictly increasing integers >= 1, "
                                            f"got {list(levels)}")
    if levels and levels[0] != 1:
        raise w.error("speed.sweep_levels", f"must start at 1 (the single-stream point), "
                                            f"got {list(levels)}")
    target = t.get("target_tokens_per_s", defaults.target_tokens_per_s)
    if not target > 0:
        raise w.error("speed.target_tokens_per_s", f"expected > 0, got {target}")
    quantile = t.get("user_quantile", defaults.user_quantile)
    if not 0 <= quantile <= 1:
        raise w.error("speed.user_quantile", f"expected a number in [0, 1], got {quantile}")
    for key, low in (("prompt_tokens", 1), ("max_tokens", 2), ("requests_per_level", 1),
                     ("rounds", 0)):
        if key in t and t[key] < low:
            raise w.error(f"speed.{key}", f"expected >= {low}, got {t[key]}")
    n = t.get("requests_per_level", defaults.requests_per_level)
    if levels and n < levels[-1]:
        raise w.error("speed.requests_per_level", f"expected >= the highest sweep level "
                                                  f"({levels[-1]}), got {n}")
    return SpeedSpec(sweep_levels=levels, target_tokens_per_s=float(target),
                     user_quantile=float(quantile),
                     prompt_tokens=t.get("prompt_tokens", defaults.prompt_tokens),
                     max_tokens=t.get("max_tokens", defaults.max_tokens), requests_per_level=n,
                     ignore_eos=t.get("ignore_eos", defaults.ignore_eos),
                     rounds=t.get("rounds", defaults.rounds))
