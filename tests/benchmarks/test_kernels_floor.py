"""benchmarks/kernels.py's launch floor: the empty launch is read several times through a
run and small ops are held to the smallest reading (one reading moved 0.68 -> 0.84 us
between two H200 runs, which alone moved cases across the 2x line)."""

from __future__ import annotations

import statistics

from benchmarks.kernels import Case, alternate_medians, floor_line, markdown

ENV = {"gpu": "NVIDIA H200", "nvidia_smi": "x", "torch": "t", "triton": "t", "cuda": "c"}


def small_case(graph_ms: float) -> Case:
    return Case("inv_rope", "mid", "R=1", bytes=50_000, flops=0.0, ref_ms=0.1, fused_ms=0.05,
                fused_graph_ms=graph_ms)


def test_the_floor_line_names_every_reading_and_the_goal_from_the_smallest():
    line = floor_line([0.00084, 0.00068, 0.00072])
    assert "measured 3 times" in line
    assert "0.68 us smallest, 0.72 median, 0.84 largest" in line
    assert "(1.36 us)" in line


def test_a_small_op_is_judged_against_the_smallest_reading():
    # 1.5 us: within 2x of 0.84 us but not of 0.68 us
    doc = markdown(ENV, [small_case(0.0015)], "cmd", [0.00084, 0.00068])
    assert "| <= 1.36 us | NOT met |" in doc and "Goal met on 0 of 1" in doc
    doc = markdown(ENV, [small_case(0.0015)], "cmd", [0.00084])
    assert "| <= 1.68 us | met |" in doc and "Goal met on 1 of 1" in doc


def test_a_paired_reading_is_shown_as_empty_launches_beside_the_strict_verdict():
    # 1.5 us beside an empty launch read as 0.80 us in the same rounds: 1.875 empty launches,
    # within 2x; the verdict still holds it to the run's smallest reading (0.68 us)
    case = small_case(0.0015)
    case.paired_ms, case.paired_empty_ms = 0.0015, 0.0008
    other = small_case(0.0030)
    other.paired_ms, other.paired_empty_ms = 0.0030, 0.0009
    doc = markdown(ENV, [case, other, small_case(0.0010)], "cmd", [0.00084, 0.00068])
    assert "| 0.00150 | - | - | 1.88x | 2.0x | 1% | memory | <= 1.36 us | NOT met |" in doc
    assert "| 0.00300 | - | - | 3.33x |" in doc
    assert "| 0.00100 | - | - | - | 2.0x |" in doc  # not read paired
    assert "Goal met on 1 of 3" in doc
    assert "(paired), 1 of 2 ops under 4 MiB are within 2x of it." in doc


def test_alternating_readings_are_taken_in_turn_and_summarised_by_their_medians():
    order, readings = [], {"op": iter([5.0, 1.0, 3.0, 9.0]), "empty": iter([2.0, 2.5, 0.5, 7.0])}

    def timer(name):
        def read():
            order.append(name)
            return next(readings[name])
        return read

    medians = alternate_medians({"op": timer("op"), "empty": timer("empty")}, rounds=4)
    assert order == ["op", "empty"] * 4
    assert medians == {"op": statistics.median([5.0, 1.0, 3.0, 9.0]), "empty": statistics.median([2.0, 2.5, 0.5, 7.0])}


def test_interleaved_graph_ms_reads_long_lists_in_groups_beside_the_first(monkeypatch):
    """More calls than ``most``: groups of at most ``most`` graphs alive at once, the first
    call in every group, each group's graphs replayed in turn; every call gets its own
    group's median, the first its first group's; a call that cannot be captured gets None.
    The CUDA graph and its timing are stand-ins (no GPU): a "graph" is the call's index."""
    from benchmarks import kernels

    captured, replays, alive = [], [], []

    class Graph:
        def __init__(self, i):
            self.i = i
            alive.append(i)

        def __del__(self):
            alive.remove(self.i)

        def replay(self):
            replays.append(self.i)

    def capture(fns):
        i = fns[0]()
        captured.append(i)
        assert len(alive) < 4, "more than `most` graphs alive at once"
        return None if i == 5 else Graph(i)

    def median_ms(replay, warmup, iters):
        replay()
        return float(replays[-1])

    monkeypatch.setattr(kernels, "capture", capture)
    monkeypatch.setattr(kernels, "median_ms", median_ms)
    fns = [lambda i=i: i for i in range(7)]
    got = kernels.interleaved_graph_ms(fns, reps=1, rounds=3, most=4)
    assert captured == [0, 1, 2, 3, 0, 4, 5, 6]  # groups (0, 1, 2, 3) and (0, 4, 5, 6)
    assert replays[:12] == [0, 1, 2, 3] * 3  # in turn within a group
    assert replays[12:] == [0, 4, 6] * 3  # 5 could not be captured
    assert got[5] is None and got[0] == 0.0 and got[1:5] == [1.0, 2.0, 3.0, 4.0] and got[6] == 6.0
    assert kernels.interleaved_graph_ms([], most=4) == []
