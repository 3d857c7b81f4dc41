"""Prefix-cache counters from a server's Prometheus ``/metrics`` text.

vLLM (v1 engine) exports ``vllm:prefix_cache_queries_total`` and
``vllm:prefix_cache_hits_total`` (tokens queried and found, one series per
``model_name``); older releases call them ``vllm:gpu_prefix_cache_queries_total`` /
``..._hits_total``. Read before and after a variant's quality pass, the difference is
how many prompt tokens that pass found in the cache: non-zero where prefixes repeat,
zero when caching is off or prompts are shorter than a block (vllm-ascend 13339).

Only sample lines of the text exposition format are read (``name{labels} value
[timestamp]``; ``#`` lines are comments, HELP and TYPE); series of one name are
summed over their labels. prometheus_client's parser is not a dependency of v41val,
and these two counters need no more than this.
"""

from __future__ import annotations

import math
import re

# name, optional {labels} (quoted values may hold '}' or spaces), value
_SAMPLE = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)(\{(?:[^"}]|"(?:[^"\\]|\\.)*")*\})?\s+(\S+)')

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
