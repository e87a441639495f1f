#!/usr/bin/env bash
# The full-row check of probability and log-probability rows in a kernel of
# its own (RowCheckKernel): whole chunks vectorized, no per-element bounds
# tests, no maximum, no temperature lookup. Its parity suite (the bad-value
# test now also at V=8200, whose whole chunks take the new path), then the
# parent (rejection_bench_base, the kernels of 196d7ce) and it
# (rejection_bench) alternating, three rounds: the full-row check at the
# headline shape (the bench writes it to the CSV only) and two normalizer
# shapes as controls; last, memcheck and racecheck of the full-row cases.
# Bundle: scripts/gpu-bundle.sh build-gpu .gpu-f rejection_cuda_test rejection_bench,
# plus bin/rejection_bench_base.
# Run: bash bench/sampling/results/2026-11-29-full-row-check/run1.sh .gpu-f $OUT/run1
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$out/machine.txt"
"$bundle/bin/rejection_cuda_test" 2>&1 | tail -40 > "$out/tests.txt"
echo "tests: $(tail -n 1 "$out/tests.txt")"
for round in ${ROUNDS:-1 2 3}; do
  for args in "probabilities,8,8,151936" "logprobs,8,8,151936" "logits,8,8,151936 --dtype bf16" "logits,8,8,151936"; do
    for binary in rejection_bench_base rejection_bench; do
      # shellcheck disable=SC2086
      "$bundle/bin/$binary" --only $args --runs 200 --csv "$out/bench.csv" > /dev/null 2>&1
      echo "r$round $binary $args | $(grep -E 'cuda_rejection_host_merge,|cuda_rejection_full_row_check,|read_floor,' "$out/bench.csv" | tr '\n' ' ')"
    done
  done
done 2>&1 | tee "$out/ab.txt"
rm -f "$out/bench.csv"
for tool in memcheck racecheck; do
  compute-sanitizer --tool $tool "$bundle/bin/rejection_cuda_test" --gtest_filter='*BadValues*:*RowPassRuns*' \
    > "$out/$tool.txt" 2>&1
  echo "$tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$out/$tool.txt" | tr '\n' ' ')"
done
