#!/usr/bin/env bash
# The GPU suites of the sampled accepted-row copy, and memcheck over its new
# tests: row_copy_cuda_test (the kernel against the CPU reference),
# region_server_test on the CUDA executor (sampled batches with rows in and
# into regions, inline, handles), sampled_server_test (every sampled path).
# Build and bundle (the bundle limit takes the tests apart from the servers):
#   ninja -C build-gpu row_copy_cuda_test region_server_test sampled_server_test
#   scripts/gpu-bundle.sh build-gpu .gpu-sa row_copy_cuda_test region_server_test sampled_server_test
#   strip .gpu-sa/bin/*
# Run: run(carry=[".gpu-sa"]): bash bench/server/results/2026-11-27-sampled-copy/tests.sh .gpu-sa $OUT  (output: tests/)
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
bin=$bundle/bin
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
status=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/machine.txt"
run() {  # name args...
  local name=$1; shift
  if "$@" > "$out/$name.txt" 2>&1; then echo "PASS $name: $(grep -E '^\[  PASSED  \]|ERROR SUMMARY' "$out/$name.txt" | tr '\n' ' ')"
  else echo "FAIL $name"; tail -30 "$out/$name.txt"; status=1; fi
  grep -E '^\[  SKIPPED \]' "$out/$name.txt" | head -3
}
run row_copy_cuda_test "$bin/row_copy_cuda_test"
run region_server_test "$bin/region_server_test" --gtest_filter='*cuda*'
run sampled_server_test "$bin/sampled_server_test"
run memcheck-row-copy compute-sanitizer --tool memcheck --error-exitcode 1 "$bin/row_copy_cuda_test" --gtest_filter='*Accepted*'
run memcheck-region compute-sanitizer --tool memcheck --error-exitcode 1 "$bin/region_server_test" --gtest_filter='*SampledBatch*/cuda'
exit $status
