"""Responses that a perfect and a wrong model would give, per task style.

The self-check scores every item with both: every filter must give 1.0 to the gold
answer and 0.0 to the wrong one. That proves, on the real data, that targets,
prompts' answer formats, filters and the metric fit together (a target with a stray
character, a filter that cannot see the requested format, a scoring that ignores the
permutation would all show up).
"""

from __future__ import annotations

from tasks.gpqa import GpqaTask
from tasks.gpqa_data import LETTERS, GpqaItem
from tasks.gsm8k import Gsm8kTask
from tasks.gsm8k_data import Gsm8kItem
from tasks.request import Generation, Loglikelihoods
from tasks.task import Task
from tasks.testbed.data import TestbedItem
from tasks.testbed.task import TestbedTask

_REASONING = "<think>Let me work through this carefully.</think>"


def _wrong_number(final: str) -> str:
    return str(int(final.replace(",", "")) + 1)


def _gsm8k_answer(task: Gsm8kTask, number: str) -> Generation:
    name = task.variant.name
    if name == "gsm8k":
        return Generation(f"She computes it step by step.\n#### {number}")
    if task.is_chat:
        return Generation(f"{_REASONING}\nThe final answer is {number}")
    return Generation(f"Step by step, the result follows. The answer is {number}.")


def _gpqa_answer(task: GpqaTask, letter: str) -> Generation | Loglikelihoods:
    if task.kind == "loglikelihood":
        return Loglikelihoods(tuple(-0.25 if ltr == letter else -9.5 for ltr in LETTERS))
    prefix = _REASONING if task.is_chat else ""
    return Generation(f"{prefix}The answer is ({letter}).")


def _testbed_answer(item: TestbedItem, number: str) -> Generation:
    """The worked steps as a trained model writes them (leading space, stop ``\\n``),
    ending in ``#### number``: the gold answer for the true number."""
    steps = item.target.rsplit("####", 1)[0]
    return Generation(f" {steps}#### {number}\n")


def gold_response(task: Task, item: Gsm8kItem | GpqaItem | TestbedItem
                  ) -> Generation | Loglikelihoods:
    if isinstance(task, TestbedTask):
        return _testbed_answer(item, item.final_answer)
    if isinstance(task, Gsm8kTask):
        return _gsm8k_answer(task, item.final_answer)
    return _gpqa_answer(task, LETTERS[item.answer_index])


def wrong_response(task: Task, item: Gsm8kItem | GpqaItem | TestbedItem
                   ) -> Generation | Loglikelihoods:
    if isinstance(task, TestbedTask):
        return _testbed_answer(item, _wrong_number(item.final_answer))
    if isinstance(task, Gsm8kTask):
        return _gsm8k_answer(task, _wrong_number(item.final_answer))
    return _gpqa_answer(task, LETTERS[(item.answer_index + 1) % 4])
