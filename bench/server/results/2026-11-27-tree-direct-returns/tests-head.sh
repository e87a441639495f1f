#!/usr/bin/env bash
# The GPU suites the 2026-11-27 review commit 48342c5 changed the host side
# of (sampled launches' distribution rows, the copy plans) and that ran only
# on the CPU then, at this commit: rejection_cuda_test, row_copy_cuda_test,
# cuda_executor_test, sampled_server_test; memcheck over the row copies and
# the served sampled tests on the CUDA executor.
#   ninja -C build-gpu sampled_server_test cuda_executor_test rejection_cuda_test row_copy_cuda_test
#   scripts/gpu-bundle.sh build-gpu .gpu-v sampled_server_test cuda_executor_test rejection_cuda_test \
#     row_copy_cuda_test; strip .gpu-v/bin/*
# Run: run(carry=[".gpu-v"]): bash bench/server/results/2026-11-27-tree-direct-returns/tests-head.sh .gpu-v $OUT/tests-head
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
bin=$bundle/bin
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
status=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/machine.txt"
run() {  # name args...
  local name=$1; shift
  if timeout 300 "$@" > "$out/$name.txt" 2>&1; then echo "PASS $name: $(grep -E '^\[  PASSED  \]|ERROR SUMMARY' "$out/$name.txt" | tr '\n' ' ')"
  else echo "FAIL $name"; tail -30 "$out/$name.txt"; status=1; fi
  grep -E '^\[  SKIPPED \]' "$out/$name.txt" | head -3
}
[ -n "${MEMCHECK_ONLY:-}" ] || {
run rejection_cuda_test "$bin/rejection_cuda_test"
run row_copy_cuda_test "$bin/row_copy_cuda_test"
run cuda_executor_test "$bin/cuda_executor_test"
run sampled_server_test "$bin/sampled_server_test"
}
run memcheck-row-copy compute-sanitizer --tool memcheck --error-exitcode 1 "$bin/row_copy_cuda_test"
run memcheck-sampled-served compute-sanitizer --tool memcheck --error-exitcode 1 "$bin/sampled_server_test" \
    --gtest_filter='*/Cuda'
exit $status
