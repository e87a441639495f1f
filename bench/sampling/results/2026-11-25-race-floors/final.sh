#!/bin/bash
set -u
B=$(cd "$1" && pwd); O=$OUT/final; mkdir -p $O
export LD_LIBRARY_PATH=$B/lib
date -u > $O/environment.txt
for t in rejection_cuda_test rejection_stats_test sampled_server_test; do
  $B/bin/$t > $O/$t.txt 2>&1; echo "$t rc=$?" >> $O/summary.txt; tail -n 1 $O/$t.txt >> $O/summary.txt
done
compute-sanitizer --tool memcheck --error-exitcode 9 $B/bin/rejection_cuda_test > $O/memcheck.txt 2>&1; echo "memcheck rc=$?" >> $O/summary.txt; tail -n 1 $O/memcheck.txt >> $O/summary.txt
compute-sanitizer --tool racecheck --error-exitcode 9 $B/bin/rejection_cuda_test --gtest_filter='*GreedyFiltered*:*TopPBoundaries*:*OwnSequences*' > $O/racecheck.txt 2>&1; echo "racecheck rc=$?" >> $O/summary.txt; tail -n 1 $O/racecheck.txt >> $O/summary.txt
for d in fp32 bf16; do $B/bin/rejection_bench --dtype $d --only logits,8,8,151936 --csv /tmp/x.csv 2>&1 | grep -E "ours|top-k" | sed "s/^/$d: /" >> $O/bench.txt; done
$B/bin/rejection_bench --only logprobs,8,8,151936 --csv /tmp/x.csv 2>&1 | grep ours >> $O/bench.txt
$B/bin/rejection_bench --only probabilities,8,8,151936 --csv /tmp/x.csv 2>&1 | grep ours >> $O/bench.txt
cat $O/summary.txt $O/bench.txt
