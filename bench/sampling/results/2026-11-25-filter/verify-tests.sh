#!/bin/bash
# Issue #17 item 3, 2026-11-25: the sampling suites, memcheck and racecheck on
# the filter's final kernels. GPU side; $1 = the bundle (scripts/gpu-bundle.sh
# build .gpu-v rejection_cuda_test rejection_stats_test rejection_reference_test
# sampling_math_test sampled_server_test rejection_bench).
set -u
B=$(cd "$1" && pwd); O=$OUT/tests; mkdir -p $O
export LD_LIBRARY_PATH=$B/lib
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $O/environment.txt 2>&1
for t in rejection_cuda_test rejection_stats_test rejection_reference_test sampling_math_test sampled_server_test; do
  timeout 240 $B/bin/$t > $O/$t.txt 2>&1; echo "$t rc=$?" >> $O/summary.txt; tail -n 1 $O/$t.txt >> $O/summary.txt
done
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $B/bin/rejection_cuda_test \
  --gtest_filter='*Filtered*:*TargetShape*:*TopP*:*BadValues*:*OwnSequences*:*Graph*' > $O/memcheck.txt 2>&1
echo "memcheck rc=$?" >> $O/summary.txt; tail -n 1 $O/memcheck.txt >> $O/summary.txt
timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 $B/bin/rejection_cuda_test \
  --gtest_filter="*TopPBoundaries*:*TargetShape*:*GreedyFiltered*" > $O/racecheck.txt 2>&1
echo "racecheck rc=$?" >> $O/summary.txt; tail -n 1 $O/racecheck.txt >> $O/summary.txt
cat $O/summary.txt
