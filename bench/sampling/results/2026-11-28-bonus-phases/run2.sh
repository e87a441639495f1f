#!/usr/bin/env bash
# The committed kernels (the variant reverted) with the extended
# ProbabilityRowsWithZeroRunsMatch: the whole parity suite, then memcheck
# and racecheck on the zero-run case.
# Bundle: scripts/gpu-bundle.sh build-gpu .gpu-c rejection_cuda_test
# Run: bash bench/sampling/results/2026-11-28-bonus-phases/run2.sh .gpu-c $OUT/run2
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$out/machine.txt"
"$bundle/bin/rejection_cuda_test" 2>&1 | tail -40 > "$out/tests.txt"
tail -1 "$out/tests.txt"
for tool in memcheck racecheck; do
  compute-sanitizer --tool $tool "$bundle/bin/rejection_cuda_test" --gtest_filter='*ZeroRuns*' > "$out/$tool.txt" 2>&1
  echo "$tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$out/$tool.txt" | tr '\n' ' ')"
done
