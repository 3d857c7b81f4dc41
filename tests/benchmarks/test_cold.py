"""benchmarks/cold.py and the kernel table's cold column, off the GPU: how many input
copies a cold reading cycles through (the fewest that move L2_FOOTPRINTS L2s between two
calls on one copy), that every tensor is cloned and nothing else, the calls' order, and
that the table reads the roofline on the cold time."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from benchmarks.cold import L2_FOOTPRINTS, clone_tensors, cold_copies, cycled_calls
from benchmarks.kernels import Case, markdown
from runtime.config import V41Config
from runtime.kv_packing import PackedKV, pack
from runtime.mhc import HcMix
from runtime.numerics import Numerics
from runtime.static.attention import KeyLayout

L2 = 50 * 2**20
ENV = {"gpu": "NVIDIA H200", "nvidia_smi": "x", "torch": "t", "triton": "t", "cuda": "c"}


@pytest.mark.parametrize("mb", [0.01, 4.2, 34.08, 100.0, 157.0, 158.0, 800.0])
def test_the_fewest_copies_that_move_the_footprint_between_two_calls_on_one(mb):
    bytes_ = mb * 2**20
    copies = cold_copies(bytes_, L2)
    need = L2_FOOTPRINTS * L2
    if bytes_ >= need:
        assert copies == 1  # one call moves it all by itself
    else:
        assert (copies - 1) * bytes_ >= need > (copies - 2) * bytes_


def test_a_call_that_moves_nothing_is_refused():
    with pytest.raises(ValueError, match="cold_copies: expected the bytes a call moves"):
        cold_copies(0, L2)


def test_every_tensor_is_cloned_and_everything_else_shared():
    config, num = V41Config.preset("tiny"), Numerics()
    mix = HcMix(torch.rand(2, 4), torch.rand(2, 4), torch.rand(2, 4, 4))
    args = (torch.rand(3), 5, mix, SimpleNamespace(weight=torch.rand(2, 2), name="w"), [torch.rand(1)],
            {"b": torch.rand(2)}, config, num)
    copy = clone_tensors(args)
    assert type(copy) is tuple and len(copy) == len(args)
    pairs = [(args[0], copy[0]), (mix.pre, copy[2].pre), (mix.post, copy[2].post), (mix.comb, copy[2].comb),
             (args[3].weight, copy[3].weight), (args[4][0], copy[4][0]), (args[5]["b"], copy[5]["b"])]
    for a, b in pairs:
        assert torch.equal(a, b) and a.data_ptr() != b.data_ptr()
    assert copy[1] == 5 and copy[3].name == "w"
    assert copy[6] is config and copy[7] is num  # no tensors inside: shared, not rebuilt


def test_a_packed_cache_and_a_key_layout_are_cloned_field_by_field():
    """The kernel table's ring rows: a PackedKV (a NamedTuple) and a KeyLayout (a frozen
    dataclass) come back as the same types, every tensor a copy, the format shared."""
    ring = pack(torch.randn(2, 8, 64), "fp8")
    pos, floor = torch.tensor([9, 12]), torch.zeros(2, dtype=torch.int64)
    layout = KeyLayout.for_window(pos, floor, 8, 64).with_topk(torch.tensor([[0, 3], [1, -1]]))
    copy_ring, copy_layout = clone_tensors((ring, layout))
    assert type(copy_ring) is PackedKV and copy_ring.fmt == "fp8"
    assert type(copy_layout) is KeyLayout
    for a, b in ((ring.codes, copy_ring.codes), (ring.scales, copy_ring.scales), (layout.window, copy_layout.window),
                 (layout.entries, copy_layout.entries), (layout.bias, copy_layout.bias)):
        assert torch.equal(a, b) and a.data_ptr() != b.data_ptr()


@pytest.mark.parametrize("sets,reps,calls", [(1, 20, 20), (3, 20, 21), (37, 20, 37), (4, 20, 20)])
def test_the_calls_cycle_through_the_copies_in_whole_cycles(sets, reps, calls):
    seen = []
    fns = cycled_calls(seen.append, list(range(sets)), reps)
    for fn in fns:
        fn()
    assert len(fns) == calls and seen == [i % sets for i in range(calls)]


def big_case(graph_ms: float, cold_ms: float | None) -> Case:
    """34.08 MB (the indexer at 128k keys): 7.93 us at 4.3 TB/s."""
    return Case("indexer", "mid", "T=1 N=131072", bytes=34.08e6, flops=0.0, ref_ms=1.0, fused_ms=0.05,
                fused_graph_ms=graph_ms, fused_cold_ms=cold_ms, cold_copies=6 if cold_ms else 0)


def test_the_roofline_is_read_on_the_cold_time():
    hot_only = big_case(0.0064, None)
    assert hot_only.roofline_fraction == pytest.approx(34.08e6 / 4.3e12 / 6.4e-6)  # 124 %: L2 reads
    cold = big_case(0.0064, 0.0150)
    assert cold.roofline_fraction == pytest.approx(34.08e6 / 4.3e12 / 15.0e-6)  # 53 %
    doc = markdown(ENV, [cold, big_case(0.0064, 0.0120)], "cmd", [0.0009])
    assert "| 0.00640 | 0.01500 | 6 | - | 20.0x | 53% | memory | >= 60% roofline | NOT met |" in doc
    assert "| 0.00640 | 0.01200 | 6 | - | 20.0x | 66% | memory | >= 60% roofline | met |" in doc
    assert "Goal met on 1 of 2" in doc


def test_small_cases_get_no_cold_reading():
    small = Case("inv_rope", "mid", "R=1", bytes=50_000, flops=0.0, ref_ms=0.1, fused_ms=0.05, fused_graph_ms=0.0015)
    assert not small.holds_to_roofline
    assert "| 0.00150 | - | - | - | 2.0x |" in markdown(ENV, [small], "cmd", [0.0009])


def test_the_sweep_table_shows_cold_columns_where_measured():
    from benchmarks.tile_sweep import markdown as sweep_markdown

    floors = {"empty_us": 0.9, "load_store_us": 0.95}
    hot = {"op": "indexer", "scale": "mid", "rows": 1, "config": "N=8192: default", "mb": 2.13, "us": 2.5,
           "roofline": 0.2, "max_rel_err": 1e-7}
    cold = {**hot, "rows": 8, "mb": 34.08, "us": 6.4, "roofline": 1.24, "cold_us": 15.0, "cold_copies": 6,
            "cold_roofline": 0.53}
    doc = sweep_markdown(ENV, [hot, cold], floors, "cmd")
    assert "| indexer | mid | 1 | N=8192: default | 2.13 | 2.50 | 20% | 1.0e-07 | - | - |" in doc
    assert "| indexer | mid | 8 | N=8192: default | 34.08 | 6.40 | 124% | 1.0e-07 | 15.00 | 53% |" in doc


def test_the_cold_reading_replays_clones_and_reuses_a_replay_that_was_cold(monkeypatch):
    """Below 3 L2s a call cycles through its clones in one replayed graph; from 3 L2s the
    hot replay already read its inputs from HBM and is not measured again."""
    from benchmarks import cold

    monkeypatch.setattr(cold, "l2_bytes", lambda: L2)
    replayed = []

    def graph_calls_ms(fns):
        replayed.append(fns)
        for fn in fns:
            fn()
        return 0.25

    seen = []
    x = torch.rand(4)
    ms, copies = cold.cold_graph_ms(lambda a: seen.append(a[0].data_ptr()), (x,), 100 * 2**20, graph_calls_ms, 0.1)
    # 100 MiB: the two others move 200 MiB >= 3 x 50 MiB between two calls on one; 7 whole cycles
    assert (ms, copies) == (0.25, 3) and len(replayed) == 1 and len(replayed[0]) == 21
    assert len(set(seen)) == 3 and seen[:3] == seen[3:6] and seen[0] == x.data_ptr()
    ms, copies = cold.cold_graph_ms(lambda a: None, (x,), 160 * 2**20, graph_calls_ms, 0.1)
    assert (ms, copies) == (0.1, 1) and len(replayed) == 1
    # a call whose hot replay was not captured is not read cold: nothing replayed, no clones
    ms, copies = cold.cold_graph_ms(lambda a: seen.append(a), (x,), 100 * 2**20, graph_calls_ms, None)
    assert (ms, copies) == (None, 3) and len(replayed) == 1 and len(seen) == 21
