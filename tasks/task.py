"""What every task variant offers, and the scoring shared by all of them.

A ``Task`` is one lm-eval-style task variant bound to its loaded items. Its public
surface is small on purpose (the rest of the project depends on it):

    task.name, task.version, task.kind, task.max_gen_toks, task.primary
    task.is_chat, task.text_is_shareable, task.describe(), task.info()
    task.items() -> tuple[Item, ...]       each item has a stable string ``id`` and ``target``
    task.item(item_id) -> Item
    task.render(item) -> Request
    task.score(item, response) -> Score    response: Generation or Loglikelihoods
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tasks.errors import ResponseShapeError, UnknownItemError
from tasks.extraction import (
    INVALID,
    ExactMatch,
    MultiChoiceExtractor,
    RegexExtractor,
    answer_section,
    truncate_at_stops,
)
from tasks.request import Generation, GenerationParams, Loglikelihoods, Request
from tasks.score import Score

Extractor = RegexExtractor | MultiChoiceExtractor


@dataclass(frozen=True)
class GenerativeScoring:
    """How a generated answer is scored: filters in report order, the metric applied to
    each filter's output, the primary filter, and whether a reasoning block is cut
    off first (chat variants; see ``extraction.answer_section``)."""

    extractors: tuple[Extractor, ...]
    metric: ExactMatch
    primary: str
    reasoning_tolerant: bool = False


@dataclass(frozen=True)
class TaskInfo:
    """What a task variant is, without its items: ``describe()`` as a value.

    ``tasks.info(name)`` builds one without reading any data (the item count is the
    constant the loader checks the shipped file against), so commands that only need
    a task's kind, primary metric, budget or size (``tasks list``, ``report``,
    ``plan``) neither decrypt GPQA nor import ``datasets``."""

    name: str
    version: str
    kind: str
    chat: bool
    dataset: str
    n_items: int
    max_gen_toks: int | None
    filters: tuple[str, ...]
    primary: str
    upstream: str
    text_is_shareable: bool

    def to_dict(self) -> dict:
        return {"name": self.name, "version": self.version, "kind": self.kind,
                "chat": self.chat, "dataset": self.dataset, "n_items": self.n_items,
                "max_gen_toks": self.max_gen_toks, "filters": list(self.filters),
                "primary": self.primary, "upstream": self.upstream,
                "text_is_shareable": self.text_is_shareable}


class Task(ABC):
    """A task variant with its items. Subclasses set the attributes below in
    ``__init__`` and implement ``_render``/``score``."""

    name: str
    version: str
    kind: str  # "generate" | "loglikelihood"
    dataset: str
    primary: str
    filter_names: tuple[str, ...]
    gen: GenerationParams | None
    upstream: str  # the lm-eval 0.4.13 task this variant reproduces or derives from

    def __init__(self, items: Sequence[Any]) -> None:
        self._items = tuple(items)
        self._by_id = {item.id: item for item in self._items}

    @property
    def max_gen_toks(self) -> int | None:
        return None if self.gen is None else self.gen.max_gen_toks

    @property
    def is_chat(self) -> bool:
        return False

    @property
    def text_is_shareable(self) -> bool:
        """False for GPQA: its authors ask that questions never appear in plain text, so
        prompts, choices and per-sample logs of a GPQA task must stay in memory (store
        and report ``prompt_sha256`` and item ids instead)."""
        return not self.dataset.startswith("gpqa")

    def items(self) -> tuple[Any, ...]:
        return self._items

    def item(self, item_id: str) -> Any:
        try:
            return self._by_id[item_id]
        except KeyError:
            raise UnknownItemError(
                f"task {self.name}: no item with id {item_id!r} "
                f"(ids look like {self._items[0].id!r})"
            ) from None

    def render(self, item: Any) -> Request:
        return self._render(self._own(item))

    @abstractmethod
    def _render(self, item: Any) -> Request: ...

    @abstractmethod
    def score(self, item: Any, response: Generation | Loglikelihoods) -> Score: ...

    def _own(self, item: Any) -> Any:
        """Refuse items of another task, so a request always matches its task."""
        if self._by_id.get(getattr(item, "id", None)) != item:
            raise UnknownItemError(f"task {self.name}: item {getattr(item, 'id', item)!r} "
                                   "does not belong to this task")
        return item

    def info(self, n_items: int | None = None) -> TaskInfo:
        """This variant's ``TaskInfo``; ``n_items`` defaults to the items loaded."""
        return TaskInfo(name=self.name, version=self.version, kind=self.kind,
                        chat=self.is_chat, dataset=self.dataset,
                        n_items=len(self._items) if n_items is None else n_items,
                        max_gen_toks=self.max_gen_toks, filters=tuple(self.filter_names),
                        primary=self.primary, upstream=self.upstream,
                        text_is_shareable=self.text_is_shareable)

    def describe(self) -> dict:
        return self.info().to_dict()

    def __repr__(self) -> str:
        return f"<Task {self.name} v{self.version} ({len(self._items)} items)>"


def score_generation(
    scoring: GenerativeScoring,
    gen: GenerationParams,
    target: str,
    choices: Sequence[str],
    response: Generation | Loglikelihoods,
    task_name: str,
) -> Score:
    """lm-eval's generate_until scoring for one response: (reasoning cut,) stop-string
    truncation, each filter, then ``exact_match`` of each filter's output vs target."""
    if not isinstance(response, Generation):
        raise ResponseShapeError(f"task {task_name}: expected a Generation, got "
                                 f"{type(response).__name__}")
    # A null reply (some servers return null content) is scored as "", as lm-eval does.
    text: str | None = response.text if isinstance(response.text, str) else ""
    if scoring.reasoning_tolerant:
        text = answer_section(text)
    if text is None:
        extracted = {e.name: INVALID for e in scoring.extractors}
    else:
        text = truncate_at_stops(text, gen.until)
        extracted = {e.name: e.extract(text, choices) for e in scoring.extractors}
    values = {name: scoring.metric(answer, target) for name, answer in extracted.items()}
    return Score(values=values, extracted=extracted, primary=scoring.primary,
                 invalid=extracted[scoring.primary] == INVALID)


def score_loglikelihoods(
    response: Generation | Loglikelihoods,
    continuations: Sequence[str],
    choice_labels: Sequence[str],
    answer_index: int,
    task_name: str,
) -> Score:
    """lm-eval's multiple_choice scoring: ``acc`` = argmax of the log-likelihoods is
    the answer; ``acc_norm`` = the same after dividing by each choice's character
    length (equal lengths here, so equal to ``acc`` up to float ties). numpy's argmax,
    as in lm-eval: the first maximum wins and a NaN counts as the maximum."""
    if not isinstance(response, Loglikelihoods):
        raise ResponseShapeError(f"task {task_name}: expected Loglikelihoods, got "
                                 f"{type(response).__name__}")
    if len(response.values) != len(continuations):
        raise ResponseShapeError(f"task {task_name}: expected {len(continuations)} "
                                 f"log-likelihoods, got {len(response.values)}")
    lls = np.asarray(response.values, dtype=np.float64)
    lengths = np.asarray([float(len(label)) for label in choice_labels])
    pred = int(np.argmax(lls))
    pred_norm = int(np.argmax(lls / lengths))
    return Score(
        values={"acc": float(pred == answer_index), "acc_norm": float(pred_norm == answer_index)},
        extracted={"acc": choice_labels[pred], "acc_norm": choice_labels[pred_norm]},
        primary="acc",
        invalid=any(math.isnan(v) for v in response.values),
    )
