#!/bin/bash
# Release check 2026-11-27, part 1 (H100): the GPU suites and sanitizers at HEAD
# (bundle: scripts/gpu-bundle.sh build-gpu .gpu-v1 greedy_cuda_test greedy_dispatch_test
#  rejection_cuda_test sampled_server_test; the three bundles of this check
#  each stay under the run tool's 64 MiB).
set -u
B=$(cd "$1" && pwd); O=$OUT/verify1; mkdir -p $O; bin=$B/bin
export LD_LIBRARY_PATH=$B/lib
passed=0; failed=0
step() { local name=$1 limit=$2; shift 2; timeout "$limit" "$@" > "$O/$name.txt" 2>&1; local rc=$?
  local s; s=$(grep -E '^\[  (PASSED|FAILED|SKIPPED)  \]|ERROR SUMMARY|RACECHECK SUMMARY' "$O/$name.txt" | head -4 | tr '\n' ' ')
  if [ $rc -eq 0 ]; then passed=$((passed+1)); else failed=$((failed+1)); fi; echo "$name: rc=$rc $s"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/machine.txt
step greedy_cuda_test 240 $bin/greedy_cuda_test
step greedy_dispatch_test 60 $bin/greedy_dispatch_test
step rejection_cuda_test 120 $bin/rejection_cuda_test
step sampled_server_test 120 $bin/sampled_server_test
step racecheck_sampling 240 compute-sanitizer --tool racecheck --error-exitcode 1 $bin/rejection_cuda_test \
  --gtest_filter='RejectionCudaTest.GraphReplays*:RejectionCudaTest.BadValues*:RejectionCudaTest.TargetShape*:RejectionCudaTest.GreedyFilteredAndSigmoidLogitsMatch'
step memcheck_greedy 240 compute-sanitizer --tool memcheck --error-exitcode 1 $bin/greedy_cuda_test --gtest_filter='*/b7_g8_*:*/b33_*:*/b1000_g3_a90_row256_*:*GreedyCudaGraphTest.*:GreedyPlanned*'
step racecheck_greedy 240 compute-sanitizer --tool racecheck --error-exitcode 1 $bin/greedy_cuda_test --gtest_filter='*/b7_g8_*:*/b33_g1to256_a70_row4096*:*GreedyCudaGraphTest.*'
step memcheck_sampling 240 compute-sanitizer --tool memcheck --error-exitcode 1 $bin/rejection_cuda_test --gtest_filter='RejectionCudaTest.*'
echo "verify1: $passed passed, $failed failed"
