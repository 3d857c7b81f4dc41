"""benchmarks/tile_sweep.py's ``timed``: the variants of one case are timed together (one
timer call over all of them, which on the GPU replays their graphs in turn), each row gets
its own variant's time and error, and a variant that could not be captured has no time
and no cold reading instead of a crash. The timer here is a stand-in (no GPU): it records
what it was given and answers known times."""

from __future__ import annotations

import torch

from benchmarks.kernels import HBM_BYTES_PER_S
from benchmarks.tile_sweep import Variant, markdown, timed


def test_the_variants_of_a_case_are_timed_in_one_call_each_row_with_its_own_time():
    want = torch.tensor([1.0, -2.0, 4.0])
    calls, colds = [], []

    def timer(fns):
        calls.append(list(fns))
        return [0.002, None, 0.004]

    def cold(hot_ms):
        colds.append(hot_ms)
        return 2 * hot_ms, 5

    fns = [lambda: 1, lambda: 2, lambda: 3]
    variants = [Variant("a", fns[0], want + torch.tensor([0.0, 0.0, 0.5]), want, cold),
                Variant("b", fns[1], want, want, cold),
                Variant("c", fns[2], (want, want * 2 + 0.25), (want, want * 2))]
    rows = timed("inv_rope", "mid", 8, 4.3, variants, timer=timer)
    assert calls == [fns]  # one call, every variant, in order
    assert [r["config"] for r in rows] == ["a", "b", "c"]
    assert [r["us"] for r in rows] == [2.0, None, 4.0]
    assert abs(rows[0]["roofline"] - 4.3e6 / HBM_BYTES_PER_S / 2e-6) < 1e-12
    assert rows[1]["roofline"] is None
    # worst |got - want| / max |want| over the outputs: 0.5 / 4, 0, 0.25 / 8
    assert [r["max_rel_err"] for r in rows] == [0.125, 0.0, 0.03125]
    assert colds == [0.002]  # b has no time, so no cold reading; c asked for none
    assert rows[0]["cold_us"] == 4.0 and rows[0]["cold_copies"] == 5
    assert "cold_us" not in rows[1] and "cold_us" not in rows[2]
    doc = markdown({"gpu": "g", "torch": "t", "triton": "tr", "cuda": "c"}, rows,
                   {"empty_us": 1.0, "load_store_us": 1.5}, "cmd")
    assert "| inv_rope | mid | 8 | b | 4.30 | n/a | n/a | 0.0e+00 | - | - |" in doc
    assert "| inv_rope | mid | 8 | a | 4.30 | 2.00 | 50% | 1.2e-01 | 4.00 | 25% |" in doc
