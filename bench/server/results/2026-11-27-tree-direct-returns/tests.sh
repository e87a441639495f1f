#!/usr/bin/env bash
# The GPU suites of tree rows answered straight into the requests' outputs
# (TreeRowDestinations): tree_cuda_test (every greedy parity case and every
# sampled pack of paths also through row destinations: requests of 1-3
# trees, every other one into an output of its own at 0/8/2-byte offsets,
# the rest at their packed place, one nowhere; from staged rows and from
# kv_sources), region_server_test on the CUDA executor (new:
# TreeBatchOfEveryReturnGivesEachRequestItsOwnRows, four requests of three
# trees in one batch, greedy and sampled), tree_server_test,
# cuda_executor_test; memcheck over the new kernel paths and the new served
# test, racecheck over the greedy named shapes.
#   ninja -C build-gpu tree_cuda_test region_server_test tree_server_test cuda_executor_test
#   scripts/gpu-bundle.sh build-gpu .gpu-tt tree_cuda_test region_server_test; strip .gpu-tt/bin/*
#   (then a bundle of tree_server_test and cuda_executor_test, the same script)
# Run: run(carry=[".gpu-tt"]): bash bench/server/results/2026-11-27-tree-direct-returns/tests.sh .gpu-tt $OUT/tests
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
bin=$bundle/bin
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
status=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/machine.txt"
run() {  # name args...
  local name=$1; shift
  if timeout 400 "$@" > "$out/$name.txt" 2>&1; then echo "PASS $name: $(grep -E '^\[  PASSED  \]|ERROR SUMMARY|RACECHECK SUMMARY' "$out/$name.txt" | tr '\n' ' ')"
  else echo "FAIL $name"; tail -30 "$out/$name.txt"; status=1; fi
  grep -E '^\[  SKIPPED \]' "$out/$name.txt" | head -3
}
if [ -x "$bin/tree_cuda_test" ]; then
  run tree_cuda_test "$bin/tree_cuda_test"
  run memcheck-tree compute-sanitizer --tool memcheck --error-exitcode 1 "$bin/tree_cuda_test" \
      --gtest_filter='TreeCudaTest.Greedy*:TreeCudaTest.SampledClusterSizes*:TreeCudaTest.SampledMatches*'
  run racecheck-tree compute-sanitizer --tool racecheck --error-exitcode 1 "$bin/tree_cuda_test" \
      --gtest_filter='TreeCudaTest.GreedyChains*'
fi
if [ -x "$bin/region_server_test" ]; then
  run region_server_test "$bin/region_server_test" --gtest_filter='*cuda*'
  run memcheck-region compute-sanitizer --tool memcheck --error-exitcode 1 "$bin/region_server_test" \
      --gtest_filter='*Tree*/cuda'
fi
[ -x "$bin/tree_server_test" ] && run tree_server_test "$bin/tree_server_test"
[ -x "$bin/cuda_executor_test" ] && run cuda_executor_test "$bin/cuda_executor_test"
exit $status
