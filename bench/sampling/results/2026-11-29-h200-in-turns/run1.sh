#!/usr/bin/env bash
# Issue #17's tracked shapes on the H200 at the kernels of 902d3d4, timed by
# the bench of 9f7f94c, which times the device and host merges in turns:
# each shape with rejection_bench --only (both merges and its read floor,
# three rounds; the top-k/top-p shape beside its unfiltered shape in the same
# round); rejection_cuda_test first. The 2026-11-29-h200-snapshot folder's
# run1.sh with this bench.
# Bundle: scripts/gpu-bundle.sh build-gpu .gpu-h rejection_bench rejection_cuda_test
# Run: bash bench/sampling/results/2026-11-29-h200-in-turns/run1.sh .gpu-h $OUT/run1
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader; } | tee "$out/machine.txt"
timeout 200 "$bundle/bin/rejection_cuda_test" > "$out/rejection_cuda_test.txt" 2>&1
echo "rejection_cuda_test: rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/rejection_cuda_test.txt" | tr '\n' ' ')"
for round in ${ROUNDS:-1 2 3}; do
  for args in "logits,8,8,151936" "logits,8,8,151936 --top-k 50 --top-p 0.9" \
      "logits,8,8,151936 --dtype bf16" "logits,8,8,151936 --dtype bf16 --top-k 50 --top-p 0.9" \
      "logits,1,8,151936" "logits,1,8,151936 --dtype bf16" "logits,32,8,151936" "logits,32,8,151936 --dtype bf16" \
      "logits,128,8,151936" "logits,128,8,151936 --dtype bf16" \
      "probabilities,8,8,151936" "logprobs,8,8,151936" "probabilities,128,8,151936"; do
    # shellcheck disable=SC2086
    echo "r$round $args | $(timeout 60 "$bundle/bin/rejection_bench" --only $args --runs 200 --csv /dev/null 2>&1 |
      grep -E '^(probabilities|logits|logprobs)' | tr '\n' ' ')"
  done
done 2>&1 | tee "$out/shapes.txt"
