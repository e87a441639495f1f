#!/usr/bin/env bash
# The launchers ask whether the device runs sm_90 code (kernels/common/sm90_code.h)
# before they use programmatic dependent launches and clusters. Suites of the
# usual build (90-real 75-virtual: the H200 runs its sm_90 machine code) and
# of a build of compute_75 PTX alone (<name>_75: the driver JIT-compiles it,
# so no griddepcontrol.wait and no clusters in the kernels that run).
# Build: build-gpu as usual; a second tree with -DCMAKE_CUDA_ARCHITECTURES=75-virtual;
#   scripts/gpu-bundle.sh build-gpu .gpu-q rejection_cuda_test cuda_executor_test
#   sm90_code_test greedy_cuda_test tree_cuda_test; the 75-virtual build's
#   rejection_cuda_test, sm90_code_test, greedy_cuda_test, tree_cuda_test copied
#   in as <name>_75.
# Run: bash bench/sampling/results/2026-11-29-portable-ptx/run1.sh .gpu-q $OUT/ptx
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$out/machine.txt"
for t in sm90_code_test rejection_cuda_test cuda_executor_test greedy_cuda_test tree_cuda_test \
    sm90_code_test_75 rejection_cuda_test_75 greedy_cuda_test_75 tree_cuda_test_75; do
  [ -x "$bundle/bin/$t" ] || { echo "$t: missing"; continue; }
  start=$(date +%s)
  timeout 240 "$bundle/bin/$t" > "$out/$t.txt" 2>&1
  echo "$t: rc=$? $(($(date +%s) - start)) s $(grep -E '^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED' "$out/$t.txt" | head -12 | tr '\n' ' ')"
done 2>&1 | tee "$out/suites.txt"
