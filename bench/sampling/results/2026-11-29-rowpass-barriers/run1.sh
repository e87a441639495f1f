#!/usr/bin/env bash
# The logits row pass with fewer block barriers: its parity suite, memcheck
# and racecheck on the row-pass cases, then base (rejection_bench_base, the
# committed kernels), rejection_bench_allwarps (every warp looks the row's
# temperature up, no barrier for it) and rejection_bench (only warp 0 looks
# it up, one barrier publishes it) alternating, two rounds.
# Bundle: scripts/gpu-bundle.sh build-gpu .gpu-a rejection_cuda_test rejection_bench,
# plus bin/rejection_bench_base and bin/rejection_bench_allwarps.
# Run: bash bench/sampling/results/2026-11-29-rowpass-barriers/run1.sh .gpu-a $OUT/run1
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$out/machine.txt"
"$bundle/bin/rejection_cuda_test" 2>&1 | tail -40 > "$out/tests.txt"
tail -1 "$out/tests.txt"
filter='*RowPass*:*Filtered*:*Temperature*:*Greedy*:*SixteenBit*:*BadValues*:*TargetShape*'
for tool in memcheck racecheck; do
  compute-sanitizer --tool $tool "$bundle/bin/rejection_cuda_test" --gtest_filter="$filter" > "$out/$tool.txt" 2>&1
  echo "$tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$out/$tool.txt" | tr '\n' ' ')"
done
for round in ${ROUNDS:-1 2}; do
  for args in "logits,8,8,151936" "logits,8,8,151936 --dtype bf16" "logits,8,8,151936 --dtype fp16" \
              "logits,1,8,151936" "logits,1,8,151936 --dtype bf16" "logits,32,8,151936" \
              "logits,32,8,151936 --dtype bf16" "logits,128,8,151936 --dtype bf16" \
              "logits,8,8,151936 --top-k 50 --top-p 0.9"; do
    for binary in rejection_bench_base rejection_bench_allwarps rejection_bench; do
      # shellcheck disable=SC2086
      echo "r$round $binary $args | $("$bundle/bin/$binary" --only $args --runs 200 --csv /dev/null 2>&1 |
        grep -E '^(probabilities|logits|logprobs)' | tr '\n' ' ')"
    done
  done
done 2>&1 | tee "$out/ab.txt"
