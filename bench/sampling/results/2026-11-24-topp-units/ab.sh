#!/bin/bash
# Issue #17 item 3 / top-p determinism: top-p masses as 2^-40 fixed-point
# integers (NEW) against the kernels of the commit before (OLD, double
# masses), alternating, two rounds, fp32 and bf16 logits B=8 (the bench
# prints the unfiltered and the top-k 50 + top-p 0.9 figures); then the
# parity and statistical suites, memcheck and racecheck on NEW.
# GPU side; $1 = the bundle.
set -u
B=$(cd "$1" && pwd); O=$OUT/topp_ab; mkdir -p $O
export LD_LIBRARY_PATH=$B/lib
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; } > $O/environment.txt 2>&1
for round in 1 2; do
  for v in new old; do
    bin=$B/bin/rejection_bench; [ $v = old ] && bin=$B/bin/rejection_bench_old
    for d in fp32 bf16; do
      $bin --dtype $d --only logits,8,8,151936 --csv /tmp/x.csv 2>&1 | grep -E "ours|top-k" | sed "s/^/$v round $round $d: /" >> $O/ab.txt
    done
  done
done
$B/bin/rejection_cuda_test > $O/rejection_cuda_test.txt 2>&1; echo "rejection_cuda_test rc=$?" >> $O/summary.txt
$B/bin/rejection_stats_test > $O/rejection_stats_test.txt 2>&1; echo "rejection_stats_test rc=$?" >> $O/summary.txt
compute-sanitizer --tool memcheck --error-exitcode 9 $B/bin/rejection_cuda_test > $O/memcheck.txt 2>&1; echo "memcheck rc=$?" >> $O/summary.txt
compute-sanitizer --tool racecheck --error-exitcode 9 $B/bin/rejection_cuda_test \
  --gtest_filter='RejectionCudaTest.TopPBoundaries*:RejectionCudaTest.GreedyFilteredAndSigmoidLogitsMatch' > $O/racecheck.txt 2>&1; echo "racecheck rc=$?" >> $O/summary.txt
for f in $O/rejection_cuda_test.txt $O/rejection_stats_test.txt $O/memcheck.txt $O/racecheck.txt; do tail -n 2 $f; done >> $O/summary.txt
