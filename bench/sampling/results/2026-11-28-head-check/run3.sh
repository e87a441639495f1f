#!/bin/bash
# Run 3: compute-sanitizer on the sampling kernels at 4f0c7ac's kernels
# (memcheck over every rejection_cuda_test case, both merges; racecheck over
# the filter scripts/gpu-sampling.sh uses). Bundle:
#   scripts/gpu-bundle.sh build-gpu .gpu-pack tests/kernels/rejection_cuda_test; strip .gpu-pack/bin/*
cd .gpu-pack && export LD_LIBRARY_PATH=$PWD/lib
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
compute-sanitizer --version | tail -1
timeout 280 compute-sanitizer --tool memcheck --error-exitcode 3 ./bin/rejection_cuda_test --gtest_brief=1 \
  --gtest_filter='RejectionCudaTest.*' 2>&1 | grep -E "PASSED|FAILED|ERROR SUMMARY" 
echo "memcheck rc=${PIPESTATUS[0]}"
timeout 200 compute-sanitizer --tool racecheck --error-exitcode 3 ./bin/rejection_cuda_test --gtest_brief=1 \
  --gtest_filter='RejectionCudaTest.GraphReplays*:RejectionCudaTest.BadValues*:RejectionCudaTest.TargetShape*:RejectionCudaTest.GreedyFilteredAndSigmoidLogitsMatch' 2>&1 \
  | grep -E "PASSED|FAILED|RACECHECK SUMMARY|ERROR SUMMARY"
echo "racecheck rc=${PIPESTATUS[0]}"
