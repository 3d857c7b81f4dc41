"""lm-eval 0.4.13 drives the builtin runtime through the registered ``v41val`` model:
``simple_evaluate`` on tiny local tasks (multiple choice and generate_until) runs, and
its loglikelihoods and generations equal the builtin engine's on the same inputs."""

from __future__ import annotations

import pytest

lm_eval = pytest.importorskip("lm_eval")

from lm_eval.api.registry import get_model  # noqa: E402
from lm_eval.tasks import TaskManager  # noqa: E402

import validate.lmeval_model  # noqa: E402,F401  (registers "v41val")
from runtime.options import RuntimeOptions  # noqa: E402
from tasks.request import GenerationParams, Request  # noqa: E402
from validate.engines.builtin import BuiltinEngine, BuiltinEngineConfig  # noqa: E402
from validate.engines.builtin_source import ModelSource, WeightsPool  # noqa: E402
from validate.errors import ValidateInputError  # noqa: E402


def test_registered_and_bad_args_are_one_line_errors():
    assert get_model("v41val") is validate.lmeval_model.V41ValLM
    with pytest.raises(ValidateInputError, match="unknown argument"):
        validate.lmeval_model.V41ValLM(preset="micro", temprature=1)
    with pytest.raises(ValidateInputError, match="encoder_replay expects true/false"):
        validate.lmeval_model.V41ValLM(preset="micro", encoder_replay="maybe")


@pytest.mark.slow
def test_simple_evaluate_matches_the_builtin_engine(toy_lmeval_tasks, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    from lm_eval import simple_evaluate

    manager = TaskManager(include_path=str(toy_lmeval_tasks))
    out = simple_evaluate(model="v41val", model_args="preset=micro,seed=4,swa=bounded",
                          tasks=["v41val_toy_mc", "v41val_toy_gen"], task_manager=manager,
                          log_samples=True, batch_size=4)
    assert out["config"]["model"] == "v41val"
    engine = BuiltinEngine(BuiltinEngineConfig(source=ModelSource.micro(seed=4),
                                               options=RuntimeOptions(swa="bounded")),
                           WeightsPool())
    mc = sorted(out["samples"]["v41val_toy_mc"], key=lambda s: s["doc_id"])
    assert len(mc) == 3
    for sample in mc:
        context = sample["arguments"][0][0]
        assert all(args[0] == context for args in sample["arguments"])
        conts = tuple(args[1] for args in sample["arguments"])
        ours = engine.run([Request("toy", str(sample["doc_id"]), "loglikelihood",
                                   prompt=context, continuations=conts)])[0].response
        theirs = [float(r[0][0]) for r in sample["resps"]]
        assert theirs == pytest.approx(list(ours.values), abs=1e-4)
        assert [bool(r[0][1]) for r in sample["resps"]] == list(ours.is_greedy)
    gen = sorted(out["samples"]["v41val_toy_gen"], key=lambda s: s["doc_id"])
    for sample in gen:
        context = sample["arguments"][0][0]
        ours = engine.run([Request("toy", "g", "generate", prompt=context,
                                   gen=GenerationParams(max_gen_toks=4, until=("\n\n",)))])[0]
        assert sample["resps"][0][0] == ours.response.text
    acc = out["results"]["v41val_toy_mc"]["acc,none"]
    assert 0.0 <= acc <= 1.0


def test_lm_eval_cli_default_device_falls_back_to_cpu(capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device exists here")
    lm = validate.lmeval_model.V41ValLM(preset="micro", device="cuda:0", batch_size=2)
    assert lm.source.device == "cpu" and lm.batch == 2
    assert "device cuda:0 is not available; using cpu" in capsys.readouterr().err


def test_registering_v41val_keeps_lm_evals_own_models(repo_root):
    """lm-eval fills its registry only when it is empty at the first lookup; a fresh
    process that imports this module first must still find ``local-completions``."""
    import os
    import subprocess
    import sys

    code = ("import validate.lmeval_model\n"
            "from lm_eval.api.registry import get_model\n"
            "print(get_model('local-completions').__name__, get_model('v41val').__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "PYTHONPATH": str(repo_root)})
    assert out.stdout.split() == ["LocalCompletionsAPI", "V41ValLM"], out.stderr[-2000:]
