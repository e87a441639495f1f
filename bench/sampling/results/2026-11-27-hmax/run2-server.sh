#!/usr/bin/env bash
# Run 2, part two (H100): the served sampled path on HEAD's kernels.
# Build: cmake --build build-gpu --target sampled_server_test;
#   scripts/gpu-bundle.sh build-gpu .gpu-srv sampled_server_test
# Run (H100): carry .gpu-srv
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-srv/lib
.gpu-srv/bin/sampled_server_test 2>&1 | tail -3 | tee "$OUT/run2-server-tests.txt"
