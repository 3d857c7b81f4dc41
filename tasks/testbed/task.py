"""The testbed task variants and their ``Task``: GSM8K's answer format and scoring on
synthetic items.

Reused from ``tasks.gsm8k`` unchanged: the strict filter (first ``#### N``), the
flexible filter (last number) and GSM8K's ``exact_match``, so a testbed score means
what a GSM8K score means. Own: the prompt (a fixed two-shot prefix, identical for
every item of a task, then ``Question: ...\\nAnswer:``), ``max_gen_toks`` 64 (the
longest worked answer is 43 tokens with the byte tokenizer) and the stop ``\\n``
(answers are one line; the trained model ends them with ``\\n`` + EOS).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tasks.gsm8k import FLEXIBLE_EXTRACT, GSM8K_EXACT_MATCH, HASH_STRICT
from tasks.request import Generation, GenerationParams, Loglikelihoods, Request
from tasks.score import Score
from tasks.task import GenerativeScoring, Task, score_generation
from tasks.testbed.catalog import ALL_SPECS as SPECS
from tasks.testbed.data import TestbedItem
from tasks.testbed.exemplars import query
from tasks.testbed.probe_spec import PROBE_TASKS
from tasks.testbed.spec import TESTBED_TASKS

TESTBED_STOPS = ("\n", "</s>", "<|im_end|>")
TESTBED_MAX_GEN_TOKS = 64
TESTBED_SCORING = GenerativeScoring((HASH_STRICT, FLEXIBLE_EXTRACT), GSM8K_EXACT_MATCH,
                                    primary="strict-match")


@dataclass(frozen=True)
class TestbedVariant:
    """One testbed task: its generation parameters and scoring (the items and prompt
    prefix come from ``tasks.testbed.catalog.ALL_SPECS[name]``)."""

    name: str
    version: str
    upstream: str
    gen: GenerationParams
    scoring: GenerativeScoring = TESTBED_SCORING

    __test__ = False  # not a pytest class, despite the name


def _variants(names, upstream: str) -> tuple[TestbedVariant, ...]:
    return tuple(TestbedVariant(name=name, version="1.0", upstream=upstream,
                                gen=GenerationParams(max_gen_toks=TESTBED_MAX_GEN_TOKS,
                                                     until=TESTBED_STOPS))
                 for name in names)


TESTBED_VARIANTS = _variants(TESTBED_TASKS, "synthetic (v41val testbed); answer format, filters "
                                            "and exact_match of lm-eval 0.4.13 gsm8k")
PROBE_VARIANTS = _variants(PROBE_TASKS, "synthetic boundary probe (v41val testbed_lookup format); "
                                        "answer format, filters and exact_match of lm-eval "
                                        "0.4.13 gsm8k")


class TestbedTask(Task):
    """A testbed task over its shipped test items."""

    kind = "generate"
    __test__ = False

    def __init__(self, variant: TestbedVariant, items: Sequence[TestbedItem]) -> None:
        self.variant = variant
        self.name = variant.name
        self.version = variant.version
        self.upstream = variant.upstream
        self.dataset = variant.name
        self.gen = variant.gen
        self.primary = variant.scoring.primary
        self.filter_names = tuple(e.name for e in variant.scoring.extractors)
        self.prefix = SPECS[variant.name].prefix
        super().__init__(items)

    def _render(self, item: TestbedItem) -> Request:
        return Request(task=self.name, item_id=item.id, kind="generate",
                       prompt=self.prefix + query(item.question), gen=self.gen)

    def score(self, item: TestbedItem, response: Generation | Loglikelihoods) -> Score:
        item = self._own(item)
        return score_generation(self.variant.scoring, self.gen, item.target, (), response,
                                self.name)
