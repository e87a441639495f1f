#!/bin/bash
# Issue #17 item 5: race shares aligned to 32 quads (NEW) against the head's
# kernel (OLD: the same bench source linked with the previous kernel
# library), alternating, two rounds; then the parity and statistical suites
# and memcheck on NEW. GPU side; $1 = the bundle.
set -u
B=$(cd "$1" && pwd); O=$OUT/ab; mkdir -p $O
export LD_LIBRARY_PATH=$B/lib
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; } > $O/environment.txt 2>&1
shapes="probabilities,8,8,151936 probabilities,32,8,151936 probabilities,128,8,151936 probabilities,128,8,128256 probabilities,128,8,152064 probabilities,1,8,151936 logprobs,8,8,151936 logits,8,8,151936"
for round in 1 2; do
  for v in new old; do
    bin=$B/bin/rejection_bench; [ $v = old ] && bin=$B/bin/rejection_bench_old
    for s in $shapes; do
      echo "$v round $round: $($bin --only $s --csv /tmp/x.csv 2>&1 | grep -E 'ours')" >> $O/ab.txt
    done
  done
done
$B/bin/rejection_cuda_test > $O/rejection_cuda_test.txt 2>&1; echo "rejection_cuda_test rc=$?" >> $O/summary.txt
$B/bin/rejection_stats_test > $O/rejection_stats_test.txt 2>&1; echo "rejection_stats_test rc=$?" >> $O/summary.txt
compute-sanitizer --tool memcheck --error-exitcode 9 $B/bin/rejection_cuda_test > $O/memcheck.txt 2>&1; echo "memcheck rc=$?" >> $O/summary.txt
for f in $O/rejection_cuda_test.txt $O/rejection_stats_test.txt $O/memcheck.txt; do tail -n 3 $f; done >> $O/summary.txt
