#!/usr/bin/env bash
# Run 4 (H100): the session's closing check of the committed kernels
# (8754f80; later commits change docs and results only): rejection_cuda_test
# and sampled_server_test (a real server on loopback, cuda:0).
# Build: cmake --build build-gpu --target sampled_server_test rejection_cuda_test;
#   scripts/gpu-bundle.sh build-gpu .gpu-v sampled_server_test rejection_cuda_test
# Run (H100): carry .gpu-v
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-v/lib
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv; } > "$OUT/run4-environment.txt" 2>&1
timeout 300 .gpu-v/bin/rejection_cuda_test --gtest_brief=1 > "$OUT/run4-tests.txt" 2>&1; echo "rejection_cuda_test rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $OUT/run4-tests.txt | tr '\n' ' ')"
timeout 200 .gpu-v/bin/sampled_server_test > "$OUT/run4-sampled-server.txt" 2>&1; echo "sampled_server_test rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $OUT/run4-sampled-server.txt | tr '\n' ' ')"
