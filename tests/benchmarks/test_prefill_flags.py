"""benchmarks/prefill.py: flags that cannot be honoured are one line on stderr and exit 2,
before any weights are built (the lead runs this script on a metered GPU)."""

from __future__ import annotations

import pytest

from benchmarks.prefill import main


@pytest.mark.parametrize(("argv", "message"), [
    (["--path", "batched", "--graphs", "--device", "cpu"], "--graphs: CUDA graphs need --device cuda"),
    (["--graphs"], "--graphs and --moe apply to --path batched only"),
    (["--moe", "dense"], "--graphs and --moe apply to --path batched only"),
    (["--path", "batched", "--chunk", "64"], "--chunk: the batched path prefills the whole prompt"),
    (["--lengths", "0", "16"], "--lengths: expected token counts >= 1, got [0, 16]"),
    (["--repeats", "0"], "--repeats: expected >= 1, got 0"),
    (["--path", "batched", "--device", "cuda", "--dtype", "float32"],
     "--moe grouped on CUDA: torch._grouped_mm takes bfloat16 weights, got float32"),
])
def test_bad_flags_are_one_line_and_exit_2(argv, message, capsys, tmp_path):
    assert main([*argv, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"prefill.py: {message}") and err.count("\n") == 1
    assert not list(tmp_path.iterdir())
