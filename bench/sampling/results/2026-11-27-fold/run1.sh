#!/usr/bin/env bash
# Run 1 (H100): unfiltered exact logits without the combine grid, re-measured
# after the evict-first pass (fold.patch, macro SV_EXP_FOLD in the
# launcher): the race is the pass's programmatic dependent and each race
# block's eight warps fold its sequence's 2*gamma+1 rows from the chunk
# statistics (CombineRowsKernel's fold, factored into FoldRow, so the bits
# are the combine's) into shared memory, from which warp 0 decides.
# Experiment only: gamma <= 32 (a trap otherwise). base = 2ce133b.
# Build: cmake -S . -B build-fold ... -DCMAKE_CUDA_FLAGS=-DSV_EXP_FOLD;
#   cmake --build build-fold --target rejection_bench rejection_cuda_test
# Run (H100): carry .gpu-fold
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-fold/lib
B=.gpu-fold/bin
$B/rejection_cuda_test_fold 2>&1 | tail -3 > "$OUT/run1-tests.txt"
cat "$OUT/run1-tests.txt"
for round in 1 2; do
  for spec in "logits,8,8,151936" "logits,1,8,151936" "logits,8,8,151936 --dtype bf16" "logits,32,8,151936" "logits,32,8,151936 --dtype bf16"; do
    set -- $spec
    for v in base fold; do
      printf '%-5s round %d %-34s ' "$v" "$round" "$spec"
      $B/rejection_bench_$v --only "$1" "${@:2}" --runs 200 --csv /dev/null | grep -E "ours median|top-k" | sed -E 's/ +/ /g; s/\| launch.*//' | tr '\n' ' '
      echo
    done
  done
done > "$OUT/run1-ab.txt" 2>&1
sed -E 's/gamma=8 V=151936 //g; s/copies=[0-9]+ //; s/ p95 [0-9.]+( us)?//g; s/\(filter: [^)]*\)//; s/\| read floor [0-9.]+ us \([0-9.]+ MB\)//' "$OUT/run1-ab.txt"
