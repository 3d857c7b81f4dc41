"""The embedded default plan of ``v41val demo``, designed for 3 minutes on a 2-core CPU.

Why it looks the way it does (the demo prints this too):

- **Model**: ``micro`` (``tiny`` cut to 4 layers: ratios 0/2/1/1, KV sources 1 and 2,
  layer 3 re-indexes, Engram on layer 0, mHC, MoE) with hidden size 128, head dim 64
  and a 32-token window, seeded random weights (no download). Every structural feature
  of V4.1 stays; the small window makes bounded replay engage on short prompts.
  On a CPU the runtime costs about 1 ms per prompt token at this size, so prompt tokens
  are the budget.
- **Tasks**: ``gsm8k_cot_zeroshot`` (no few-shot block: ~150-270 byte-level tokens per
  prompt instead of ~3k) with ``max_gen_toks`` cut to 8 (recorded in the plan; the
  report shows it), and ``gpqa_diamond_zeroshot`` scored by loglikelihood (one forward
  per choice, no generation). Both on their items with the shortest prompts (GPQA
  prompts run from ~180 to ~5700 tokens; one long item costs as much as forty short
  ones), GPQA taking a tenth of ``--items``. The sample is therefore not a random
  one: a random model is at the floor of both tasks anyway, and the demo says so.
- **Warm mode**, so encoder-side replay engages on prefix hits; requests batched 32 at
  a time; teacher-forced fidelity on the first 4 prompts of each task, 16 tokens each.
- **Variants**: the ablation matrix of ``validate.plan.ablate`` against the
  all-reference exact baseline: encoder replay only, decoder trim only, both (bounded),
  and one variant per fused op only where the device runs fused kernels (on a CPU
  without CUDA they would fall back to the reference, so they are left out and named).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import tasks
from validate.defaults import DEMO_ITEMS
from validate.demo.errors import DemoError
from validate.plan.ablate import ablation_variants
from validate.plan.load import parse_plan
from validate.plan.schema import Plan

GSM8K = "gsm8k_cot_zeroshot"
GPQA = "gpqa_diamond_zeroshot"
# Fields changed on top of the engine's ``micro`` preset (itself ``tiny`` cut to 4 layers).
DEMO_MODEL_OVERRIDES = {"hidden_size": 128, "head_dim": 64, "sliding_window": 32}
GSM8K_MAX_GEN_TOKS = 8
DEFAULT_ITEMS = DEMO_ITEMS
GPQA_SHARE = 0.1  # a GPQA item costs ~6 GSM8K items here (four choices, longer prompts)
CONCURRENCY = 32
FIDELITY_PROMPTS = 4
FIDELITY_TOKENS = 16


@dataclass(frozen=True)
class ItemSplit:
    """How ``--items`` is shared between the two tasks."""

    gsm8k: int
    gpqa: int

    @classmethod
    def of(cls, items: int) -> ItemSplit:
        if items < 4:
            raise DemoError(f"--items: expected >= 4 (at least 2 per task), got {items}")
        gpqa = max(2, round(items * GPQA_SHARE))
        return cls(gsm8k=items - gpqa, gpqa=gpqa)


def shortest_items(task_name: str, n: int) -> tuple[str, ...]:
    """Ids of the ``n`` items whose rendered prompts are shortest (ties: task order).
    The text stays in memory (GPQA must never be written out); only ids go in the plan."""
    task = tasks.get(task_name)
    items = list(task.items())
    if n > len(items):
        raise DemoError(f"--items: {task_name} has {len(items)} items, asked for {n}")
    lengths = [(len(task.render(item).prompt or ""), i) for i, item in enumerate(items)]
    chosen = sorted(sorted(lengths)[:n], key=lambda pair: pair[1])
    return tuple(items[i].id for _, i in chosen)


def plan_document(items: int = DEFAULT_ITEMS, device: str = "cpu") -> dict:
    """The demo plan as a TOML-shaped document (what ``v41val run`` would read)."""
    split = ItemSplit.of(items)
    n_gsm8k = len(tasks.get(GSM8K).items())
    if split.gsm8k > n_gsm8k:
        raise DemoError(f"--items: {items} asks for {split.gsm8k} GSM8K items, it has {n_gsm8k}")
    return {
        "name": "demo",
        "description": (f"v41val demo: micro V4.1 ({', '.join(f'{k}={v}' for k, v in DEMO_MODEL_OVERRIDES.items())}), "
                        f"random seeded weights, {split.gsm8k} GSM8K + {split.gpqa} GPQA items"),
        "baseline": "reference",
        "seed": 1234,
        "concurrency": CONCURRENCY,
        "warm": True,
        "fidelity_prompts": FIDELITY_PROMPTS,
        "fidelity_tokens": FIDELITY_TOKENS,
        "engine": {"kind": "builtin", "preset": "micro", "device": device, "dtype": "float32",
                   "seed": 0, "overrides": dict(DEMO_MODEL_OVERRIDES)},
        "variants": {"reference": {"swa": "exact"}},
        "tasks": [
            {"name": GSM8K, "items": list(shortest_items(GSM8K, split.gsm8k)),
             "max_gen_toks": GSM8K_MAX_GEN_TOKS},
            {"name": GPQA, "items": list(shortest_items(GPQA, split.gpqa))},
        ],
        "policy": {
            "gate": {"alpha": 0.05, "correction": "holm", "mode": "standard"},
            "health": {"min_coverage": 1.0},
            "tasks": {GSM8K: {"margin": 2.0, "metric": "exact_match,flexible-extract"},
                      GPQA: {"margin": 3.0, "metric": "acc,none", "tier": "advisory"}},
        },
    }


def demo_plan(items: int = DEFAULT_ITEMS, device: str = "cpu",
              fused_ops: tuple[str, ...] = ()) -> Plan:
    """The demo's ablation plan: reference (baseline), encoder_replay, decoder_trim,
    ``fused_<op>`` for each op in ``fused_ops`` (only those the device runs), all_on."""
    plan = parse_plan(plan_document(items, device), source="<embedded demo plan>")
    variants = list(ablation_variants(plan, fused_ops))
    if not fused_ops:  # "all_on" would claim fused kernels that are not running
        variants[-1] = replace(variants[-1], name="both_bounded")
    return replace(plan, variants=tuple(variants), baseline="reference")
