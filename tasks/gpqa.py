"""The GPQA task variants (diamond, main, extended), after lm-eval 0.4.13's
``gpqa_*_zeroshot``, ``gpqa_*_cot_zeroshot`` and ``gpqa_*_generative_n_shot``, plus a
chat variant.

Identical to lm-eval: prompt templates (including lm-eval's missing space in
"question:{Question}"), the description of the n-shot family, continuations " (A)".." (D)",
stop strings, greedy decoding, both filters and the ``exact_match`` normalisation
(ignore case and ASCII punctuation, so "(B)", "B" and "b." all equal "(B)").

Deliberately different: the choice ORDER. lm-eval shuffles with the process-global
``random`` module, unseeded per item, so the order changes with the seed, task load
order and dataset cache, and for in-memory data between prompt and scoring. Here the
order is a fixed function of ``Record ID`` (see ``gpqa_data``); an item gets the same
prompt on every run, process and machine. GPQA numbers are therefore comparable across
runs of this toolkit, and comparable with lm-eval only in distribution.

``generative_n_shot`` runs 0-shot with the n-shot description, as lm-eval 0.4.13 does
by default (its YAML sets no ``num_fewshot``).

``max_gen_toks``: ``generative_n_shot`` 256 (it answers right after "Answer:" and stops
at "Question:"; lm-eval's effective default); ``cot_zeroshot`` 2048 (it stops only at
``</s>``, and graduate-level reasoning routinely runs past 256 tokens, which lm-eval's
default truncates); ``chat_cot_zeroshot`` 8192 (reasoning models think at length on
GPQA; a cut-off think block scores ``[invalid]``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from tasks.extraction import ExactMatch, MultiChoiceExtractor, RegexExtractor
from tasks.gpqa_data import LETTERS, GpqaItem
from tasks.prompting import TARGET_DELIMITER, text_prompt
from tasks.request import ChatMessage, Generation, GenerationParams, Loglikelihoods, Request
from tasks.score import Score
from tasks.task import GenerativeScoring, Task, score_generation, score_loglikelihoods

CHOICE_LABELS = tuple(f"({letter})" for letter in LETTERS)
N_SHOT_DESCRIPTION = ("Here are some example questions from experts. Answer the final "
                      "question yourself, following the format of the previous questions "
                      "exactly.\n")
CHAT_INSTRUCTION = ("Think step by step, then end your response with \"The answer is (X)\" "
                    "where X is the letter of the correct choice.")

GPQA_EXACT_MATCH = ExactMatch(ignore_case=True, ignore_punctuation=True)
GPQA_SCORING = GenerativeScoring(
    extractors=(
        RegexExtractor("strict-match", r"(?<=The answer is )(.*)(?=.)"),
        MultiChoiceExtractor("flexible-extract", r"(\([A-Z]\))", group_select=-1,
                             ignore_case=True, ignore_punctuation=True),
    ),
    metric=GPQA_EXACT_MATCH,
    primary="strict-match",
)
GPQA_CHAT_SCORING = GenerativeScoring(GPQA_SCORING.extractors, GPQA_EXACT_MATCH,
                                      primary="strict-match", reasoning_tolerant=True)

Style = Literal["zeroshot", "cot_zeroshot", "generative_n_shot", "chat_cot_zeroshot"]


@dataclass(frozen=True)
class GpqaVariant:
    """One GPQA variant: which subset, which prompt style, decoding and scoring."""

    name: str
    version: str
    upstream: str
    subset: str
    style: Style
    gen: GenerationParams | None
    scoring: GenerativeScoring | None


def _variant(subset: str, style: Style) -> GpqaVariant:
    name = f"gpqa_{subset}_{style}"
    if style == "zeroshot":
        return GpqaVariant(name, "1.0", f"lm-eval 0.4.13 {name} (v2.2), fixed choice order",
                           subset, style, gen=None, scoring=None)
    if style == "cot_zeroshot":
        gen = GenerationParams(max_gen_toks=2048, until=("</s>",))
        return GpqaVariant(name, "1.0", f"lm-eval 0.4.13 {name} (v2.2), fixed choice order",
                           subset, style, gen, GPQA_SCORING)
    if style == "generative_n_shot":
        gen = GenerationParams(max_gen_toks=256, until=("</s>", "Question:", "<|im_end|>"))
        return GpqaVariant(name, "1.0",
                           f"lm-eval 0.4.13 {name} (v2.2) at its default 0 shots, fixed "
                           "choice order", subset, style, gen, GPQA_SCORING)
    gen = GenerationParams(max_gen_toks=8192, until=("</s>", "<|im_end|>"))
    return GpqaVariant(name, "1.0",
                       f"derived from lm-eval 0.4.13 gpqa_{subset}_cot_zeroshot (v2.2): its "
                       "question layout and filters, as one user message", subset, style,
                       gen, GPQA_CHAT_SCORING)


GPQA_SUBSETS = ("diamond", "main", "extended")
GPQA_STYLES: tuple[Style, ...] = ("zeroshot", "cot_zeroshot", "generative_n_shot",
                                  "chat_cot_zeroshot")
GPQA_VARIANTS = tuple(_variant(subset, style) for subset in GPQA_SUBSETS
                      for style in GPQA_STYLES)


def _choices_block(item: GpqaItem) -> str:
    lines = [f"{label} {text}" for label, text in zip(CHOICE_LABELS, item.choices, strict=True)]
    return "Choices:\n" + "\n".join(lines) + "\n"


class GpqaTask(Task):
    """A GPQA variant over one subset. Chat variant: one user message, the cot_zeroshot
    question layout followed by an instruction to end with "The answer is (X)"; the
    reply is cut to its answer section first (text after the last ``</think>``, or all
    of it, left-stripped; ``[invalid]`` if a ``<think>`` block never closed), then lm-eval's two GPQA filters:
    ``strict-match`` = the rest of the line after the first "The answer is " minus its
    last character; ``flexible-extract`` = the last "(X)", else a choice's text, else
    ": X"."""

    def __init__(self, variant: GpqaVariant, items: Sequence[GpqaItem]) -> None:
        super().__init__(items)
        self.variant = variant
        self.name = variant.name
        self.version = variant.version
        self.upstream = variant.upstream
        self.dataset = f"gpqa_{variant.subset}"
        self.gen = variant.gen
        if variant.style == "zeroshot":
            self.kind = "loglikelihood"
            self.primary = "acc"
            self.filter_names = ("acc", "acc_norm")
        else:
            self.kind = "generate"
            assert variant.scoring is not None
            self.primary = variant.scoring.primary
            self.filter_names = tuple(e.name for e in variant.scoring.extractors)

    @property
    def is_chat(self) -> bool:
        return self.variant.style == "chat_cot_zeroshot"

    def _text(self, item: GpqaItem) -> str:
        style = self.variant.style
        if style == "generative_n_shot":
            query = f"Question: {item.question}\n{_choices_block(item)}Answer:"
            return text_prompt((), query, description=N_SHOT_DESCRIPTION)
        head = f"What is the correct answer to this question:{item.question}\n"
        if style == "zeroshot":
            return head + _choices_block(item) + "Answer:"
        if style == "cot_zeroshot":
            return head + _choices_block(item) + "Let's think step by step: "
        return head + _choices_block(item) + CHAT_INSTRUCTION

    def _render(self, item: GpqaItem) -> Request:
        text = self._text(item)
        if self.kind == "loglikelihood":
            continuations = tuple(f"{TARGET_DELIMITER}{label}" for label in CHOICE_LABELS)
            return Request(task=self.name, item_id=item.id, kind="loglikelihood",
                           prompt=text, continuations=continuations)
        if self.is_chat:
            return Request(task=self.name, item_id=item.id, kind="generate",
                           messages=(ChatMessage("user", text),), gen=self.gen)
        return Request(task=self.name, item_id=item.id, kind="generate", prompt=text,
                       gen=self.gen)

    def score(self, item: GpqaItem, response: Generation | Loglikelihoods) -> Score:
        item = self._own(item)
        if self.kind == "loglikelihood":
            continuations = tuple(f"{TARGET_DELIMITER}{label}" for label in CHOICE_LABELS)
            return score_loglikelihoods(response, continuations, CHOICE_LABELS,
                                        item.answer_index, self.name)
        assert self.variant.scoring is not None and self.gen is not None
        return score_generation(self.variant.scoring, self.gen, item.target, item.choices,
                                response, self.name)
