#!/bin/bash
# Final GPU check, part 1: the GPU suites and sanitizers (scripts/gpu-verify.sh's steps without
# the binaries of part 2).
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
step cuda_server_test 120 $bin/cuda_server_test
step sampled_server_test 120 $bin/sampled_server_test
step racecheck_sampling 240 compute-sanitizer --tool racecheck --error-exitcode 1 $bin/rejection_cuda_test \
  --gtest_filter='RejectionCudaTest.GraphReplays*:RejectionCudaTest.BadValues*:RejectionCudaTest.TargetShape*:RejectionCudaTest.GreedyFilteredAndSigmoidLogitsMatch'
step memcheck_sampling 240 compute-sanitizer --tool memcheck --error-exitcode 1 $bin/rejection_cuda_test --gtest_filter='RejectionCudaTest.*'
echo "verify1: $passed passed, $failed failed"
