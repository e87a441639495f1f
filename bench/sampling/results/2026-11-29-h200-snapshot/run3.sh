#!/usr/bin/env bash
# Run 3: is fp32 logits B=128's host merge (5.6-14.8 us behind its device
# merge in run 1, equal at the 4c4a165 snapshot) a change of the code or of
# the machine? The kernels of 4c4a165 (rejection_bench_base) and of 902d3d4
# (rejection_bench) alternating, three rounds, on one machine.
# Bundle: scripts/gpu-bundle.sh build-gpu .gpu-h rejection_bench, plus
#   bin/rejection_bench_base (built at 4c4a165).
# Run: bash bench/sampling/results/2026-11-29-h200-snapshot/run3.sh .gpu-h $OUT/run3
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$out/machine.txt"
for round in 1 2 3; do
  for binary in rejection_bench_base rejection_bench; do
    echo "r$round $binary | $(timeout 120 "$bundle/bin/$binary" --only logits,128,8,151936 --runs 200 --csv /dev/null 2>&1 |
      grep -E '^logits ' | head -1 | sed -E 's/ +/ /g')"
  done
done 2>&1 | tee "$out/ab.txt"
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw,clocks_throttle_reasons.active --format=csv | tee -a "$out/ab.txt"
