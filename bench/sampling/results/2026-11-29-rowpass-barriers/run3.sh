#!/usr/bin/env bash
# Variant E: C (run 2) plus the same lookup by warp 0 in RowPassRunKernel
# (16-bit rows from B ~ 20). E's parity suite, the CUDA executor and a real
# server on it, racecheck of the row-pass cases, then base
# (rejection_bench_base), C (rejection_bench_c) and E (rejection_bench)
# alternating, two rounds; with --row-chunks 1, whether C's one-chunk pass
# now beats the runs at bf16 B=32 and B=64.
# Bundle: scripts/gpu-bundle.sh build-gpu .gpu-c rejection_cuda_test
# rejection_bench cuda_executor_test sampled_server_test, plus
# bin/rejection_bench_base and bin/rejection_bench_c.
# Run: bash bench/sampling/results/2026-11-29-rowpass-barriers/run3.sh .gpu-c $OUT/run3
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$out/machine.txt"
for t in rejection_cuda_test cuda_executor_test sampled_server_test; do
  "$bundle/bin/$t" 2>&1 | tail -40 > "$out/$t.txt"
  echo "$t: $(tail -n 1 "$out/$t.txt")"
done
compute-sanitizer --tool racecheck "$bundle/bin/rejection_cuda_test" --gtest_filter='*RowPassRuns*:*Temperature*' \
  > "$out/racecheck.txt" 2>&1
echo "racecheck: $(grep -E 'RACECHECK SUMMARY|PASSED|FAILED' "$out/racecheck.txt" | tr '\n' ' ')"
for round in ${ROUNDS:-1 2}; do
  for args in "logits,8,8,151936" "logits,8,8,151936 --dtype bf16" "logits,32,8,151936 --dtype bf16" \
              "logits,32,8,151936 --dtype bf16 --row-chunks 1" "logits,64,8,151936 --dtype bf16" \
              "logits,64,8,151936 --dtype bf16 --row-chunks 1" "logits,128,8,151936 --dtype bf16"; do
    for binary in rejection_bench_base rejection_bench_c rejection_bench; do
      # shellcheck disable=SC2086
      echo "r$round $binary $args | $("$bundle/bin/$binary" --only $args --runs 200 --csv /dev/null 2>&1 |
        grep -E '^(probabilities|logits|logprobs)' | tr '\n' ' ')"
    done
  done
done 2>&1 | tee "$out/ab.txt"
