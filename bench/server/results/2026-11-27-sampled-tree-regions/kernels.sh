#!/usr/bin/env bash
# Sampled token trees read their distribution rows through row tables (the
# worker's region) as well as staged: the kernel suite (tree_cuda_test, with
# the new row-table parity test), memcheck over it, and tree_bench of the
# changed kernel against the one before (staged rows: the row address now
# goes through SampledRowAddress), alternating, two rounds each, --quick.
#   ninja -C build-gpu tree_cuda_test tree_bench   (and tree_bench of the commit before, as tree_bench_old)
#   scripts/gpu-bundle.sh build-gpu .gpu-k tree_cuda_test tree_bench; cp <old>/tree_bench .gpu-k/bin/tree_bench_old
# Run: run(carry=[".gpu-k"]): bash bench/server/results/2026-11-27-sampled-tree-regions/kernels.sh .gpu-k $OUT/kernels
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
bin=$bundle/bin
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
status=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/machine.txt"
"$bin/tree_cuda_test" > "$out/tree_cuda_test.txt" 2>&1 || status=1
grep -E "^\[  (PASSED|FAILED)" "$out/tree_cuda_test.txt"
compute-sanitizer --tool memcheck --error-exitcode 1 "$bin/tree_cuda_test" \
    --gtest_filter='TreeCudaTest.SampledRowsThroughRowTables*:TreeCudaTest.SampledClusterSizes*' \
    > "$out/memcheck.txt" 2>&1 || status=1
grep -E "^\[  (PASSED|FAILED)|ERROR SUMMARY" "$out/memcheck.txt"
for round in 1 2; do
  for v in old new; do
    b=$bin/tree_bench; [ $v = old ] && b=$bin/tree_bench_old
    "$b" --quick --csv "$out/bench-$v-r$round.csv" > "$out/bench-$v-r$round.txt" 2>&1 || status=1
  done
done
exit $status
