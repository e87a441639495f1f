#!/usr/bin/env bash
# Run 1: the row pass keeps a chunk's values packed until each use (no fp16
# row-pass spills), the chunk pair's sums through the shared
# BlockFixedOrderSums, and GeneralChunkStats' mode a template argument.
# Suites on the change, then HEAD's kernels (rejection_bench_base, dc1bef9)
# and the change alternating, two rounds, fp16 logits at item 1's four
# batch sizes among them; memcheck / racecheck over the row-pass cases.
# Bundle: scripts/gpu-bundle.sh build-gpu .gpu-u rejection_bench rejection_cuda_test
#   cuda_executor_test, plus bin/rejection_bench_base.
# Run: bash bench/sampling/results/2026-11-29-unpack-late/run1.sh .gpu-u $OUT/run1
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$out/machine.txt"
for t in rejection_cuda_test cuda_executor_test; do
  timeout 200 "$bundle/bin/$t" > "$out/$t.txt" 2>&1
  echo "$t: rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED' "$out/$t.txt" | tr '\n' ' ')"
done
for round in ${ROUNDS:-1 2}; do
  for args in "logits,1,8,151936 --dtype fp16" "logits,8,8,151936 --dtype fp16" "logits,32,8,151936 --dtype fp16" \
      "logits,128,8,151936 --dtype fp16" "logits,8,8,151936 --dtype bf16" "logits,128,8,151936 --dtype bf16" \
      "logits,8,8,151936" "logits,128,8,151936" "probabilities,8,8,151936 --dtype fp16"; do
    for binary in rejection_bench_base rejection_bench; do
      # shellcheck disable=SC2086
      timeout 60 "$bundle/bin/$binary" --only $args --runs 200 --csv /dev/null > "$out/last.txt" 2>&1
      echo "r$round $binary $args | $(grep -E '^(logits|probabilities)' "$out/last.txt" | sed -E 's/ +/ /g' | tr '\n' ' ')"
    done
  done
done 2>&1 | tee "$out/ab.txt"
rm -f "$out/last.txt"
filter='*RowPass*:*BadValues*:*Temperature*:*SixteenBit*:*FilteredRowsFromWarpMaxima*'
for tool in memcheck racecheck; do
  timeout 150 compute-sanitizer --tool "$tool" --error-exitcode 3 "$bundle/bin/rejection_cuda_test" --gtest_filter="$filter" \
    > "$out/$tool.txt" 2>&1
  echo "$tool exit $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$out/$tool.txt" | tr '\n' ' ')"
done
