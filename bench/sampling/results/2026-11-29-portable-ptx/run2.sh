#!/usr/bin/env bash
# Run 2: the sampled-tree paths after the fix, on both builds: the kernel
# suite (sampled cases skip visibly where TreeSamplingSupported says no) and
# the served tree suite (cuda:0 refuses sampled trees FAILED_PRECONDITION
# there and keeps serving), plus the probe.
# Bundle: scripts/gpu-bundle.sh build-gpu <dir> sm90_code_test tree_cuda_test tree_server_test
#   multi_device_batcher_test;
#   the 75-virtual build's tree_cuda_test and tree_server_test as <name>_75.
# Run: bash bench/sampling/results/2026-11-29-portable-ptx/run2.sh <dir> $OUT/run2
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$out/machine.txt"
for t in sm90_code_test tree_cuda_test tree_server_test multi_device_batcher_test tree_cuda_test_75 tree_server_test_75; do
  [ -x "$bundle/bin/$t" ] || { echo "$t: missing"; continue; }
  start=$(date +%s)
  timeout 240 "$bundle/bin/$t" > "$out/$t.txt" 2>&1
  echo "$t: rc=$? $(($(date +%s) - start)) s $(grep -E '^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED' "$out/$t.txt" | head -12 | tr '\n' ' ')"
done 2>&1 | tee "$out/suites.txt"
