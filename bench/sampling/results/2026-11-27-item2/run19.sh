#!/usr/bin/env bash
# Final correctness run of a73b990 (H100): rejection_cuda_test, its memcheck
# and racecheck over RejectionCudaTest.*, and the served sampled suite.
# Build: cmake --build build-gpu --target rejection_cuda_test
#   sampled_server_test; scripts/gpu-bundle.sh build-gpu .gpu-now
#   rejection_cuda_test sampled_server_test.
# Run (H100): carry .gpu-now
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-now/lib
.gpu-now/bin/rejection_cuda_test > "$OUT/run19-tests.txt" 2>&1; echo "rejection_cuda_test rc=$?" >> "$OUT/run19-tests.txt"
tail -2 "$OUT/run19-tests.txt"
timeout 240 compute-sanitizer --tool memcheck .gpu-now/bin/rejection_cuda_test --gtest_filter='RejectionCudaTest.*' > "$OUT/run19-memcheck.txt" 2>&1; echo "memcheck rc=$?" >> "$OUT/run19-memcheck.txt"
tail -2 "$OUT/run19-memcheck.txt"
timeout 200 compute-sanitizer --tool racecheck .gpu-now/bin/rejection_cuda_test --gtest_filter='*LogProbab*:*GreedyFilteredAndSigmoid*:*MatchesTheCpuReferenceAcrossTheGrid*' > "$OUT/run19-racecheck.txt" 2>&1; echo "racecheck rc=$?" >> "$OUT/run19-racecheck.txt"
tail -2 "$OUT/run19-racecheck.txt"
timeout 200 .gpu-now/bin/sampled_server_test > "$OUT/run19-sampled-server.txt" 2>&1; echo "sampled_server_test rc=$?" >> "$OUT/run19-sampled-server.txt"
tail -3 "$OUT/run19-sampled-server.txt"
