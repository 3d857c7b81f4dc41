"""The embedded default plan of ``v41val demo``, designed for 3 minutes on a 2-core CPU.

Why it looks the way it does (the demo prints this too):

- **Model**: the trained testbed that ships in ``runtime/testbed`` (V4.1 architecture,
  the ``testbed`` shape: 4 layers with ratios 0/2/1/1, two KV sources, re-indexing,
  candidates, Engram, mHC, MoE, hidden size 128, a 32-token window), trained by
  ``training/`` on the synthetic tasks below. A model with random weights sits at the
  floor of every task, so no optimization could show a cost; this one can. Its manifest
  (``testbed.json``) says how far its training ran.
- **Tasks**: the three ``tasks.testbed`` tasks (GSM8K's answer format and scoring):
  far-back key lookup (the compressed/indexed path), local arithmetic (the window), and
  both; their first items (the test sets are in generation order, so that is a random
  sample), split evenly. Prompts run from ~220 to ~1000 tokens (7 to 30 windows) behind
  a two-shot prefix shared by every item of a task. On a CPU the runtime costs about
  1 ms per prompt token at this size, so prompt tokens are the budget.
- **Warm mode**, so encoder-side replay engages on prefix hits; requests batched 32 at
  a time; teacher-forced fidelity on the first 4 prompts of each task, 16 tokens each.
- **Speed in interleaved rounds** (``[speed] rounds``): after the quality passes every
  variant serves the same few synthetic prompts once per round, the order alternating
  (``validate.speed.interleaved``), so the speed-ups come with intervals over rounds
  that host drift between variants widens instead of faking. The prompts are cold
  (random letters, no shared prefix), so they measure what an optimization costs or
  buys on an uncached prompt; the quality pass's warm figures stay, labelled as single
  windows per variant. Sized to a few seconds (SPEED): a round is one batch of two
  prompts per variant, and the table runs the rounds alone (``sweep_levels = []``: the
  headline sweep would be one window per variant again).
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

DEMO_TASKS = ("testbed_lookup", "testbed_arith", "testbed_lookup_arith")
DEMO_MODEL = "testbed"  # ModelSource preset: the trained checkpoint of runtime/testbed
DEFAULT_ITEMS = DEMO_ITEMS
CONCURRENCY = 32
FIDELITY_PROMPTS = 4
FIDELITY_TOKENS = 16
MARGIN_POINTS = 3.0  # non-inferiority margin of every task's claim, in accuracy points
# Interleaved speed rounds alone (module doc): 2 cold prompts of 2 windows, 8 output
# tokens, 8 rounds (as many as the A/A check of benchmarks/speed_interleaved.py, whose
# intervals all contained 1; fewer clusters make a percentile bootstrap too narrow).
SPEED = {"rounds": 8, "sweep_levels": [], "requests_per_level": 2, "prompt_tokens": 64,
         "max_tokens": 8}


@dataclass(frozen=True)
class ItemSplit:
    """How ``--items`` is shared between the tasks: evenly, the remainder to the first."""

    per_task: tuple[int, ...]

    @classmethod
    def of(cls, items: int, n_tasks: int = len(DEMO_TASKS)) -> ItemSplit:
        if items < 2 * n_tasks:
            raise DemoError(f"--items: expected >= {2 * n_tasks} (at least 2 per task), got {items}")
        base, extra = divmod(items, n_tasks)
        return cls(tuple(base + (1 if k < extra else 0) for k in range(n_tasks)))


def plan_document(items: int = DEFAULT_ITEMS, device: str = "cpu") -> dict:
    """The demo plan as a TOML-shaped document (what ``v41val run`` would read)."""
    split = ItemSplit.of(items)
    for name, n in zip(DEMO_TASKS, split.per_task, strict=True):
        available = len(tasks.get(name).items())
        if n > available:
            raise DemoError(f"--items: {items} asks for {n} {name} items, it has {available}")
    return {
        "name": "demo",
        "description": ("v41val demo: the trained V4.1 testbed, "
                        + ", ".join(f"{n} {t}" for t, n in zip(DEMO_TASKS, split.per_task, strict=True))
                        + " items"),
        "baseline": "reference",
        "seed": 1234,
        "concurrency": CONCURRENCY,
        "warm": True,
        "fidelity_prompts": FIDELITY_PROMPTS,
        "fidelity_tokens": FIDELITY_TOKENS,
        "engine": {"kind": "builtin", "preset": DEMO_MODEL, "device": device, "dtype": "float32"},
        "variants": {"reference": {"swa": "exact"}},
        "tasks": [{"name": t, "limit": n} for t, n in zip(DEMO_TASKS, split.per_task, strict=True)],
        "speed": dict(SPEED),
        "policy": {
            "gate": {"alpha": 0.05, "correction": "holm", "mode": "standard"},
            "health": {"min_coverage": 1.0},
            "tasks": {t: {"margin": MARGIN_POINTS, "metric": "exact_match,strict-match"}
                      for t in DEMO_TASKS},
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
