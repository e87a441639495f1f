#!/usr/bin/env bash
# The full-row check's combine no longer reads row_inv_t, which only the
# normalizer pass writes (since 9147253 RowCheckKernel takes the check and
# writes no 1/T). The suites that drive the kernels (the parity suite, the
# CUDA executor, a real server on loopback), compute-sanitizer initcheck over
# the whole parity suite (never run before) and memcheck over the full-row
# cases, then the parent (rejection_bench_base, the kernels of 9147253) and
# it alternating, two rounds: the full-row check at the headline shape (in
# the CSV only) and the logits shapes whose combine this touches.
# Bundle: scripts/gpu-bundle.sh build-gpu .gpu-c rejection_cuda_test cuda_executor_test
#   sampled_server_test rejection_bench, plus bin/rejection_bench_base.
# Run: bash bench/sampling/results/2026-11-29-check-combine/run1.sh .gpu-c $OUT/run1
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$out/machine.txt"
for t in rejection_cuda_test cuda_executor_test sampled_server_test; do
  "$bundle/bin/$t" > "$out/$t.txt" 2>&1
  echo "$t: rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/$t.txt" | tr '\n' ' ')"
done
for round in ${ROUNDS:-1 2}; do
  for args in "probabilities,8,8,151936" "logprobs,8,8,151936" "logits,8,8,151936" "logits,8,8,151936 --dtype bf16" \
      "logits,1,8,151936"; do
    for binary in rejection_bench_base rejection_bench; do
      # shellcheck disable=SC2086
      "$bundle/bin/$binary" --only $args --runs 200 --csv "$out/bench.csv" > /dev/null 2>&1
      echo "r$round $binary $args | $(grep -E 'cuda_rejection_host_merge,|cuda_rejection_full_row_check,|read_floor,' "$out/bench.csv" | tr '\n' ' ')"
    done
  done
done 2>&1 | tee "$out/ab.txt"
rm -f "$out/bench.csv"
timeout 300 compute-sanitizer --tool initcheck "$bundle/bin/rejection_cuda_test" > "$out/initcheck.txt" 2>&1
echo "initcheck: rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$out/initcheck.txt" | tr '\n' ' ')"
timeout 120 compute-sanitizer --tool memcheck "$bundle/bin/rejection_cuda_test" --gtest_filter='*BadValues*:*RowPassRuns*' \
  > "$out/memcheck.txt" 2>&1
echo "memcheck: rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$out/memcheck.txt" | tr '\n' ' ')"
