"""lm-eval's own GSM8K tasks, pointed at the GSM8K files that ship with v41val, so
``v41val-lm-eval ... --tasks gsm8k`` and ``simple_evaluate(model="v41val")`` run offline.

lm-eval 0.4.13's GSM8K configs read ``openai/gsm8k`` from the Hugging Face Hub. Each
override written here is two lines of substance: it ``include``s lm-eval's installed YAML
by absolute path (prompts, few-shot split, filters and metrics stay exactly lm-eval's)
and replaces only where the documents come from: ``dataset_path: json`` with the shipped,
checksum-verified ``train.jsonl``/``test.jsonl`` (the same rows as ``openai/gsm8k`` main,
``tasks/data/README.md``). lm-eval's task index lets an ``include_path`` override a
built-in task of the same name, so the task names users know keep working.

GPQA is not offered this way: lm-eval's GPQA configs read the gated Hub dataset, and
v41val keeps GPQA inside its zip, read in memory, never written to disk (``v41val run``
scores GPQA with lm-eval-identical prompts instead).
"""

from __future__ import annotations

import json
from pathlib import Path

from tasks.data_files import GSM8K_TEST, GSM8K_TRAIN, read_verified, resolve_data_dir

# lm-eval task name -> its YAML file in lm_eval/tasks/gsm8k (0.4.13)
GSM8K_TASK_FILES = {
    "gsm8k": "gsm8k.yaml",
    "gsm8k_cot": "gsm8k-cot.yaml",
    "gsm8k_cot_zeroshot": "gsm8k-cot-zeroshot.yaml",
    "gsm8k_cot_llama": "gsm8k-cot-llama.yaml",
    "gsm8k_cot_self_consistency": "gsm8k-cot-self-consistency.yaml",
}


def lm_eval_gsm8k_dir() -> Path:
    import lm_eval

    return Path(lm_eval.__file__).resolve().parent / "tasks" / "gsm8k"


def write_offline_tasks(dest: str | Path, data_dir: str | Path | None = None) -> Path:
    """Write one override YAML per lm-eval GSM8K task into ``dest``; returns ``dest``.

    The data files are checksum-verified first (a damaged file is a one-line error
    before lm-eval starts). YAML is a superset of JSON, so each value is written as JSON:
    no quoting rules for the paths to get wrong."""
    root = resolve_data_dir(data_dir)
    files = {}
    for split, entry in (("train", GSM8K_TRAIN), ("test", GSM8K_TEST)):
        read_verified(entry, root)  # raises TaskDataError naming the file on a mismatch
        files[split] = str((root / entry.relpath).resolve())
    source = lm_eval_gsm8k_dir()
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    for task, filename in GSM8K_TASK_FILES.items():
        if not (source / filename).is_file():  # another lm-eval release: offer what exists
            continue
        override = {
            "include": str(source / filename),
            "task": task,
            "dataset_path": "json",
            "dataset_name": None,
            "dataset_kwargs": {"data_files": files},
        }
        lines = [f"{key}: {json.dumps(value)}" for key, value in override.items()]
        (dest / f"v41val_{task}.yaml").write_text("\n".join(lines) + "\n")
    return dest


def offline_task_manager(dest: str | Path, data_dir: str | Path | None = None):
    """An lm-eval ``TaskManager`` whose GSM8K tasks read the shipped files; pass it as
    ``simple_evaluate(..., task_manager=offline_task_manager(tmp_dir))``."""
    from lm_eval.tasks import TaskManager

    return TaskManager(include_path=str(write_offline_tasks(dest, data_dir)))
