#!/usr/bin/env bash
# Run 2: the warp pass with a grid of one wave (5 blocks of 128 threads per
# SM) whose warps stride over the chunks and request each next chunk into L2
# (bulk prefetch, evict-first) before reducing the current one
# (warp-pass-prefetch.patch); parity and sanitizers on it, then HEAD's
# kernels (rejection_bench_base, 4c4a165), run 1's warp pass at 5 blocks per
# SM (rejection_bench_v5) and it (rejection_bench) alternating, two rounds.
# Bundle: scripts/gpu-bundle.sh build-gpu .gpu-w rejection_bench rejection_cuda_test (the
#   patched build), plus bin/rejection_bench_base and bin/rejection_bench_v5.
# Run: bash bench/sampling/results/2026-11-29-warp-pass/run2.sh .gpu-w $OUT/run2
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$out/machine.txt"
timeout 200 "$bundle/bin/rejection_cuda_test" > "$out/rejection_cuda_test.txt" 2>&1
echo "rejection_cuda_test: rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED' "$out/rejection_cuda_test.txt" | tr '\n' ' ')"
for round in ${ROUNDS:-1 2}; do
  for args in "logits,8,8,151936 --dtype bf16" "logits,32,8,151936 --dtype bf16" "logits,64,8,151936 --dtype bf16" \
      "logits,128,8,151936 --dtype bf16" "logits,32,8,151936 --dtype fp16"; do
    for binary in rejection_bench_base rejection_bench_v5 rejection_bench; do
      # shellcheck disable=SC2086
      echo "r$round $binary $args | $(timeout 60 "$bundle/bin/$binary" --only $args --runs 200 --csv /dev/null 2>&1 |
        grep -E '^(logits)' | head -1 | sed -E 's/ +/ /g')"
    done
  done
done 2>&1 | tee "$out/ab.txt"
filter='*RowPass*:*BadValues*:*Temperature*:*Greedy*:*SixteenBit*'
for tool in memcheck racecheck; do
  timeout 150 compute-sanitizer --tool "$tool" --error-exitcode 3 "$bundle/bin/rejection_cuda_test" --gtest_filter="$filter" \
    > "$out/$tool.txt" 2>&1
  echo "$tool exit $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$out/$tool.txt" | tr '\n' ' ')"
done
