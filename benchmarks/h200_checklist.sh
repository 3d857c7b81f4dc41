#!/usr/bin/env bash
# The H200 runs that issues 15 and 16 still need on the merged main, batched into one
# device call of under 10 minutes (each step bounded by its own timeout; results and logs
# go to $OUT; the result files of /tmp/res come back as one tar, rewritten after each step so
# a call cut short still returns what finished). Usage on the device:
#   OUT=/path bash benchmarks/h200_checklist.sh
set -u
export PYTHONPATH=.
T0=$(date +%s); R=/tmp/res; mkdir -p "$R"
el() { echo "[$1 rc=$2 at $(( $(date +%s) - T0 )) s]"; tar -cf "$OUT/res.tar" -C /tmp res; }
timeout 110 python benchmarks/kernels.py --out "$R" > "$OUT/kernels.log" 2>&1; el kernels $?
grep -E "^empty|Goal met" "$OUT/kernels.log"
timeout 160 python benchmarks/flash_forward.py --kernels reference fused --numerics invariant --prefix 1024 --suffix 512 --chunk 512 --steps 2 --out "$R" > "$OUT/flash.log" 2>&1; el flash $?
tail -8 "$OUT/flash.log"
timeout 160 python benchmarks/decode.py --batches 1 64 --context 1024 --steps 4 --rounds 3 --paths graphs graphs+compile --kernels fused --out "$R" > "$OUT/decode.log" 2>&1; el decode $?
grep -E "^\| (1|64) " "$OUT/decode.log" | tail -6
timeout 120 python -m pytest -q -m gpu tests/runtime/test_kernels_parity.py -k "mhc or gate or topk" tests/runtime/test_kernels_topk.py -rfE --tb=short > "$OUT/tests.log" 2>&1; el tests $?
grep -E "passed|failed|FAILED|Error" "$OUT/tests.log" | tail -8
timeout 30 python benchmarks/mhc_precision.py --out "$R" > "$OUT/precision.log" 2>&1; el precision $?
tail -6 "$OUT/precision.log"
