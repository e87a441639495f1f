#!/usr/bin/env bash
# Two whole chunks at a time in RowPassRunKernel for 16-bit rows
# (FullChunkPairStats: each reduction's barriers shared by both chunks,
# validity folded into the maxima's barrier). Suites on the change (the
# run-length test now also has fp16 and filtered bf16 rows), memcheck and
# racecheck over the row-pass cases, then HEAD's kernels (rejection_bench_base,
# f25d617) and it alternating, two rounds, at the shapes that take runs
# (16-bit, B >= 59 at gamma 8) and a one-chunk control.
# Bundle: scripts/gpu-bundle.sh build-gpu .gpu-p rejection_bench rejection_cuda_test
#   cuda_executor_test sampled_server_test, plus bin/rejection_bench_base (f25d617's build).
# Run: bash bench/sampling/results/2026-11-29-chunk-pairs/run1.sh .gpu-p $OUT/run1
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$out/machine.txt"
for t in rejection_cuda_test cuda_executor_test sampled_server_test; do
  timeout 200 "$bundle/bin/$t" > "$out/$t.txt" 2>&1
  echo "$t: rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED' "$out/$t.txt" | tr '\n' ' ')"
done
for round in ${ROUNDS:-1 2}; do
  for args in "logits,64,8,151936 --dtype bf16" "logits,128,8,151936 --dtype bf16" "logits,128,8,151936 --dtype fp16" \
      "logits,8,8,151936 --dtype bf16"; do
    for binary in rejection_bench_base rejection_bench; do
      # shellcheck disable=SC2086
      echo "r$round $binary $args | $(timeout 60 "$bundle/bin/$binary" --only $args --runs 200 --csv /dev/null 2>&1 |
        grep -E '^logits' | head -2 | sed -E 's/ +/ /g; s/ p95 [0-9.]+//g; s/G=[0-9]+ copies=[0-9]+ //; s/ \| launch [0-9.]+ us//' | tr '\n' ' ')"
    done
  done
done 2>&1 | tee "$out/ab.txt"
filter='*RowPass*:*BadValues*:*SixteenBit*:*FilteredRowsFromWarpMaxima*'
for tool in memcheck racecheck; do
  timeout 150 compute-sanitizer --tool "$tool" --error-exitcode 3 "$bundle/bin/rejection_cuda_test" --gtest_filter="$filter" \
    > "$out/$tool.txt" 2>&1
  echo "$tool exit $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$out/$tool.txt" | tr '\n' ' ')"
done
