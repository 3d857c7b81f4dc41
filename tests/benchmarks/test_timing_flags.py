"""The GPU timing benchmarks' refusals (benchmarks/chain_floor.py,
benchmarks/dependent_launch.py): a bad round count, or no GPU, is one line naming the
script and what was expected, and exit status 2, before anything is measured or written."""

from __future__ import annotations

import pytest
import torch

from benchmarks import chain_floor, dependent_launch


@pytest.mark.parametrize("module", [chain_floor, dependent_launch], ids=["chain_floor", "dependent_launch"])
@pytest.mark.parametrize(("argv", "message"), [
    (["--rounds", "0"], "--rounds: expected a positive count, got 0"),
    ([], "needs a CUDA GPU"),
])
def test_bad_flags_and_no_gpu_are_one_line_and_exit_2(module, argv, message, capsys, tmp_path):
    if torch.cuda.is_available() and not argv:
        pytest.skip("a GPU is here")
    assert module.main([*argv, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    script = f"benchmarks/{module.__name__.split('.')[-1]}.py"
    assert err.startswith(f"{script}: {message}") and err.count("\n") == 1
    assert not (tmp_path / "out").exists()
