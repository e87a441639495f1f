#!/usr/bin/env bash
# The fixed-order block sum with its stride-32 step in warp 0's registers
# (variant.patch: the same additions, one barrier fewer per sum: four, not
# five): rejection_cuda_test and memcheck / racecheck over the row-pass cases
# on the variant, then HEAD (rb_base, e9b60da's kernels) and the variant
# (rb_var) alternating, two rounds. ptxas: no register or spill change.
# Bundle: rb_base, rb_var, scripts/gpu-bundle.sh build-gpu .gpu-x rejection_cuda_test
# Run: bash bench/sampling/results/2026-11-29-sum-barrier/run1.sh .gpu-x $OUT/run1
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$out/machine.txt"
timeout 200 "$bundle/bin/rejection_cuda_test" > "$out/rejection_cuda_test.txt" 2>&1
echo "rejection_cuda_test: rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$out/rejection_cuda_test.txt" | tr '\n' ' ')"
for round in 1 2; do
  for args in "logits,8,8,151936" "logits,32,8,151936" "logits,128,8,151936" "logits,8,8,151936 --dtype bf16" \
      "logits,32,8,151936 --dtype bf16" "logits,128,8,151936 --dtype bf16" "logits,1,8,151936 --dtype bf16"; do
    for binary in rb_base rb_var; do
      # shellcheck disable=SC2086
      timeout 60 "$bundle/bin/$binary" --only $args --runs 200 --csv /dev/null > "$out/last.txt" 2>&1
      echo "r$round $binary $args | $(grep -E '^logits' "$out/last.txt" | sed -E 's/ +/ /g' | tr '\n' ' ')"
    done
  done
done 2>&1 | tee "$out/ab.txt"
rm -f "$out/last.txt"
filter='*RowPass*:*SixteenBit*:*FilteredRowsFromWarpMaxima*:*BadValues*'
for tool in memcheck racecheck; do
  timeout 150 compute-sanitizer --tool "$tool" --error-exitcode 3 "$bundle/bin/rejection_cuda_test" --gtest_filter="$filter" \
    > "$out/$tool.txt" 2>&1
  echo "$tool exit $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$out/$tool.txt" | tr '\n' ' ')"
done
