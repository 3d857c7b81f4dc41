"""Helpers that drive lm-eval 0.4.13 itself as the reference for the parity tests
(offered to the tests as the ``lm_eval_ref`` fixture).

Only lm-eval's own installed task YAMLs and code are used: the YAMLs are read from
the installed package and pointed at the shipped json files, then loaded with
``TaskManager(include_path=..., include_defaults=False)`` and seeded as
``simple_evaluate`` seeds them (``set_fewshot_seed(1234)``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import yaml

GSM8K_YAMLS = {
    "gsm8k": "gsm8k.yaml",
    "gsm8k_cot": "gsm8k-cot.yaml",
    "gsm8k_cot_zeroshot": "gsm8k-cot-zeroshot.yaml",
    "gsm8k_chat_cot_zeroshot": "gsm8k-cot-llama.yaml",  # filters + metric only
}
GPQA_YAMLS = {
    "zeroshot": "zeroshot/_gpqa_zeroshot_yaml",
    "cot_zeroshot": "cot_zeroshot/_gpqa_cot_zeroshot_yaml",
    "generative_n_shot": "generative/_gpqa_generative_n_shot_yaml",
    "chat_cot_zeroshot": "cot_zeroshot/_gpqa_cot_zeroshot_yaml",  # filters + metric only
}


def lm_eval_tasks_dir() -> Path:
    import lm_eval

    return Path(lm_eval.__file__).resolve().parent / "tasks"


class _TolerantLoader(yaml.SafeLoader):
    """Reads lm-eval YAMLs that hold ``!function`` tags (kept as plain strings)."""


_TolerantLoader.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))


def read_lm_eval_yaml(relpath: str) -> dict:
    return yaml.load((lm_eval_tasks_dir() / relpath).read_text(), Loader=_TolerantLoader)


def offline_env(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf_home" / "datasets"))
    monkeypatch.setenv("TQDM_DISABLE", "1")
    os.environ.pop("HF_DATASETS_TRUST_REMOTE_CODE", None)


def write_local_gsm8k_yamls(dest: Path, data_dir: Path) -> None:
    """lm-eval's installed gsm8k YAMLs, changed only to read the local json files."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("gsm8k", "gsm8k_cot", "gsm8k_cot_zeroshot"):
        config = read_lm_eval_yaml(f"gsm8k/{GSM8K_YAMLS[name]}")
        assert config["task"] == name
        config.pop("tag", None)
        config.pop("dataset_name", None)
        config["dataset_path"] = "json"
        config["dataset_kwargs"] = {"data_files": {
            "train": str(data_dir / "gsm8k" / "train.jsonl"),
            "test": str(data_dir / "gsm8k" / "test.jsonl"),
        }}
        (dest / f"{name}.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


def cache_jinja_compilation(monkeypatch) -> None:
    """lm-eval compiles every template string anew on each use (``env.from_string``);
    memoising the compilation changes no output and makes rendering all 1,319 prompts
    several times faster."""
    from functools import lru_cache

    import lm_eval.utils

    monkeypatch.setattr(lm_eval.utils.env, "from_string",
                        lru_cache(maxsize=None)(lm_eval.utils.env.from_string))


def load_lm_eval_tasks(include_dir: Path, names: list[str]) -> dict:
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_path=str(include_dir), include_defaults=False)
    loaded = manager.load(names)["tasks"]
    for task in loaded.values():
        task.set_fewshot_seed(seed=1234)  # what simple_evaluate does (fewshot_random_seed)
    return loaded


def lm_eval_filter(filter_config: dict):
    """Instantiate lm-eval's own filter class for one ``filter_list`` entry."""
    from lm_eval.filters.extraction import MultiChoiceRegexFilter, RegexFilter

    steps = filter_config["filter"]
    assert steps[-1]["function"] == "take_first" and len(steps) == 2
    kwargs = {k: v for k, v in steps[0].items() if k != "function"}
    cls = {"regex": RegexFilter, "multi_choice_regex": MultiChoiceRegexFilter}[steps[0]["function"]]
    return cls(**kwargs)


def lm_eval_exact_match(metric_config: dict):
    """lm-eval's ``exact_match`` with the task config's keyword arguments."""
    from lm_eval.api.metrics import exact_match_hf_evaluate

    kwargs = {k: v for k, v in metric_config.items()
              if k not in ("metric", "aggregation", "higher_is_better")}

    def score(prediction: str, reference: str) -> float:
        return float(exact_match_hf_evaluate(predictions=[prediction], references=[reference],
                                             **kwargs)["exact_match"])

    return score


@pytest.fixture(scope="session")
def lm_eval_ref():
    """This module, so tests can call the helpers above without a package import."""
    return sys.modules[__name__]


@pytest.fixture(scope="session")
def adversarial():
    """The ``adversarial_responses`` helper module, loaded by path (tests here are not
    a package, so they cannot import siblings)."""
    import importlib.util

    path = Path(__file__).with_name("adversarial_responses.py")
    spec = importlib.util.spec_from_file_location("v41val_tasks_adversarial", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
