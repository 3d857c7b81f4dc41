#!/usr/bin/env bash
# The H200 checks issues 15 and 16 still need, batched into one device call of under 10
# minutes (each step bounded by its own timeout; logs go to $OUT, the result files of
# /tmp/res come back as one tar, rewritten after each step so a call cut short still
# returns what finished). Usage on the device:
#   OUT=/path bash benchmarks/h200_checklist.sh
# What is open (2026-12-02): the packed bf16 GPU test in its final form has not run; batch-1
# decode is 0.2 ms short of 15 % of the roofline (more rounds, to separate the op cuts from
# call-to-call drift); mHC TF32x3 is off by 1.1e-4 after the previous mixing.
set -u
export PYTHONPATH=.
T0=$(date +%s); R=/tmp/res; mkdir -p "$R"
el() { echo "[$1 rc=$2 at $(( $(date +%s) - T0 )) s]"; tar -cf "$OUT/res.tar" -C /tmp res; }
timeout 120 python -m pytest -q -m gpu tests/runtime/test_static_ring_attention.py tests/runtime/test_kernels_compiled.py tests/runtime/test_kernels_topk.py -rfE --tb=short > "$OUT/tests.log" 2>&1; el tests $?
grep -E "passed|failed|FAILED|Error" "$OUT/tests.log" | tail -6
timeout 200 python benchmarks/decode.py --batches 1 64 --context 1024 --steps 8 --rounds 7 --paths graphs graphs+compile --kernels fused --out "$R" > "$OUT/decode.log" 2>&1; el decode $?
grep -E "^\| (1|64) " "$OUT/decode.log" | tail -4
timeout 30 python benchmarks/mhc_precision.py --out "$R" > "$OUT/precision.log" 2>&1; el precision $?
tail -8 "$OUT/precision.log"
timeout 150 python -m pytest -q -m gpu tests/runtime/test_kernels_parity.py tests/runtime/test_static_decode.py tests/runtime/test_static_model.py -rfE --tb=short > "$OUT/tests2.log" 2>&1; el tests2 $?
grep -E "passed|failed|FAILED|Error" "$OUT/tests2.log" | tail -6
