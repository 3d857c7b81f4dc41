"""Task names -> task objects. Data is loaded (and checksummed) on first use and kept
per data directory, so ``get`` is cheap after the first call for a dataset.
``info`` describes a task without loading anything (see ``TaskInfo``)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tasks.errors import TaskConfigError, UnknownTaskError
from tasks.gpqa import GPQA_VARIANTS, GpqaTask, GpqaVariant
from tasks.gpqa_data import GPQA_SUBSET_SIZES, load_gpqa
from tasks.gsm8k import GSM8K_VARIANTS, Gsm8kTask, Gsm8kVariant
from tasks.gsm8k_data import GSM8K_TEST_SIZE, load_gsm8k_test, load_gsm8k_train
from tasks.task import Task, TaskInfo
from tasks.testbed.catalog import ALL_SPECS as SPECS
from tasks.testbed.data import load_testbed
from tasks.testbed.task import PROBE_VARIANTS, TESTBED_VARIANTS, TestbedTask, TestbedVariant

_VARIANTS: dict[str, Gsm8kVariant | GpqaVariant | TestbedVariant] = {
    v.name: v for v in (*GSM8K_VARIANTS, *GPQA_VARIANTS, *TESTBED_VARIANTS,
                      *PROBE_VARIANTS)
}


def names() -> list[str]:
    """Every task name in a fixed order: GSM8K family, GPQA family, testbed tasks,
    boundary probes."""
    return list(_VARIANTS)


def _variant(name: str, max_gen_toks: int | None):
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
    return variant


def get(name: str, data_dir: Path | str | None = None,
        max_gen_toks: int | None = None) -> Task:
    """The task called ``name`` with its items loaded from ``data_dir`` (default: the
    data shipped in the package). ``max_gen_toks`` overrides the variant's generation
    budget (recorded in every request); it is refused for multiple-choice tasks."""
    variant = _variant(name, max_gen_toks)
    directory = None if data_dir is None else Path(data_dir)
    if isinstance(variant, TestbedVariant):
        return TestbedTask(variant, load_testbed(name, directory))
    if isinstance(variant, Gsm8kVariant):
        return Gsm8kTask(variant, load_gsm8k_test(directory),
                         load_gsm8k_train(directory) if variant.shots == "train_random" else ())
    return GpqaTask(variant, load_gpqa(variant.subset, directory))


def _item_count(variant) -> int:
    """The number of items the variant's loader requires of the shipped file (it
    refuses a file with any other count, so this is the count ``get`` gives)."""
    if isinstance(variant, TestbedVariant):
        return SPECS[variant.name].test_size
    if isinstance(variant, Gsm8kVariant):
        return GSM8K_TEST_SIZE
    return GPQA_SUBSET_SIZES[variant.subset]


def info(name: str, max_gen_toks: int | None = None) -> TaskInfo:
    """``get(name).describe()`` as a ``TaskInfo``, without reading any data: the
    variant's task bound to no items (every attribute a task derives from its variant)
    and the item count from ``_item_count``. No GPQA decrypt, no ``datasets`` import;
    ``tests/tasks/test_task_info.py`` checks it against ``get`` for every task."""
    variant = _variant(name, max_gen_toks)
    if isinstance(variant, TestbedVariant):
        shell: Task = TestbedTask(variant, ())
    elif isinstance(variant, Gsm8kVariant):
        shell = Gsm8kTask(variant, (), ())
    else:
        shell = GpqaTask(variant, ())
    return shell.info(n_items=_item_count(variant))
