"""Planted degradations and calibration: perturbation inputs are checked, the noise has
the set size and does not depend on the batch, the shrunk window shares the weights
and changes the model, and calibration sees planted damage while its A/A control
stays exactly clean."""

from __future__ import annotations

import pytest
import torch

from runtime.model import SeqChunk, V41Model
from runtime.options import RuntimeOptions
from tasks.request import GenerationParams, Request
from validate.engines.builtin import BuiltinEngineConfig
from validate.engines.builtin_source import ModelSource, WeightsPool
from validate.errors import ValidateInputError
from validate.fidelity.calibrate import calibrate, planted_levels
from validate.perturb import Perturbation, perturbation_from

SOURCE = ModelSource.micro(seed=6)


@pytest.fixture(scope="module")
def weights():
    return WeightsPool().weights(SOURCE)


def test_perturbation_tables_are_checked():
    assert perturbation_from({"logit_noise": 0.5, "drop_window": 4}) == Perturbation(4, 0.5)
    for table, fragment in [({"noise": 1}, "unknown key"), ({"logit_noise": True}, "a number"),
                            ({"drop_window": 1.5}, "an integer"),
                            ({"logit_noise": -1.0}, ">= 0")]:
        with pytest.raises(ValidateInputError, match=fragment):
            perturbation_from(table)


def _last_logits(model, ids_list):
    outs = model.forward([SeqChunk(model.new_state(), torch.tensor(ids), "last")
                          for ids in ids_list])
    return [o.logits[-1] for o in outs]


def test_logit_noise_has_the_set_size_and_ignores_the_batch(weights):
    clean = V41Model(weights, RuntimeOptions())
    noisy = Perturbation(logit_noise=0.5, seed=1).wrap(V41Model(weights, RuntimeOptions()))
    a, b = [5, 6, 7, 8, 9], [40, 41, 42]
    alone = _last_logits(noisy, [a])[0]
    batched = _last_logits(noisy, [b, a])[1]
    torch.testing.assert_close(alone, batched, rtol=1e-5, atol=1e-5)
    diff = alone - _last_logits(clean, [a])[0]
    assert float(diff.std()) == pytest.approx(0.5, rel=0.15)  # 512 draws of N(0, 0.25)
    other_seed = Perturbation(logit_noise=0.5, seed=2).wrap(V41Model(weights, RuntimeOptions()))
    assert not torch.allclose(_last_logits(other_seed, [a])[0], alone)


def test_drop_window_shares_weights_and_changes_long_prompts_only(weights):
    view = Perturbation(drop_window=8).apply_weights(weights)
    assert view.config.sliding_window == 8 and weights.config.sliding_window == 16
    assert view.embed.weight is weights.embed.weight
    clean, shrunk = V41Model(weights, RuntimeOptions()), V41Model(view, RuntimeOptions())
    short, long = list(range(3, 9)), list(range(3, 43))
    torch.testing.assert_close(_last_logits(clean, [short])[0], _last_logits(shrunk, [short])[0])
    assert not torch.allclose(_last_logits(clean, [long])[0], _last_logits(shrunk, [long])[0])
    with pytest.raises(ValidateInputError, match="smaller than the window of 16"):
        Perturbation(drop_window=16).apply_weights(weights)


@pytest.mark.slow
def test_calibration_detects_planted_damage_and_keeps_the_control_clean():
    prompts = ["Q: 12 + 30 = ? Think step by step, then answer.\nA:",
               "List three fruits, one per line, then stop.\nAnswer:"]
    requests = [Request("toy", f"p{k}", "generate", prompt=p,
                        gen=GenerationParams(max_gen_toks=4)) for k, p in enumerate(prompts)]
    result = calibrate(BuiltinEngineConfig(source=SOURCE), requests,
                       planted_levels([1.0], [8]), max_new_tokens=4)
    labels = [level.label for level in result.levels]
    assert labels == ["none", "logit_noise=1", "drop_window=8"]
    assert result.control_clean
    none, noise, drop = result.levels
    assert none.fidelity.kl_mean == 0.0 and not none.detected
    assert noise.detected and noise.fidelity.kl_mean > 0.1
    assert drop.fidelity.kl_mean > 0
    assert result.to_dict()["levels"][1]["perturbation"]["logit_noise"] == 1.0
