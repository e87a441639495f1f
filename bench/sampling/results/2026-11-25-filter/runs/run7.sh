#!/bin/bash
set -u
B=$(cd "$1" && pwd); O=$OUT/r7; mkdir -p $O
export LD_LIBRARY_PATH=$B/lib
timeout 200 $B/bin/rejection_cuda_test --gtest_filter='*Filtered*:*TargetShape*:*TopP*:*Graph*' > $O/parity_filter.txt 2>&1; echo "parity_filter rc=$?" >> $O/summary.txt; tail -n 3 $O/parity_filter.txt >> $O/summary.txt
grep -E "Failure|FAILED|sequence [0-9]+:|Which is|slices" $O/parity_filter.txt | head -30 >> $O/summary.txt
cat $O/summary.txt
for round in 1 2; do
  for v in new prev2 old; do
    bin=$B/bin/rejection_bench_$v; [ $v = new ] && bin=$B/bin/rejection_bench
    for d in fp32 bf16; do
      $bin --dtype $d --only logits,8,8,151936 --csv /tmp/x.csv 2>&1 | grep -E "ours|top-k" | sed "s/^/$v r$round $d: /" >> $O/ab.txt
    done
  done
done
cat $O/ab.txt
timeout 150 $B/bin/rejection_cuda_test > $O/rejection_cuda_test.txt 2>&1; echo "rejection_cuda_test rc=$?" >> $O/summary.txt; tail -n 3 $O/rejection_cuda_test.txt >> $O/summary.txt
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $B/bin/rejection_cuda_test --gtest_filter='*FilteredRowsFromWarp*:*TargetShape*' > $O/memcheck.txt 2>&1
echo "memcheck rc=$?" >> $O/summary.txt; tail -n 2 $O/memcheck.txt >> $O/summary.txt
timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $B/bin/rejection_cuda_test --gtest_filter='*TargetShape*' > $O/racecheck.txt 2>&1
echo "racecheck rc=$?" >> $O/summary.txt; tail -n 2 $O/racecheck.txt >> $O/summary.txt
tail -12 $O/summary.txt
