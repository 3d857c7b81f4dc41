"""Fidelity math against independent recomputes: numpy/scipy float64 softmax and
relative entropy, hand cases for ties and divergence, statsmodels' cluster-robust SE."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import statsmodels.api as sm
import torch
from scipy.special import rel_entr

from validate.fidelity.errors import FidelityError
from validate.fidelity.metrics import (
    first_divergence,
    first_token_difference,
    kl_per_token,
    top1_agreement,
)
from validate.fidelity.summary import EXACT, PromptFidelity, summarize
from validate.fidelity.topk import coarse_kl, known_logprobs, top1_of


def _softmax64(x: np.ndarray) -> np.ndarray:
    z = np.exp(x - x.max(axis=-1, keepdims=True))
    return z / z.sum(axis=-1, keepdims=True)


def test_kl_matches_scipy_rel_entr_in_float64():
    rng = np.random.default_rng(0)
    base = rng.normal(size=(6, 50)) * 3
    variant = base + rng.normal(size=(6, 50)) * np.array([0, 0.01, 0.1, 1, 3, 10])[:, None]
    got = kl_per_token(torch.tensor(base, dtype=torch.float32),
                       torch.tensor(variant, dtype=torch.float32))
    p = _softmax64(base.astype(np.float32).astype(np.float64))
    q = _softmax64(variant.astype(np.float32).astype(np.float64))
    want = rel_entr(p, q).sum(axis=-1)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    assert got[0] == 0.0 and np.all(np.diff(got) > 0)  # more noise, more divergence here


def test_kl_is_asymmetric_and_zero_only_for_equal_rows():
    base = torch.tensor([[0.0, 0.0, 5.0]])
    variant = torch.tensor([[5.0, 0.0, 0.0]])
    forward = kl_per_token(base, variant)[0]
    backward = kl_per_token(variant, base)[0]
    assert forward == pytest.approx(backward)  # mirror image: equal here by symmetry
    skewed = torch.tensor([[0.0, 1.0, 2.0]])
    assert kl_per_token(skewed, base)[0] != pytest.approx(kl_per_token(base, skewed)[0])
    # hand value: P = softmax([0, ln 3]) = (1/4, 3/4), Q = (1/2, 1/2)
    p_logits = torch.tensor([[0.0, math.log(3.0)]])
    q_logits = torch.tensor([[0.0, 0.0]])
    hand = 0.25 * math.log(0.25 / 0.5) + 0.75 * math.log(0.75 / 0.5)
    assert kl_per_token(p_logits, q_logits)[0] == pytest.approx(hand, rel=1e-6)
    with pytest.raises(FidelityError, match=r"\[tokens, vocab\]"):
        kl_per_token(p_logits, torch.zeros(1, 3))


def test_top1_agreement_ties_and_first_divergence():
    base = torch.tensor([[1.0, 3.0, 3.0], [5.0, 0.0, 0.0], [0.0, 0.0, 1.0], [2.0, 2.0, 0.0]])
    variant = torch.tensor([[0.0, 3.0, 3.0], [5.0, 6.0, 0.0], [0.0, 0.0, 2.0], [1.0, 2.0, 0.0]])
    agree = top1_agreement(base, variant)
    assert agree.tolist() == [True, False, True, False]  # ties -> lowest id (row 0: id 1)
    assert first_divergence(agree) == 1
    assert first_divergence(np.array([True, True])) is None
    assert first_token_difference([1, 2, 3], [1, 2, 4]) == 2
    assert first_token_difference([1, 2], [1, 2, 3]) == 2
    assert first_token_difference((5,), (5,)) is None


def test_topk_approximation_is_a_lower_bound_and_exact_with_the_whole_vocabulary():
    rng = np.random.default_rng(1)
    vocab = [f"t{i}" for i in range(40)]
    for trial in range(20):
        p = _softmax64(rng.normal(size=40) * 2)
        q = _softmax64(np.log(p) + rng.normal(size=40) * (0.1 + trial / 10))
        exact = float(rel_entr(p, q).sum())
        forced = int(rng.integers(40))
        for k in (1, 3, 10):
            top_p = [(vocab[i], math.log(p[i])) for i in np.argsort(-p)[:k]]
            top_q = [(vocab[i], math.log(q[i])) for i in np.argsort(-q)[:k]]
            approx = coarse_kl(known_logprobs(vocab[forced], math.log(p[forced]), top_p),
                               known_logprobs(vocab[forced], math.log(q[forced]), top_q))
            assert 0.0 <= approx <= exact + 1e-9
        everything_p = {vocab[i]: math.log(p[i]) for i in range(40)}
        everything_q = {vocab[i]: math.log(q[i]) for i in range(40)}
        assert coarse_kl(everything_p, everything_q) == pytest.approx(exact, rel=1e-6, abs=1e-9)


def test_topk_hand_example_and_top1():
    # P = (0.5, 0.3, 0.2), Q = (0.4, 0.4, 0.2); known: token a on both, b only on P's side
    base = {"a": math.log(0.5), "b": math.log(0.3)}
    variant = {"a": math.log(0.4)}
    hand = 0.5 * math.log(0.5 / 0.4) + 0.5 * math.log(0.5 / 0.6)
    assert coarse_kl(base, variant) == pytest.approx(hand, rel=1e-9)
    assert top1_of([("x", -2.0), ("y", -0.5), ("z", -0.5)]) == "y"
    with pytest.raises(FidelityError, match="no token is known under both"):
        coarse_kl({"a": -1.0}, {"b": -1.0})


def test_summary_mean_clustered_se_p99_and_divergence():
    records = [
        PromptFidelity("a", tuple(float(x) for x in range(0, 50)), (True,) * 50),
        PromptFidelity("b", tuple(float(x) for x in range(50, 101)),
                       (True,) * 10 + (False,) + (True,) * 40),
        PromptFidelity("c", (0.5, 0.25), (True, False)),
        PromptFidelity("empty", (), ()),
    ]
    s = summarize(records, EXACT)
    values = np.array(list(range(0, 101)) + [0.5, 0.25], dtype=float)
    groups = np.array([0] * 50 + [1] * 51 + [2] * 2)
    assert s.n_prompts == 3 and s.n_tokens == 103
    assert s.kl_mean == pytest.approx(values.mean())
    ols = sm.OLS(values, np.ones_like(values)).fit(cov_type="cluster",
                                                    cov_kwds={"groups": groups})
    assert s.kl_se == pytest.approx(float(ols.bse[0]), rel=1e-9)
    top1 = np.array([1] * 50 + [1] * 10 + [0] + [1] * 40 + [1, 0], dtype=float)
    ols1 = sm.OLS(top1, np.ones_like(top1)).fit(cov_type="cluster", cov_kwds={"groups": groups})
    assert s.top1_agreement == pytest.approx(101 / 103)
    assert s.top1_agreement_se == pytest.approx(float(ols1.bse[0]), rel=1e-9)
    # p99 of 103 values by linear interpolation at rank 0.99 * 102 = 100.98
    ordered = np.sort(values)
    assert s.kl_p99 == pytest.approx(ordered[100] + 0.98 * (ordered[101] - ordered[100]))
    assert s.n_diverged == 2 and s.first_divergence_mean == pytest.approx(5.5)
    assert s.method == "exact full-vocab"


def test_summary_of_nothing_and_mismatched_record():
    s = summarize([], EXACT)
    assert s.n_tokens == 0 and s.kl_mean is None
    with pytest.raises(FidelityError, match="2 KL values but 1 top-1"):
        PromptFidelity("x", (0.0, 1.0), (True,))


def test_nonfinite_logits_are_counted_stored_as_null_and_undefine_the_kl_mean():
    """A broken variant's NaN row (and a -inf where the baseline has mass) must neither
    crash the store's strict JSON nor be averaged away."""
    base = torch.tensor([[0.0, 1.0, 2.0], [0.0, 1.0, 2.0], [2.0, 0.0, 0.0]])
    variant = torch.tensor([[0.0, 1.0, 2.0], [float("nan")] * 3, [float("-inf"), 0.0, 0.0]])
    kl = kl_per_token(base, variant)
    assert kl[0] == pytest.approx(0.0, abs=1e-12)
    assert np.isnan(kl[1]) and kl[2] == math.inf
    agree = top1_agreement(base, variant)
    assert agree.tolist() == [True, False, False]  # a NaN row agrees with nothing
    record = PromptFidelity("x", tuple(float(v) for v in kl), tuple(bool(a) for a in agree))
    stored = json.loads(json.dumps(record.to_dict(), allow_nan=False))
    assert stored["kl"][1:] == [None, None]
    back = PromptFidelity.from_dict(stored)
    s = summarize([back, PromptFidelity("y", (0.25,), (True,))], EXACT)
    assert s.n_tokens == 4 and s.n_nonfinite == 2
    assert s.kl_mean is None and s.kl_p99 is None and s.kl_se is None
    assert s.top1_agreement == pytest.approx(2 / 4)
