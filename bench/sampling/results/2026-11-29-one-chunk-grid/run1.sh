#!/usr/bin/env bash
# Run 1: RowPassKernel (one chunk a block: fp32 rows, 16-bit rows below 32
# single-chunk waves) without its per-block prologue's division: the grid is
# (chunk, row order) with orders past 65,535 in z, the row order is 32-bit,
# and a chunk's wholeness is one comparison with a host-computed count (the
# runs kernel's since f25d617). Suites on the change (parity, with the new
# case of more rows than one grid dimension; the CUDA executor; a real server
# on loopback), then HEAD's kernels (rejection_bench_base, 902d3d4) and the
# change alternating, two rounds; memcheck / racecheck over the row-pass cases.
# Bundle: scripts/gpu-bundle.sh build-gpu .gpu-g rejection_bench rejection_cuda_test
#   cuda_executor_test sampled_server_test, plus bin/rejection_bench_base.
# Run: bash bench/sampling/results/2026-11-29-one-chunk-grid/run1.sh .gpu-g $OUT/run1
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
  for args in "logits,8,8,151936 --dtype bf16" "logits,32,8,151936 --dtype bf16" "logits,1,8,151936 --dtype bf16" \
      "logits,8,8,151936 --dtype fp16" "logits,8,8,151936" "logits,1,8,151936" "logits,32,8,151936" \
      "probabilities,8,8,151936"; do
    for binary in rejection_bench_base rejection_bench; do
      # shellcheck disable=SC2086
      "$bundle/bin/$binary" --only $args --runs 200 --csv "$out/bench.csv" > "$out/last.txt" 2>&1
      echo "r$round $binary $args | $(grep -E '^(logits|probabilities)' "$out/last.txt" | head -2 | sed -E 's/ +/ /g; s/ p95 [0-9.]+//g' | tr '\n' ' ')"
    done
  done
done 2>&1 | tee "$out/ab.txt"
rm -f "$out/bench.csv" "$out/last.txt"
filter='*RowPass*:*BadValues*:*Temperature*:*SixteenBit*:*FilteredRowsFromWarpMaxima*'
for tool in memcheck racecheck; do
  timeout 150 compute-sanitizer --tool "$tool" --error-exitcode 3 "$bundle/bin/rejection_cuda_test" --gtest_filter="$filter" \
    > "$out/$tool.txt" 2>&1
  echo "$tool exit $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$out/$tool.txt" | tr '\n' ' ')"
done
