#!/usr/bin/env bash
# The GPU suites of tree KV rows read in place (kv_sources): tree_cuda_test
# (greedy and pack-of-paths launches through kv_sources at 16-, 4- and
# 1-byte alignment against the CPU reference), tree_server_test,
# region_server_test on the CUDA executor (greedy trees with rows in a
# region); memcheck and racecheck over the tree kernels' greedy tests.
#   ninja -C build-gpu tree_cuda_test tree_server_test region_server_test
#   scripts/gpu-bundle.sh build-gpu .gpu-tt tree_cuda_test region_server_test; strip .gpu-tt/bin/*
#   (then a bundle of tree_server_test alone, the same script)
# Run: run(carry=[".gpu-tt"]): bash bench/server/results/2026-11-27-tree-region-rows/tests.sh .gpu-tt $OUT/tests
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
bin=$bundle/bin
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
status=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/machine.txt"
run() {  # name args...
  local name=$1; shift
  if "$@" > "$out/$name.txt" 2>&1; then echo "PASS $name: $(grep -E '^\[  PASSED  \]|ERROR SUMMARY|RACECHECK SUMMARY' "$out/$name.txt" | tr '\n' ' ')"
  else echo "FAIL $name"; tail -30 "$out/$name.txt"; status=1; fi
  grep -E '^\[  SKIPPED \]' "$out/$name.txt" | head -3
}
# The bundle limit (60 MiB) holds two of the three suites: whichever the
# bundle has run (here: tree_cuda_test + region_server_test, then
# tree_server_test alone).
if [ -x "$bin/tree_cuda_test" ]; then
  run tree_cuda_test "$bin/tree_cuda_test"
  run memcheck-tree compute-sanitizer --tool memcheck --error-exitcode 1 "$bin/tree_cuda_test" --gtest_filter='TreeCudaTest.Greedy*:TreeCudaTest.SampledClusterSizes*'
  run racecheck-tree compute-sanitizer --tool racecheck --error-exitcode 1 "$bin/tree_cuda_test" --gtest_filter='TreeCudaTest.GreedyChains*'
fi
if [ -x "$bin/region_server_test" ]; then
  run region_server_test "$bin/region_server_test" --gtest_filter='*cuda*'
  run memcheck-region compute-sanitizer --tool memcheck --error-exitcode 1 "$bin/region_server_test" --gtest_filter='*GreedyTrees*/cuda'
fi
[ -x "$bin/tree_server_test" ] && run tree_server_test "$bin/tree_server_test"
exit $status
