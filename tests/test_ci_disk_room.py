"""`.ci/disk-room.sh`: what CI builds for the free space it finds, read through a stand-in
`df` on PATH that reports a chosen figure (in the POSIX format `df -Pk` prints)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / ".ci" / "disk-room.sh"
GB_KB = 1024 * 1024

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def room(tmp_path: Path, free_kb: str, ready_vllm: bool = False) -> subprocess.CompletedProcess:
    """Run the script on ``tmp_path`` with a `df` that reports ``free_kb`` available."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_df = bin_dir / "df"
    fake_df.write_text(
        "#!/bin/sh\n"
        "echo 'Filesystem 1024-blocks Used Available Capacity Mounted on'\n"
        f"echo '/dev/vda 263174212 1000 {free_kb} 95% /'\n")
    fake_df.chmod(0o755)
    repo = tmp_path / "repo"
    repo.mkdir()
    if ready_vllm:
        (repo / ".venv-vllm").mkdir()
        (repo / ".venv-vllm" / ".v41val-vllm-ready").touch()
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(["bash", str(SCRIPT), str(repo)], env=env, capture_output=True,
                          text=True, check=False)


def test_room_for_both_venvs_builds_all(tmp_path):
    done = room(tmp_path, str(7 * GB_KB))
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "all", "")


def test_room_for_the_test_venv_only_skips_vllm_and_says_so(tmp_path):
    done = room(tmp_path, str(7 * GB_KB - 1))
    assert (done.returncode, done.stdout.strip()) == (0, "no-vllm")
    assert "has 6 GB free" in done.stderr and "vllm engine tests will skip" in done.stderr


def test_a_built_vllm_venv_costs_no_room(tmp_path):
    done = room(tmp_path, str(5 * GB_KB), ready_vllm=True)
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "all", "")


def test_too_little_room_stops_in_one_line(tmp_path):
    done = room(tmp_path, str(4 * GB_KB - 1))
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "has 3 GB free" in done.stderr


def test_an_unreadable_df_stops_in_one_line(tmp_path):
    done = room(tmp_path, "-")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "no free-space figure" in done.stderr
