#!/usr/bin/env bash
# Issue #17's tracked shapes on the H200 at the kernels of fa6f0f3 (the 2026-11-29-h200-late run1.sh, itself the
# 2026-11-29-h200-in-turns run1.sh with fp16 logits rows added): suites
# first, then each shape with rejection_bench --only (both merges, timed in
# turns, and its read floor; the top-k/top-p shape beside its unfiltered
# shape in the same process), three rounds.
# Bundle: scripts/gpu-bundle.sh build-gpu .gpu-s rejection_bench rejection_cuda_test cuda_executor_test
# Run: bash bench/sampling/results/2026-11-29-h200-evening/run1.sh .gpu-s $OUT/run1
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader; } | tee "$out/machine.txt"
for t in rejection_cuda_test cuda_executor_test; do
  timeout 200 "$bundle/bin/$t" > "$out/$t.txt" 2>&1
  echo "$t: rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED' "$out/$t.txt" | tr '\n' ' ')"
done
for round in ${ROUNDS:-1 2 3}; do
  for args in "logits,8,8,151936" "logits,8,8,151936 --top-k 50 --top-p 0.9" \
      "logits,8,8,151936 --dtype bf16" "logits,8,8,151936 --dtype bf16 --top-k 50 --top-p 0.9" \
      "logits,8,8,151936 --dtype fp16" \
      "logits,1,8,151936" "logits,1,8,151936 --dtype bf16" "logits,1,8,151936 --dtype fp16" \
      "logits,32,8,151936" "logits,32,8,151936 --dtype bf16" "logits,32,8,151936 --dtype fp16" \
      "logits,128,8,151936" "logits,128,8,151936 --dtype bf16" "logits,128,8,151936 --dtype fp16" \
      "probabilities,8,8,151936" "logprobs,8,8,151936" "probabilities,128,8,151936"; do
    # shellcheck disable=SC2086
    echo "r$round $args | $(timeout 60 "$bundle/bin/rejection_bench" --only $args --runs 200 --csv /dev/null 2>&1 |
      grep -E '^(probabilities|logits|logprobs)' | tr '\n' ' ')"
  done
done 2>&1 | tee "$out/shapes.txt"
