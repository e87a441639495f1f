#!/usr/bin/env bash
# Run 1 (H100): the decision head (coin and guessed draft token loaded before
# the offsets / the wait) against the session's start 1bc3dc8, alternating,
# two rounds; rejection_cuda_test of the new build first.
# Build: cmake --build build-gpu --target rejection_bench rejection_cuda_test;
#   scripts/gpu-bundle.sh build-gpu .gpu-d rejection_bench rejection_cuda_test;
#   1bc3dc8's rejection_bench (git worktree, same cmake line) as .gpu-d/bin/rejection_bench_base.
# Run (H100): carry .gpu-d
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-d/lib
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; } > "$OUT/run1-environment.txt" 2>&1
timeout 300 .gpu-d/bin/rejection_cuda_test --gtest_brief=1 > "$OUT/run1-tests.txt" 2>&1; echo "tests rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $OUT/run1-tests.txt | tr '\n' ' ')"
for round in 1 2; do
  for spec in "probabilities,8" "probabilities,1" "logprobs,8" "probabilities,32" "logits,1" "logits,8"; do
    for v in rejection_bench_base rejection_bench; do
      printf '%-22s round %d ' "$v" "$round"
      .gpu-d/bin/$v --only "$spec,8,151936" --runs 200 --csv /dev/null | grep -E "ours median" | sed -E 's/ +/ /g; s/\| launch.*//'
    done
  done
done > "$OUT/run1-ab.txt" 2>&1
cat "$OUT/run1-ab.txt"
