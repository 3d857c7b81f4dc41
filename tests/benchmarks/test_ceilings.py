"""benchmarks/ceilings.py and the kernel table's "own roofline": a case's fraction of the
GPU's own measured ceilings beside the issue's (the H200's), verdicts unchanged."""

from __future__ import annotations

import pytest
import torch

from benchmarks.ceilings import H200_ISSUE, Ceilings
from benchmarks.kernels import Case, markdown

ENV = {"gpu": "NVIDIA H100 80GB HBM3", "nvidia_smi": "x", "torch": "t", "triton": "t", "cuda": "c"}
H100_LIKE = Ceilings(copy_bytes_per_s=3.0e12, bf16_flops_per_s=800e12)


def test_the_floor_is_the_larger_term_and_the_fraction_its_share_of_the_time():
    # 34.08 MB in 15 us: memory term 11.36 us at 3.0 TB/s, 7.93 us at 4.3
    assert H100_LIKE.fraction(34.08e6, 0.0, 15e-6) == pytest.approx(34.08e6 / 3.0e12 / 15e-6)
    assert H200_ISSUE.fraction(34.08e6, 0.0, 15e-6) == pytest.approx(34.08e6 / 4.3e12 / 15e-6)
    # 1 MB and 4e9 FLOP: 5 us of matrix work against 0.33 us of bytes
    assert H100_LIKE.floor_s(1e6, 4e9) == pytest.approx(4e9 / 800e12)
    assert not H100_LIKE.memory_bound(1e6, 4e9) and H100_LIKE.memory_bound(1e6, 1e6)


@pytest.mark.parametrize("rates", [(0.0, 1.0), (1.0, -1.0), (float("nan"), 1.0)])
def test_rates_that_are_not_positive_are_refused(rates):
    with pytest.raises(ValueError, match="Ceilings: expected positive rates"):
        Ceilings(*rates)


def held_case(cold_ms: float) -> Case:
    return Case("indexer", "mid", "T=1 N=131072", bytes=34.08e6, flops=1e6, ref_ms=0.7, fused_ms=0.03,
                fused_graph_ms=cold_ms / 2, fused_cold_ms=cold_ms, cold_copies=6)


def test_the_table_shows_the_own_roofline_beside_the_issues_and_keeps_the_verdict():
    # 15 us: 53 % of the H200's roofline (NOT met), 76 % of a 3.0 TB/s card's (would reach 60 %);
    # 25 us: 32 % and 45 %
    fast, slow = held_case(0.015), held_case(0.025)
    doc = markdown(ENV, [fast, slow], "cmd", [0.001], H100_LIKE)
    assert "| roofline | own roofline | bound | goal | met |" in doc
    assert f"| {34.08e6 / 4.3e12 / 15e-6:.0%} | {34.08e6 / 3.0e12 / 15e-6:.0%} | memory | >= 60% roofline | NOT met |" \
        in doc
    assert f"| {34.08e6 / 4.3e12 / 25e-6:.0%} | {34.08e6 / 3.0e12 / 25e-6:.0%} | memory |" in doc
    assert "Goal met on 0 of 2 memory-bound cases." in doc
    assert "Against this GPU's own measured ceilings, 1 of 2 cases held to the roofline reach 60% of it." in doc
    assert "copy 3.00 TB/s" in doc and "800 TFLOP/s" in doc


def test_without_measured_ceilings_the_table_has_no_own_column():
    doc = markdown(ENV, [held_case(0.015)], "cmd", [0.001])
    assert "own roofline" not in doc and "| 53% | memory |" in doc


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_the_measured_copy_rate_agrees_with_tritons_own_timer():
    """The copy rate from CUDA events against triton.testing.do_bench's reading of the
    same 1 GiB copy (an independent timer), within 15 %."""
    import triton.testing

    from benchmarks.ceilings import copy_bytes_per_s
    from benchmarks.kernels import median_ms

    nbytes = 1 << 30
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    ms = triton.testing.do_bench(lambda: dst.copy_(src), return_mode="median")
    assert copy_bytes_per_s(median_ms, nbytes) == pytest.approx(2 * nbytes / (ms * 1e-3), rel=0.15)
