#!/usr/bin/env bash
# The H200 checks the next session can start from, batched into one device call of under
# 10 minutes (each step bounded by its own timeout; logs go to $OUT, the result files of
# /tmp/res come back as one tar, rewritten after each step so a call cut short still
# returns what finished). Usage on the device:
#   OUT=/path bash benchmarks/h200_checklist.sh
# Open after 2026-12-02 (session 9), issue 16:
# - test_static_decode.py::test_mid_bf16_static_step_has_no_sync_and_the_engines_accuracy[fused]
#   fails on the H200 at main 0053aa3 already (static median error 0.137 vs the engine's
#   0.113, greedy agreement 14 vs 18 of 24): first bisect which fused op moves it
#   (kernels "all,-mhc", "all,-linear,-experts", ...) with the test's own measure (a script
#   for that is not written yet; the line below re-runs the failing test);
# - RoPE + quant NVFP4 at 4,096 rows is at 53-54 % (goal 60 %): the tail part (4 blocks per
#   vector, its per-block work repeated by the threads sharing a block) and the per-block
#   divisions are what is left; mHC as before.
set -u
export PYTHONPATH=. PYTHONUNBUFFERED=1
T0=$(date +%s); R=/tmp/res; mkdir -p "$R"
el() { echo "[$1 rc=$2 at $(( $(date +%s) - T0 )) s]"; tar -cf "$OUT/res.tar" -C /tmp res; }
timeout 100 python -m pytest -q -p no:cacheprovider --tb=line tests/runtime/test_static_decode.py -k mid_bf16 > "$OUT/static.log" 2>&1; el static $?
grep -E "AssertionError|passed|failed" "$OUT/static.log" | tail -4
timeout 150 python -m pytest -q -p no:cacheprovider tests/runtime/test_kernels_parity.py tests/runtime/test_kernels_experts.py -k "mhc_parity_gpu or mhc_projection_modes_parity_gpu or gpu_mid_experts" > "$OUT/parity.log" 2>&1; el parity $?
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/parity.log" | tail -8
timeout 100 python benchmarks/kernels.py --ops mhc,rope_quant --out "$R" > "$OUT/kernels.log" 2>&1; el kernels $?
grep -E "^\| (mhc|rope_quant)|Goal met" "$OUT/kernels.log"
timeout 200 python benchmarks/decode.py --batches 1 64 --context 1024 --steps 8 --rounds 5 --paths graphs+compile --kernels fused all,-mhc --out /tmp/dec > "$OUT/decode.log" 2>&1; el decode $?
mkdir -p "$R/dec" && cp /tmp/dec/* "$R/dec/" 2>/dev/null; tar -cf "$OUT/res.tar" -C /tmp res
grep -E "^\|" "$OUT/decode.log" | tail -6
