#!/usr/bin/env bash
# Run 1 (H100): CombineRowsKernel looking up each row's temperature before
# it waits for the row pass grid (the lookup reads inputs only), against
# caeeac5 (= 8754f80's kernels), alternating, three rounds; the new build's
# rejection_cuda_test first.
# Build: cmake --build build-gpu --target rejection_bench rejection_cuda_test;
#   scripts/gpu-bundle.sh build-gpu .gpu-d rejection_bench rejection_cuda_test;
#   caeeac5's rejection_bench (git worktree) as .gpu-d/bin/rejection_bench_base.
# Run (H100): carry .gpu-d
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-d/lib
B=.gpu-d/bin
timeout 300 $B/rejection_cuda_test --gtest_brief=1 > "$OUT/run1-tests.txt" 2>&1; echo "tests rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $OUT/run1-tests.txt | tr '\n' ' ')"
for round in 1 2 3; do
  for spec in "logits,1,8,151936" "logits,8,8,151936" "logits,8,8,151936 --dtype bf16" "logits,32,8,151936"; do
    set -- $spec
    for v in rejection_bench_base rejection_bench; do
      printf '%-22s round %d %-34s ' "$v" "$round" "$spec"
      $B/$v --only "$1" "${@:2}" --runs 200 --csv /dev/null | grep -E "ours median" | sed -E 's/ +/ /g; s/\| launch [0-9.]+ us \| row chunks [0-9]+//'
    done
  done
done > "$OUT/run1-ab.txt" 2>&1
cat "$OUT/run1-ab.txt"
