"""benchmarks/tile_sweep.py's ``timed``: the variants of one case are timed together (one
timer call over all of them, which on the GPU replays their graphs in turn), each row gets
its own variant's time and error, and a variant that could not be captured has no time
and no cold reading instead of a crash; the cold readings are taken together too, on one
set of clones of the case's inputs. The timers here are stand-ins (no GPU): they record
what they were given and answer known times."""

from __future__ import annotations

import pytest
import torch

from benchmarks import cold as cold_module
from benchmarks.kernels import HBM_BYTES_PER_S
from benchmarks.tile_sweep import ColdCall, Variant, markdown, timed


def test_the_variants_of_a_case_are_timed_in_one_call_each_row_with_its_own_time(monkeypatch):
    monkeypatch.setattr(cold_module, "l2_bytes", lambda: 2**21)  # 4.3 MB a call: 1 + ceil(6 MiB / 4.3 MB) = 3 copies
    want = torch.tensor([1.0, -2.0, 4.0])
    x = torch.arange(3.0)
    args = (x,)
    calls, cold_lists, seen = [], [], []

    def timer(fns):
        calls.append(list(fns))
        return [0.002, None, 0.004]

    def lists_timer(lists):
        cold_lists.append(lists)
        for calls_of_one in lists:
            for call in calls_of_one:
                call()
        return [0.008] * len(lists)

    fns = [lambda: 1, lambda: 2, lambda: 3]
    a_cold = ColdCall(lambda a: seen.append(("a", a[0].data_ptr())), args, 4.3e6)
    b_cold = ColdCall(lambda a: seen.append(("b", a[0].data_ptr())), args, 4.3e6)
    variants = [Variant("a", fns[0], want + torch.tensor([0.0, 0.0, 0.5]), want, a_cold),
                Variant("b", fns[1], want, want, b_cold),
                Variant("c", fns[2], (want, want * 2 + 0.25), (want, want * 2))]
    rows = timed("inv_rope", "mid", 8, 4.3, variants, timer=timer, lists_timer=lists_timer)
    assert calls == [fns]  # one call, every variant, in order
    assert [r["config"] for r in rows] == ["a", "b", "c"]
    assert [r["us"] for r in rows] == [2.0, None, 4.0]
    assert abs(rows[0]["roofline"] - 4.3e6 / HBM_BYTES_PER_S / 2e-6) < 1e-12
    assert rows[1]["roofline"] is None
    # worst |got - want| / max |want| over the outputs: 0.5 / 4, 0, 0.25 / 8
    assert [r["max_rel_err"] for r in rows] == [0.125, 0.0, 0.03125]
    # b has no time, so no cold reading; c asked for none: one list, a's 21 calls (whole cycles of 3 copies)
    assert len(cold_lists) == 1 and [len(calls_of_one) for calls_of_one in cold_lists[0]] == [21]
    assert [who for who, _ in seen] == ["a"] * 21 and seen[0][1] == x.data_ptr()
    assert len({ptr for _, ptr in seen}) == 3 and seen[0::3] == [seen[0]] * 7
    assert rows[0]["cold_us"] == 8.0 and rows[0]["cold_copies"] == 3
    assert "cold_us" not in rows[1] and "cold_us" not in rows[2]
    doc = markdown({"gpu": "g", "torch": "t", "triton": "tr", "cuda": "c"}, rows,
                   {"empty_us": 1.0, "load_store_us": 1.5}, "cmd")
    assert "| inv_rope | mid | 8 | b | 4.30 | n/a | n/a | 0.0e+00 | - | - |" in doc
    assert "| inv_rope | mid | 8 | a | 4.30 | 2.00 | 50% | 1.2e-01 | 8.00 | 12% |" in doc


