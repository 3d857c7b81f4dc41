"""benchmarks/chain_floor.py off the GPU: its kernels (Triton's interpreter) do the chain
they claim to, checked against a walk of the cycle's order and a float64 recompute; the
cycle is one cycle through every line; the budget arithmetic (its refusals:
test_timing_flags.py)."""

from __future__ import annotations

import pytest
import torch

from benchmarks import chain_floor
from benchmarks.chain_floor import LINE_INTS, Kind, cycle, steps_within_goal


@pytest.fixture
def interpreted(monkeypatch):
    """The benchmark's kernels jitted for the interpreter (set before wrapping)."""
    if torch.cuda.is_available():
        pytest.skip("checks the interpreter's run; the GPU runs the benchmark itself")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    from runtime.kernels.backend import jit

    return jit


@pytest.mark.parametrize("lines", [1, 2, 7, 64])
def test_the_chase_buffer_is_one_cycle_through_every_line(lines):
    buffer, order = cycle(lines, torch.Generator().manual_seed(lines))
    assert sorted(order) == list(range(lines))
    at, seen = 0, []
    for _ in range(lines):
        seen.append(at)
        at = int(buffer[at * LINE_INTS])
    assert sorted(seen) == list(range(lines)) and at == 0  # every line once, then back to the start
    assert int((buffer != 0).sum()) <= lines  # one entry per line, the rest of each line zero


@pytest.mark.parametrize("steps", [0, 1, 5])
def test_the_chase_kernel_follows_the_cycle_and_keeps_its_place(interpreted, steps):
    buffer, order = cycle(16, torch.Generator().manual_seed(3))
    kernel = interpreted(chain_floor._chase_kernel)
    cursor = torch.tensor([order[2]], dtype=torch.int32)
    chain_floor.chase(kernel, buffer, cursor, steps)
    assert int(cursor) == order[(2 + steps) % 16]
    chain_floor.chase(kernel, buffer, cursor, steps)  # the next call goes on from there
    assert int(cursor) == order[(2 + 2 * steps) % 16]


@pytest.mark.parametrize("kind", [Kind("sum", block=64, warps=1), Kind("scan", block=64, warps=1, scan=True)])
@pytest.mark.parametrize("steps", [0, 1, 3])
def test_the_reduction_chain_matches_a_float64_recompute(interpreted, kind, steps):
    x = torch.rand(kind.block, generator=torch.Generator().manual_seed(steps))
    out = torch.empty_like(x)
    chain_floor.reduce_chain(interpreted(chain_floor._reduce_kernel), x, out, kind, steps)
    want = x.double()
    for _ in range(steps):
        want = want.cumsum(0) / kind.block if kind.scan else want * 0.5 + want.sum() / kind.block
    assert torch.allclose(out.double(), want, rtol=1e-6, atol=0), (out, want)


@pytest.mark.parametrize("steps", [0, 1, 4])
def test_the_ticket_chain_adds_one_per_step_to_the_first_counter(interpreted, steps):
    counter = torch.zeros(2, dtype=torch.int32)
    kernel = interpreted(chain_floor._ticket_kernel)
    chain_floor.tickets(kernel, counter, steps)
    chain_floor.tickets(kernel, counter, steps)
    assert counter.tolist() == [2 * steps, 0]


def test_steps_within_goal():
    # goal 2 x 0.9 = 1.8 us; the 0-step kernel 1.0 us leaves 0.8 us: 4 steps of 0.2 us
    assert steps_within_goal(0.2, 1.0, 0.9) == pytest.approx(4.0)
    assert steps_within_goal(0.5, 2.0, 0.9) < 0  # over the goal with no step at all


def test_the_fit_recovers_a_line():
    fitted = chain_floor.fit([0, 1, 2, 4, 8], [1.0 + 0.25 * n for n in (0, 1, 2, 4, 8)])
    assert fitted["per_step_us"] == pytest.approx(0.25) and fitted["intercept_us"] == pytest.approx(1.0)
    assert fitted["r2"] == pytest.approx(1.0)
