#!/usr/bin/env bash
# The H200 checks the next session can start from, batched into one device call of under
# 10 minutes (each step bounded by its own timeout; logs go to $OUT, the result files of
# /tmp/res come back as one tar, rewritten after each step so a call cut short still
# returns what finished). Usage on the device:
#   OUT=/path bash benchmarks/h200_checklist.sh
# Open after 2026-12-02 (session 7): issue 16's mHC (0.84 ms of a 4.05 ms batch-1 step, two
# kernels at 11.5 + 6.1 us per site) and the sub-4 MiB ops against two empty launches; the
# decode without compiled helpers with the new linear / experts ops (not re-measured); the
# experts kernel's tiling (not swept: its sweep run stopped on a config error).
set -u
export PYTHONPATH=. PYTHONUNBUFFERED=1
T0=$(date +%s); R=/tmp/res; mkdir -p "$R"
el() { echo "[$1 rc=$2 at $(( $(date +%s) - T0 )) s]"; tar -cf "$OUT/res.tar" -C /tmp res; }
timeout 120 python benchmarks/skinny.py --ops experts --expert-rows 1 2 --sweep --out "$R" > "$OUT/sweep.log" 2>&1; el sweep $?
tail -8 "$OUT/sweep.log"
timeout 250 python benchmarks/decode.py --batches 1 64 --context 1024 --steps 8 --rounds 5 --paths graphs graphs+compile --kernels fused --out "$R" > "$OUT/decode.log" 2>&1; el decode $?
grep -E "^batch" "$OUT/decode.log" | tail -4
timeout 150 python benchmarks/step_profile.py --batches 1 64 --context 1024 --replays 20 --out "$R" > "$OUT/profile.log" 2>&1; el profile $?
tail -30 "$OUT/profile.log"
