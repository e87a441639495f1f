#!/usr/bin/env bash
# Is fp32 logits B=128's host merge, 6-15 us behind its device merge in
# every round of the 2026-11-29 H200 snapshot (and on the 4c4a165 binary),
# a cost of the host-merged launch or of being timed second? The same
# kernels (902d3d4's) under two benches, alternating, three rounds:
# rejection_bench_head (fcb1666: device merge timed, then host merge) and
# rejection_bench (TimeInTurns: the two in turns, a chunk of 25 batches
# each). nvidia-smi samples the SM clock, power and throttle reasons every
# 50 ms meanwhile (clocks.csv). Probabilities B=128 (item 5) and bf16
# logits B=128 too.
# Bundle: scripts/gpu-bundle.sh build-gpu .gpu-m rejection_bench, plus
#   bin/rejection_bench_head (build-gpu's rejection_bench at fcb1666).
# Run: bash bench/sampling/results/2026-11-29-merge-order/run1.sh .gpu-m $OUT/run1
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader; } | tee "$out/machine.txt"
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
    --format=csv -lms 50 > "$out/clocks.csv" 2>&1 &
smi=$!
for round in 1 2 3; do
  for args in "logits,128,8,151936" "probabilities,128,8,151936" "logits,128,8,151936 --dtype bf16"; do
    for binary in rejection_bench_head rejection_bench; do
      # shellcheck disable=SC2086
      echo "r$round $binary $args | $(date -u +%H:%M:%S.%N | cut -c1-12) | $(timeout 120 "$bundle/bin/$binary" \
          --only $args --runs 200 --csv /dev/null 2>&1 | grep -E '^(probabilities|logits)' | head -1 | sed -E 's/ +/ /g')"
    done
  done
done 2>&1 | tee "$out/ab.txt"
kill "$smi" 2>/dev/null
