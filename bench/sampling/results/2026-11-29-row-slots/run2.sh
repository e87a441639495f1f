#!/usr/bin/env bash
# Run 2: the suites on HEAD's kernels (4b28192: run 1's (a) alone), which
# run 1 timed but tested only with (b): rejection_cuda_test,
# cuda_executor_test, memcheck / racecheck over the row-pass cases.
# Bundle: scripts/gpu-bundle.sh build-gpu .gpu-t rejection_cuda_test cuda_executor_test
#   specverify-server specverify-loadgen (the last two for ../../../server/results/2026-11-29-gpu-restart)
# Run: bash bench/sampling/results/2026-11-29-row-slots/run2.sh .gpu-t $OUT/run2
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$out/machine.txt"
for t in rejection_cuda_test cuda_executor_test; do
  timeout 200 "$bundle/bin/$t" > "$out/$t.txt" 2>&1
  echo "$t: rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED' "$out/$t.txt" | tr '\n' ' ')"
done
filter='*RowPass*:*BadValues*:*Temperature*:*SixteenBit*:*FilteredRowsFromWarpMaxima*'
for tool in memcheck racecheck; do
  timeout 150 compute-sanitizer --tool "$tool" --error-exitcode 3 "$bundle/bin/rejection_cuda_test" --gtest_filter="$filter" \
    > "$out/$tool.txt" 2>&1
  echo "$tool exit $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$out/$tool.txt" | tr '\n' ' ')"
done
