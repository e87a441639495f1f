#!/usr/bin/env bash
# The committed change (two-phase sweep with the weightless-quad skip, new)
# against HEAD's kernels (base) on issue #17's tracked shapes (peaked rows),
# alternating, three rounds; then compute-sanitizer memcheck and racecheck
# over the cases with zero runs, bad values and log-probability edges.
# Bundle as run2.sh. Run: bash bench/sampling/results/2026-11-28-shapes/run6.sh .gpu-ab $OUT/run6
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$out/machine.txt"
for round in ${ROUNDS:-1 2 3}; do
  for args in "probabilities,8,8,151936" "probabilities,128,8,151936" "logprobs,8,8,151936" \
              "logits,8,8,151936" "logits,8,8,151936 --dtype bf16" "logits,1,8,151936"; do
    for binary in rejection_bench_base rejection_bench; do
      # shellcheck disable=SC2086
      echo "r$round $binary $("$bundle/bin/$binary" --only $args --runs 200 --csv /dev/null 2>&1 |
        grep -E '^(probabilities|logits|logprobs)' | tr '\n' ' ')"
    done
  done
done 2>&1 | tee "$out/ab.txt"
filter='*ZeroRuns*:*BadValues*:*LogProbabilityEdge*'
for tool in memcheck racecheck; do
  compute-sanitizer --tool "$tool" --error-exitcode 3 "$bundle/bin/rejection_cuda_test" --gtest_filter="$filter" \
    > "$out/$tool.txt" 2>&1
  echo "$tool exit $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$out/$tool.txt" | tr '\n' ' ')"
done 2>&1 | tee "$out/sanitizer.txt"
