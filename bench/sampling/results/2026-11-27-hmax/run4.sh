#!/usr/bin/env bash
# Run 4 (H100): after review, warp 3's L2 prefetch for long drafts starts at
# position 32 (warp 0 already reads 0..31), and a new parity test covers
# drafts longer than a warp (gamma 33-40: the decision's second round of
# lanes, bonus rows past position 31, an id error at position >= 32).
# Build: cmake --build build-gpu --target rejection_cuda_test rejection_bench
# Run (H100): carry .gpu-tb2
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-tb2/lib
B=.gpu-tb2/bin
{
  $B/rejection_cuda_test 2>&1 | grep -E "LongerThanAWarp|SixteenBit|PASSED|FAILED" | tail -6
  compute-sanitizer --tool memcheck $B/rejection_cuda_test --gtest_filter='*LongerThanAWarp*' 2>&1 | grep -E "ERROR SUMMARY|PASSED|FAILED" | tail -2
  for spec in "logits,8,40,151936" "logits,8,8,151936"; do
    printf '%-22s ' "$spec"; $B/rejection_bench --only "$spec" --runs 200 --csv /dev/null | grep -E "ours median" | sed -E 's/ +/ /g; s/\| launch.*//'
  done
} 2>&1 | tee "$OUT/run4-tests.txt"
