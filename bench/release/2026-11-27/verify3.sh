#!/bin/bash
# Release check 2026-11-27, part 3 (H100): the served greedy suite, then the
# served check of scripts/gpu-verify.sh (cuda:0 against the no-op ceiling at
# c=64; KV by handle with every answer's rows fetched at c=8) at HEAD
# (bundle: scripts/gpu-bundle.sh build-gpu .gpu-v3 cuda_server_test specverify-server specverify-loadgen).
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-v3/lib
mkdir -p $OUT/verify3
timeout 180 .gpu-v3/bin/cuda_server_test > $OUT/verify3/cuda_server_test.txt 2>&1
echo "cuda_server_test: rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/verify3/cuda_server_test.txt | tr '\n' ' ')"
SKIP_TESTS=1 scripts/gpu-verify.sh .gpu-v3 $OUT/verify3/served
