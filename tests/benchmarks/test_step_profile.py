"""benchmarks/step_profile.py's arithmetic (no GPU): the union of kernel intervals against
a per-microsecond timeline, per-replay figures, the kinds of the kernel names the H200
profile reported, and the CPU-side flags of benchmarks/decode.py's per-op kernel choice."""

from __future__ import annotations

import random

import pytest

from benchmarks.decode import kernel_choice, runs_packed
from benchmarks.step_profile import busy_us, kernel_kind, replay_summary


def timeline_busy(kernels) -> int:
    """Microseconds covered by at least one [start, start + duration) (integer times)."""
    covered = set()
    for _, start, dur in kernels:
        covered.update(range(int(start), int(start + dur)))
    return len(covered)


@pytest.mark.parametrize("seed", range(5))
def test_busy_is_the_union_of_intervals(seed):
    rng = random.Random(seed)
    kernels = sorted((("k", rng.randrange(0, 300), rng.randrange(1, 40)) for _ in range(60)), key=lambda k: k[1])
    assert busy_us(kernels) == timeline_busy(kernels)


def test_replay_summary_is_per_replay():
    kernels = [("nvjet_sm90_tst_8x64", 0.0, 4.0), ("_gate_kernel", 5.0, 2.0),
               ("nvjet_sm90_tst_8x64", 10.0, 4.0), ("_gate_kernel", 15.0, 2.0)]
    s = replay_summary(kernels, replays=2)
    assert (s["kernels"], s["kernel_us"], s["busy_us"], s["span_us"]) == (2.0, 6.0, 6.0, 8.5)
    assert [(k["name"], k["count"], k["us"]) for k in s["by_name"]] == [("nvjet_sm90_tst_8x64", 1.0, 4.0),
                                                                         ("_gate_kernel", 1.0, 2.0)]
    assert s["by_kind"] == {"GEMM": {"count": 1.0, "us": 4.0}, "registry Triton": {"count": 1.0, "us": 2.0}}


@pytest.mark.parametrize("name,kind", [
    ("_ZN7cutlass13device_kernelIN2at4cuda6detail25enable_3x_kernel_for_sm9xINS_4gemm6kernel13GemmUniversal"
     "IN4cute5tupleIJNS5_8GroupProblemShape", "grouped GEMM"),
    ("void at::cuda::detail::prepare_grouped_gemm_data<cutlass::bfloat16_t>", "grouped GEMM"),
    ("nvjet_sm90_tst_8x64_64x16_4x1_v_bz_TNN", "GEMM"),
    ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize32x64x8", "GEMM"),
    ("triton_per_fused__to_copy_add_mean_mul_pow_rsqrt_0", "inductor"),
    ("_mhc_split_kernel", "registry Triton"),
    ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda>", "copy"),
    ("void at::native::_scatter_gather_elementwise_kernel<128, 8>", "index/scatter"),
    ("void at::native::reduce_kernel<128, 4>", "reduction"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor>", "elementwise"),
    ("Memcpy DtoD (Device -> Device)", "copy"),
    ("something_else", "other"),
])
def test_kernel_kinds(name, kind):
    assert kernel_kind(name) == kind


def test_kernel_choices_are_validated_and_packed_follows_the_attention_choice():
    assert kernel_choice("all,-linear,-experts") == "all,-linear,-experts"
    with pytest.raises(Exception, match="unknown op 'nope'"):
        kernel_choice("all,-nope")
    assert runs_packed("graphs", "all,-linear") and not runs_packed("graphs", "all,-attention")
    assert not runs_packed("engine", "fused")


def test_inductor_kernels_named_after_a_grouped_gemm_are_inductor_kernels():
    assert kernel_kind("triton_poi_fused__grouped_mm_floor_divide_index_sort_transpose_view_2") == "inductor"
