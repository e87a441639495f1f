#!/bin/bash
set -u
B=$(cd "$1" && pwd); O=$OUT/r3; mkdir -p $O
export LD_LIBRARY_PATH=$B/lib
timeout 200 $B/bin/rejection_cuda_test --gtest_filter='*Filtered*:*TargetShape*:*TopP*' > $O/parity_filter.txt 2>&1; echo "parity_filter rc=$?" >> $O/summary.txt; tail -n 3 $O/parity_filter.txt >> $O/summary.txt
grep -E "Failure|FAILED|sequence [0-9]+:|Which is|slices" $O/parity_filter.txt | head -30 >> $O/summary.txt
cat $O/summary.txt
for round in 1 2; do
  for v in new old; do
    bin=$B/bin/rejection_bench; [ $v = old ] && bin=$B/bin/rejection_bench_old
    for d in fp32 bf16; do
      $bin --dtype $d --only logits,8,8,151936 --csv /tmp/x.csv 2>&1 | grep -E "ours|top-k" | sed "s/^/$v r$round $d: /" >> $O/ab.txt
    done
  done
done
for sl in 1 2 3 4 6 8; do
  $B/bin/rejection_bench --filter-slices $sl --only logits,8,8,151936 --csv /tmp/x.csv 2>&1 | grep -E "top-k" | sed "s/^/new fp32 slices $sl: /" >> $O/ab.txt
done
cat $O/ab.txt
