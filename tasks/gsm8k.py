"""The GSM8K task variants: lm-eval 0.4.13's ``gsm8k``, ``gsm8k_cot`` and
``gsm8k_cot_zeroshot`` reproduced byte for byte, plus a chat variant.

What is identical to lm-eval (tested against lm-eval itself, every item):
prompts (templates, exemplars, delimiters), stop strings, greedy decoding, both
filters and the ``exact_match`` normalisation. What is added: an explicit
``max_gen_toks`` per variant (lm-eval silently uses the model default, 256, which cuts
chain-of-thought short):

- ``gsm8k`` 256: the 5-shot answers are short worked solutions (the train answers
  average about 100 tokens) and generation stops at the next "Question:"; 256 is what
  lm-eval effectively used, so published numbers stay comparable.
- ``gsm8k_cot`` / ``gsm8k_cot_zeroshot`` 1024: free-form reasoning can run past 256
  tokens; these stop at "Q:" or EOS, so the larger budget only costs time when a model
  rambles, and truncation would otherwise bias the score.
- ``gsm8k_chat_cot_zeroshot`` 4096: chat/reasoning models think before answering.

Few-shot sampling of ``gsm8k``: lm-eval's default sampler, seeded by
``simple_evaluate`` with ``fewshot_random_seed`` 1234, draws 5 train rows per test
document with ``random.Random(1234).sample`` from the whole train pool, one draw per
document in document order. The same draws are made here once, for all 1,319 items,
so ``render`` of any item gives lm-eval's prompt regardless of call order.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from tasks.extraction import ExactMatch, RegexExtractor
from tasks.gsm8k_data import Gsm8kExample, Gsm8kItem, final_answer_of, gsm8k_item_id
from tasks.gsm8k_exemplars import GSM8K_COT_EXEMPLARS
from tasks.prompting import text_prompt
from tasks.request import ChatMessage, Generation, GenerationParams, Loglikelihoods, Request
from tasks.score import Score
from tasks.task import GenerativeScoring, Task, score_generation

FEWSHOT_SEED = 1234  # lm-eval's fewshot_random_seed default (simple_evaluate, CLI)

GSM8K_EXACT_MATCH = ExactMatch(
    ignore_case=True,
    ignore_punctuation=False,
    regexes_to_ignore=(",", r"\$", "(?s).*#### ", r"\.$"),
)
FLEXIBLE_EXTRACT = RegexExtractor("flexible-extract", r"(-?[$0-9.,]{2,})|(-?[0-9]+)",
                                  group_select=-1)
HASH_STRICT = RegexExtractor("strict-match", r"#### (\-?[0-9\.\,]+)")
ANSWER_IS_STRICT = RegexExtractor("strict-match", r"The answer is (\-?[0-9\.\,]+).")
FINAL_ANSWER_STRICT = RegexExtractor(
    "strict-match", r"The final answer is ((-?[$0-9.,]{2,})|(-?[0-9]+))", group_select=-1)

CHAT_INSTRUCTION_HEAD = ("Given the following problem, reason and give a final answer to the "
                         "problem.\nProblem: ")
CHAT_INSTRUCTION_TAIL = ("\nYour response should end with \"The final answer is [answer]\" "
                         "where [answer] is the response to the problem.")


@dataclass(frozen=True)
class Gsm8kVariant:
    """One GSM8K task variant. The test question is rendered as
    ``query_prefix + question + query_suffix``; exemplars use the same template."""

    name: str
    version: str
    upstream: str
    shots: Literal["train_random", "cot_fixed", "none"]
    num_fewshot: int
    query_prefix: str
    query_suffix: str
    target: Literal["solution", "final_answer"]
    gen: GenerationParams
    scoring: GenerativeScoring
    chat: bool = False


_BASE_STOPS = ("Question:", "</s>", "<|im_end|>")
_COT_STOPS = ("Q:", "</s>", "<|im_end|>")

GSM8K = Gsm8kVariant(
    name="gsm8k", version="1.0", upstream="lm-eval 0.4.13 gsm8k (v3.0)",
    shots="train_random", num_fewshot=5,
    query_prefix="Question: ", query_suffix="\nAnswer:", target="solution",
    gen=GenerationParams(max_gen_toks=256, until=_BASE_STOPS),
    scoring=GenerativeScoring((HASH_STRICT, FLEXIBLE_EXTRACT), GSM8K_EXACT_MATCH,
                              primary="strict-match"),
)
GSM8K_COT = Gsm8kVariant(
    name="gsm8k_cot", version="1.0", upstream="lm-eval 0.4.13 gsm8k_cot (v3.0)",
    shots="cot_fixed", num_fewshot=8,
    query_prefix="Q: ", query_suffix="\nA:", target="final_answer",
    gen=GenerationParams(max_gen_toks=1024, until=_COT_STOPS),
    scoring=GenerativeScoring((ANSWER_IS_STRICT, FLEXIBLE_EXTRACT), GSM8K_EXACT_MATCH,
                              primary="strict-match"),
)
GSM8K_COT_ZEROSHOT = Gsm8kVariant(
    name="gsm8k_cot_zeroshot", version="1.0",
    upstream="lm-eval 0.4.13 gsm8k_cot_zeroshot (v3.0)",
    shots="none", num_fewshot=0,
    query_prefix="Q: ", query_suffix="\nA: Let's think step by step.", target="solution",
    gen=GenerationParams(max_gen_toks=1024, until=_COT_STOPS),
    scoring=GenerativeScoring((ANSWER_IS_STRICT, FLEXIBLE_EXTRACT), GSM8K_EXACT_MATCH,
                              primary="strict-match"),
)
GSM8K_CHAT_COT_ZEROSHOT = Gsm8kVariant(
    name="gsm8k_chat_cot_zeroshot", version="1.0",
    upstream="derived from lm-eval 0.4.13 gsm8k_cot_llama (v4.0): its instruction and "
             "filters, zero-shot, as one user message",
    shots="none", num_fewshot=0,
    query_prefix=CHAT_INSTRUCTION_HEAD, query_suffix=CHAT_INSTRUCTION_TAIL,
    target="final_answer",
    gen=GenerationParams(max_gen_toks=4096, until=("</s>", "<|im_end|>")),
    scoring=GenerativeScoring((FINAL_ANSWER_STRICT, FLEXIBLE_EXTRACT), GSM8K_EXACT_MATCH,
                              primary="strict-match", reasoning_tolerant=True),
    chat=True,
)
GSM8K_VARIANTS = (GSM8K, GSM8K_COT, GSM8K_COT_ZEROSHOT, GSM8K_CHAT_COT_ZEROSHOT)


def fewshot_draws(n_docs: int, pool_size: int, k: int, seed: int) -> tuple[tuple[int, ...], ...]:
    """Pool indices of the ``k`` exemplars of each document, in document order: one
    ``Random(seed).sample`` call per document, as lm-eval's default sampler makes."""
    rng = random.Random(seed)
    return tuple(tuple(rng.sample(range(pool_size), k)) for _ in range(n_docs))


