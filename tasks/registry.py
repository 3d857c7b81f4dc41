"""Task names -> task objects. Data is loaded (and checksummed) on first use and kept
per data directory, so ``get`` is cheap after the first call for a dataset."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tasks.errors import TaskConfigError, UnknownTaskError
from tasks.gpqa import GPQA_VARIANTS, GpqaTask, GpqaVariant
from tasks.gpqa_data import load_gpqa
from tasks.gsm8k import GSM8K_VARIANTS, Gsm8kTask, Gsm8kVariant
from tasks.gsm8k_data import load_gsm8k_test, load_gsm8k_train
from tasks.task import Task
from tasks.testbed.data import load_testbed
from tasks.testbed.task import TESTBED_VARIANTS, TestbedTask, TestbedVariant

_VARIANTS: dict[str, Gsm8kVariant | GpqaVariant | TestbedVariant] = {
    v.name: v for v in (*GSM8K_VARIANTS, *GPQA_VARIANTS, *TESTBED_VARIANTS)
}


def names() -> list[str]:
    """Every task name in a fixed order: GSM8K family, GPQA family, testbed tasks."""
    return list(_VARIANTS)


def get(name: str, data_dir: Path | str | None = None,
        max_gen_toks: int | None = None) -> Task:
    """The task called ``name`` with its items loaded from ``data_dir`` (default: the
    data shipped in the package). ``max_gen_toks`` overrides the variant's generation
    budget (recorded in every request); it is refused for multiple-choice tasks."""
    try:
        variant = _VARIANTS[name]
    except KeyError:
        raise UnknownTaskError(f"unknown task {name!r}; known tasks: {', '.join(names())}") \
            from None
    if max_gen_toks is not None:
        if variant.gen is None:
            raise TaskConfigError(f"task {name}: max_gen_toks does not apply to a "
                                  "multiple-choice (loglikelihood) task")
        if max_gen_toks < 1:
            raise TaskConfigError(f"task {name}: max_gen_toks must be >= 1, got {max_gen_toks}")
        variant = replace(variant, gen=replace(variant.gen, max_gen_toks=max_gen_toks))
    directory = None if data_dir is None else Path(data_dir)
    if isinstance(variant, TestbedVariant):
        return TestbedTask(variant, load_testbed(name, directory))
    if isinstance(variant, Gsm8kVariant):
        return Gsm8kTask(variant, load_gsm8k_test(directory),
                         load_gsm8k_train(directory) if variant.shots == "train_random" else ())
    return GpqaTask(variant, load_gpqa(variant.subset, directory))
