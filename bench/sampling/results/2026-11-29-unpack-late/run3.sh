#!/usr/bin/env bash
# Run 3: the change with 16-bit runs at 6 blocks per SM (run 2's rb_v6 as
# committed): suites, memcheck / racecheck over the row-pass cases, and
# where runs of chunks now start to pay against one-chunk blocks (the
# launcher takes runs from 32 single-chunk waves: B >= 40 at gamma = 8):
# --row-chunks 1 / 4 / 8 at B = 16, 24, 32 (bf16) and 1 / 8 at B = 24, 32
# (fp16), two rounds.
# Bundle: scripts/gpu-bundle.sh build-gpu .gpu-w rejection_bench rejection_cuda_test cuda_executor_test
# Run: bash bench/sampling/results/2026-11-29-unpack-late/run3.sh .gpu-w $OUT/run3
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$out/machine.txt"
for t in rejection_cuda_test cuda_executor_test; do
  timeout 200 "$bundle/bin/$t" > "$out/$t.txt" 2>&1
  echo "$t: rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED' "$out/$t.txt" | tr '\n' ' ')"
done
bench() {  # round, args...
  local round=$1
  shift
  timeout 60 "$bundle/bin/rejection_bench" --only "$@" --runs 200 --csv /dev/null > "$out/last.txt" 2>&1
  echo "r$round $* | $(grep -E '^(logits|probabilities)' "$out/last.txt" | sed -E 's/ +/ /g' | tr '\n' ' ')"
}
for round in ${ROUNDS:-1 2}; do
  for B in 16 24 32; do for n in 1 4 8; do bench "$round" logits,$B,8,151936 --dtype bf16 --row-chunks $n; done; done
  for B in 24 32; do for n in 1 8; do bench "$round" logits,$B,8,151936 --dtype fp16 --row-chunks $n; done; done
done 2>&1 | tee "$out/crossover.txt"
rm -f "$out/last.txt"
filter='*RowPass*:*BadValues*:*Temperature*:*SixteenBit*:*FilteredRowsFromWarpMaxima*'
for tool in memcheck racecheck; do
  timeout 150 compute-sanitizer --tool "$tool" --error-exitcode 3 "$bundle/bin/rejection_cuda_test" --gtest_filter="$filter" \
    > "$out/$tool.txt" 2>&1
  echo "$tool exit $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$out/$tool.txt" | tr '\n' ' ')"
done
