#!/bin/bash
# Release check 2026-11-27, part 2 (H100): the CUDA executor and the data
# plane's copies at HEAD (bundle: scripts/gpu-bundle.sh build-gpu .gpu-v2
# cuda_executor_test cuda_region_test cuda_ipc_worker row_copy_cuda_test).
set -u
B=$(cd "$1" && pwd); O=$OUT/verify2; mkdir -p $O; bin=$B/bin
export LD_LIBRARY_PATH=$B/lib
passed=0; failed=0
step() { local name=$1 limit=$2; shift 2; timeout "$limit" "$@" > "$O/$name.txt" 2>&1; local rc=$?
  local s; s=$(grep -E '^\[  (PASSED|FAILED|SKIPPED)  \]|ERROR SUMMARY|RACECHECK SUMMARY' "$O/$name.txt" | head -4 | tr '\n' ' ')
  if [ $rc -eq 0 ]; then passed=$((passed+1)); else failed=$((failed+1)); fi; echo "$name: rc=$rc $s"; }
step cuda_executor_test 180 $bin/cuda_executor_test
step cuda_region_test 120 bash -c "cd $bin && ./cuda_region_test"
step row_copy_cuda_test 60 $bin/row_copy_cuda_test
# Not the fault-injection tests: their deliberate invalid cudaMemcpyAsync is an
# API error the sanitizer counts (run 1 of this script included one: 2 errors,
# both that call; memcheck_executor_with_injected_fault.txt).
step memcheck_executor 300 compute-sanitizer --tool memcheck --error-exitcode 1 $bin/cuda_executor_test \
  --gtest_filter='EveryPath/*host_decided*:Decisions/*'
echo "verify2: $passed passed, $failed failed"
