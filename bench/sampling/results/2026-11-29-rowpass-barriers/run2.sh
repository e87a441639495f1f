#!/usr/bin/env bash
# Run 1's winner alone: only warp 0 looks the row's temperature up, with the
# committed reductions. Variant C publishes its 1/T at a barrier of its own
# (rejection_bench_c, rejection_cuda_test_c); variant D at the chunk's
# validity barrier, a greedy row's full chunk falling back to the general
# path after it (rejection_bench_d, rejection_cuda_test_d). Both parity
# suites, racecheck and memcheck of C's row-pass cases, then base
# (rejection_bench_base), C and D alternating, two rounds.
# Bundle: bin/ holds the five binaries (scripts/gpu-bundle.sh for the libraries).
# Run: bash bench/sampling/results/2026-11-29-rowpass-barriers/run2.sh .gpu-b $OUT/run2
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$out/machine.txt"
for v in c d; do
  "$bundle/bin/rejection_cuda_test_$v" 2>&1 | tail -40 > "$out/tests-$v.txt"
  echo "$v: $(tail -1 "$out/tests-$v.txt")"
done
filter='*RowPass*:*Filtered*:*Temperature*:*Greedy*:*SixteenBit*:*BadValues*:*TargetShape*'
for tool in memcheck racecheck; do
  compute-sanitizer --tool $tool "$bundle/bin/rejection_cuda_test_c" --gtest_filter="$filter" > "$out/$tool-c.txt" 2>&1
  echo "$tool c: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$out/$tool-c.txt" | tr '\n' ' ')"
done
for round in ${ROUNDS:-1 2}; do
  for args in "logits,8,8,151936" "logits,8,8,151936 --dtype bf16" "logits,8,8,151936 --dtype fp16" \
              "logits,1,8,151936" "logits,32,8,151936" "logits,32,8,151936 --dtype bf16" \
              "logits,8,8,151936 --top-k 50 --top-p 0.9"; do
    for binary in rejection_bench_base rejection_bench_c rejection_bench_d; do
      # shellcheck disable=SC2086
      echo "r$round $binary $args | $("$bundle/bin/$binary" --only $args --runs 200 --csv /dev/null 2>&1 |
        grep -E '^(probabilities|logits|logprobs)' | tr '\n' ' ')"
    done
  done
done 2>&1 | tee "$out/ab.txt"
