#!/usr/bin/env bash
# Run 3: the launcher's new threshold (runs from 32 single-chunk waves) on
# the committed build: parity, then bf16 logits at B = 40 and 48 with the
# launcher's choice (it prints the row chunks it took) against one-chunk
# blocks (--row-chunks 1), two rounds.
# Bundle: scripts/gpu-bundle.sh build-gpu .gpu-t rejection_bench rejection_cuda_test
# Run: bash bench/sampling/results/2026-11-29-chunk-pairs/run3.sh .gpu-t $OUT/run3
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$out/machine.txt"
timeout 200 "$bundle/bin/rejection_cuda_test" > "$out/rejection_cuda_test.txt" 2>&1
echo "rejection_cuda_test: rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED' "$out/rejection_cuda_test.txt" | tr '\n' ' ')"
for round in 1 2; do
  for b in 40 48; do
    for chunks in default 1; do
      extra=""; [ "$chunks" = 1 ] && extra="--row-chunks 1"
      # shellcheck disable=SC2086
      echo "r$round B=$b $chunks | $(timeout 60 "$bundle/bin/rejection_bench" --only "logits,$b,8,151936" --dtype bf16 $extra \
        --runs 200 --csv /dev/null 2>&1 | grep -E '^logits_bf16 +B' | head -1 |
        sed -E 's/ +/ /g; s/ p95 [0-9.]+//g; s/G=[0-9]+ copies=[0-9]+ //; s/ \| launch [0-9.]+ us//')"
    done
  done
done 2>&1 | tee "$out/ab.txt"
