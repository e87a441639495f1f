#!/usr/bin/env bash
# The bonus row's race in two phases (the sweep of SweepInTwoPhases for the
# row a sequence samples when every draft token is accepted): the new tree's
# parity suite under compute-sanitizer memcheck and racecheck on the
# zero-run case and whole, then base (rejection_bench_base) and new
# (rejection_bench) alternating, two rounds, on bonus rows (--shape
# identical: every draft accepted) and on the tracked shapes (peaked) as
# controls.
# Bundle: scripts/gpu-bundle.sh build-gpu .gpu-b rejection_cuda_test rejection_bench,
# plus bin/rejection_bench_base built from the base commit.
# Run: bash bench/sampling/results/2026-11-28-bonus-phases/run1.sh .gpu-b $OUT/run1
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$out/machine.txt"
"$bundle/bin/rejection_cuda_test" 2>&1 | tail -40 > "$out/tests.txt"
tail -1 "$out/tests.txt"
for tool in memcheck racecheck; do
  compute-sanitizer --tool $tool "$bundle/bin/rejection_cuda_test" \
      --gtest_filter='*ZeroRuns*:*BadValues*:*LogProbabilityEdge*:*FilteredRowsMatchForEvery*' > "$out/$tool.txt" 2>&1
  echo "$tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$out/$tool.txt" | tr '\n' ' ')"
done
for round in ${ROUNDS:-1 2}; do
  for args in "probabilities,8,8,151936 --shape identical" "probabilities,128,8,151936 --shape identical" \
              "logprobs,8,8,151936 --shape identical" "logits,8,8,151936 --shape identical" \
              "logits,8,8,151936 --shape identical --top-k 50 --top-p 0.9" \
              "probabilities,8,8,151936" "probabilities,128,8,151936" "logprobs,8,8,151936" "logits,8,8,151936" \
              "logits,8,8,151936 --top-k 50 --top-p 0.9"; do
    for binary in rejection_bench_base rejection_bench; do
      # shellcheck disable=SC2086
      echo "r$round $binary $args | $("$bundle/bin/$binary" --only $args --runs 200 --csv /dev/null 2>&1 |
        grep -E '^(probabilities|logits|logprobs)' | tr '\n' ' ')"
    done
  done
done 2>&1 | tee "$out/ab.txt"