class Gsm8kTask(Task):
    """A GSM8K variant over the 1,319 test items.

    Chat variant (``gsm8k_chat_cot_zeroshot``): one user message, the instruction of
    lm-eval's ``gsm8k_cot_llama`` (without its 8 exemplars). Before extraction the reply
    is cut to its answer section (``extraction.answer_section``): the text after the
    last ``</think>`` (the whole reply if there is none), left-stripped, as lm-eval's
    ``think_end_token`` does; nothing (so ``[invalid]``) if a ``<think>`` block never
    closed. Then stop strings cut it, then ``strict-match`` takes the LAST "The final answer is N" (N a
    number, may carry ``$ , .``), ``flexible-extract`` the last number-like string;
    both go through GSM8K's ``exact_match``, so "$1,234." matches 1234.
    """

    kind = "generate"
    dataset = "gsm8k"

    def __init__(self, variant: Gsm8kVariant, test_rows: Sequence[tuple[str, str]],
                 train_pool: Sequence[Gsm8kExample]) -> None:
        self.variant = variant
        self.name = variant.name
        self.version = variant.version
        self.upstream = variant.upstream
        self.gen = variant.gen
        self.primary = variant.scoring.primary
        self.filter_names = tuple(e.name for e in variant.scoring.extractors)
        items = [
            Gsm8kItem(gsm8k_item_id(index), index, question, solution,
                      target=solution if variant.target == "solution"
                      else final_answer_of(solution))
            for index, (question, solution) in enumerate(test_rows)
        ]
        super().__init__(items)
        self._pool = tuple(train_pool)
        self._draws: tuple[tuple[int, ...], ...] = ()
        if variant.shots == "train_random":
            self._draws = fewshot_draws(len(items), len(self._pool), variant.num_fewshot,
                                        FEWSHOT_SEED)

    @property
    def is_chat(self) -> bool:
        return self.variant.chat

    def _query(self, question: str) -> str:
        return f"{self.variant.query_prefix}{question}{self.variant.query_suffix}"

    def exemplars(self, item: Gsm8kItem) -> tuple[tuple[str, str], ...]:
        """The (rendered question, answer) exemplars in this item's prompt."""
        v = self.variant
        if v.shots == "train_random":
            return tuple((self._query(self._pool[j].question), self._pool[j].solution)
                         for j in self._draws[item.index])
        if v.shots == "cot_fixed":
            return tuple((self._query(q), a) for q, a in GSM8K_COT_EXEMPLARS[: v.num_fewshot])
        return ()

    def _render(self, item: Gsm8kItem) -> Request:
        query = self._query(item.question)
        if self.variant.chat:
            return Request(task=self.name, item_id=item.id, kind="generate",
                           messages=(ChatMessage("user", query),), gen=self.gen)
        prompt = text_prompt(self.exemplars(item), query)
        return Request(task=self.name, item_id=item.id, kind="generate", prompt=prompt,
                       gen=self.gen)

    def score(self, item: Gsm8kItem, response: Generation | Loglikelihoods) -> Score:
        item = self._own(item)
        return score_generation(self.variant.scoring, self.variant.gen, item.target, (),
                                response, self.name)