def test_cold_readings_of_a_case_are_read_in_one_timer_call_on_shared_clones(monkeypatch):
    """Every variant's cold cycle goes to one ``lists_timer`` call (read in turn on the GPU),
    all cycling through the same copies; a case that moves 3 L2s a call keeps its hot times."""
    monkeypatch.setattr(cold_module, "l2_bytes", lambda: 2**20)
    x = torch.arange(3.0)
    args = (x,)
    seen, cold_lists = {}, []

    def lists_timer(lists):
        cold_lists.append(lists)
        for calls_of_one in lists:
            for call in calls_of_one:
                call()
        return [0.010 + i for i in range(len(lists))]

    def variant(name, args, bytes_moved=2e6):
        call = ColdCall(lambda a: seen.setdefault(name, []).append(a[0].data_ptr()), args, bytes_moved)
        return Variant(name, lambda: None, x, x, call)

    rows = timed("mhc", "mid", 512, 2.0, [variant("p", args), variant("q", args)],
                 timer=lambda fns: [0.001, 0.002], lists_timer=lists_timer)
    # 2 MB a call: 1 + ceil(3 MiB / 2 MB) = 3 copies, 21 calls (whole cycles) each, one timer call
    assert len(cold_lists) == 1 and [len(c) for c in cold_lists[0]] == [21, 21]
    assert seen["p"] == seen["q"] and len(set(seen["p"])) == 3  # the same clones, in the same order
    assert [r["cold_us"] for r in rows] == [10.0, 1010.0] and [r["cold_copies"] for r in rows] == [3, 3]
    rows = timed("mhc", "mid", 4096, 4.0, [variant("p", args, 4e6)], timer=lambda fns: [0.05],
                 lists_timer=lists_timer)
    assert len(cold_lists) == 1 and rows[0]["cold_us"] == 50.0 and rows[0]["cold_copies"] == 1
    with pytest.raises(ValueError, match="must share its inputs"):
        timed("mhc", "mid", 512, 2.0, [variant("p", args), variant("q", (x.clone(),))],
              timer=lambda fns: [0.001, 0.002], lists_timer=lists_timer)


def test_mhc_rows_carry_their_launch_grids():
    """Each mHC variant's launch grids come from its policy (row blocks of 16 x D splits;
    the finish one program per row for decode calls, its splits + 1), a module without a
    policy gets none, and the Markdown's per-launch line shows them."""
    from types import SimpleNamespace

    from benchmarks.tile_sweep import mhc_grids
    from runtime.kernels.mhc_tiles import MhcPolicy

    # flash (5120 = 80 D tiles of 64) at 96 rows: 6 row blocks; 512 programs -> 80 splits, 264 -> 40
    assert mhc_grids(SimpleNamespace(policy=MhcPolicy(decode_programs=512)), 96, 5120) == [[6, 80], [96, 81]]
    assert mhc_grids(SimpleNamespace(policy=MhcPolicy()), 96, 5120) == [[6, 40], [96, 41]]
    # mid 4,096 rows: the tail (32-row blocks, 128 of them, 4 splits), one launch
    assert mhc_grids(SimpleNamespace(policy=MhcPolicy()), 4096, 2048) == [[128, 4]]
    # the projection apart: sweep, projection (64-row blocks over the same splits), finish
    assert mhc_grids(SimpleNamespace(policy=MhcPolicy(apart_from=256)), 4096, 2048) == [[256, 8], [64, 8], [512, 9]]
    assert mhc_grids(SimpleNamespace(), 8, 2048) is None
    row = {"op": "mhc", "scale": "flash", "rows": 96, "config": "default", "mb": 11.82, "us": 19.0,
           "roofline": 0.14, "max_rel_err": 1e-3, "kernels_us": {"k #1": 10.21, "k #2": 8.88},
           "grids": [[6, 80], [96, 81]]}
    doc = markdown({"gpu": "g", "torch": "t", "triton": "tr", "cuda": "c"}, [row],
                   {"empty_us": 1.0, "load_store_us": 1.5}, "cmd")
    assert "- flash T=96 default: k #1 10.21 us, k #2 8.88 us; grids 6 x 80, 96 x 81" in doc
    assert "- flash T=96 default: k #1 10.21 us, k #2 8.88 us\n" in markdown(
        {"gpu": "g", "torch": "t", "triton": "tr", "cuda": "c"}, [{k: v for k, v in row.items() if k != "grids"}],
        {"empty_us": 1.0, "load_store_us": 1.5}, "cmd")
