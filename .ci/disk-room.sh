#!/usr/bin/env bash
# How much CI this disk has room for, decided before any install:
#   prints "all"     room for the test venv and the vLLM venv (or the vLLM venv is built);
#   prints "no-vllm" room for the test venv only: the vllm engine tests will skip (a warning
#                    on stderr says so);
#   exits 1          not even that (one line on stderr), instead of a pip OSError minutes in.
# Measured: .venv-ci 2.9 GB, up to about 1 GB of pytest and inductor temp files, .venv-vllm
# 2.5 GB. The disk is shared with other work: a CI run once saw only 5 GB free.
#
# Usage: .ci/disk-room.sh [DIR]   (default: the repo root; DIR is where the venvs go)
set -euo pipefail
dir="${1:-$(cd "$(dirname "$0")/.." && pwd)}"
need_gb=4
vllm_gb=3

free_kb=$(df -Pk "$dir" | awk 'NR==2 {print $4}')
case "$free_kb" in
  ''|*[!0-9]*) echo ".ci/disk-room.sh: df -Pk $dir gave no free-space figure" >&2; exit 1 ;;
esac
free_gb=$((free_kb / 1024 / 1024))
if [ "$free_kb" -lt $((need_gb * 1024 * 1024)) ]; then
  echo ".ci/disk-room.sh: $dir has $free_gb GB free; the test venv and its temp files need about $need_gb GB" >&2
  exit 1
fi
if [ -f "$dir/.venv-vllm/.v41val-vllm-ready" ] \
    || [ "$free_kb" -ge $(((need_gb + vllm_gb) * 1024 * 1024)) ]; then
  echo all
else
  echo ".ci/disk-room.sh: WARNING: $dir has $free_gb GB free, under the $((need_gb + vllm_gb)) GB needed with the vLLM venv; not building it, so the vllm engine tests will skip" >&2
  echo no-vllm
fi
