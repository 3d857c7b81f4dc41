"""benchmarks/kernels.py's decode-batch attention rows (``attention_ring`` / ``attention_packed``:
T requests with caches of their own, the static step's layout), off the GPU: the fused call
and the reference the table times take the same argument tuple and agree (interpreter,
float32, the tiny preset), and the bytes the roofline is read against are what the caches
hold (packed: ``PackedKV.nbytes``, not the formula's own constants)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from benchmarks.kernels import (
    RING_CONTEXT,
    attention_bytes,
    attention_ring_case,
    fused_call,
    main,
    ring_reference,
)
from runtime.config import V41Config

TINY = V41Config.preset("tiny")


@pytest.fixture
def ops(monkeypatch):
    """The table's ops with only attention: FusedSparseAttention wrapped after
    TRITON_INTERPRET is set."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    from runtime.kernels.attention import FusedSparseAttention

    return SimpleNamespace(attention=FusedSparseAttention())


@pytest.mark.parametrize("packed", [False, True])
def test_the_ring_rows_time_a_fused_call_that_matches_their_reference(ops, packed):
    torch.manual_seed(0)
    case, args = attention_ring_case(ops, TINY, "tiny", 2, packed, device="cpu", dtype=torch.float32)
    assert case.op == ("attention_packed" if packed else "attention_ring")
    got = fused_call(ops, case.op)(args)
    want = ring_reference(*args)
    assert got.shape == (2, TINY.num_attention_heads, TINY.head_dim)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_the_packed_rows_count_the_bytes_the_packed_caches_hold(ops):
    """Per query: the W ring rows whole, and K of the N entries (every row the same size)."""
    t, h, hd, w, k = 2, TINY.num_attention_heads, TINY.head_dim, TINY.sliding_window, TINY.index_topk
    plain, _ = attention_ring_case(ops, TINY, "tiny", t, False, device="cpu", dtype=torch.float32)
    packed, args = attention_ring_case(ops, TINY, "tiny", t, True, device="cpu", dtype=torch.float32)
    ring, entries = args[3], args[4]
    n = RING_CONTEXT // 2
    keys_per_query = ring.nbytes() / t + entries.nbytes() / (t * n) * k
    assert plain.bytes == attention_bytes(t, h, hd, w, k)
    assert plain.bytes - packed.bytes == pytest.approx(t * ((w + k) * hd * 2 - keys_per_query), rel=0, abs=1e-6)


def test_an_unknown_op_is_refused_by_name_before_anything_runs(capsys):
    assert main(["--ops", "attention,atention_ring"]) == 2
    err = capsys.readouterr().err
    assert "--ops: unknown atention_ring;" in err and "attention_packed" in err and len(err.splitlines()) == 1
