#!/bin/bash
set -u
B=$(cd "$1" && pwd); O=$OUT/fix; mkdir -p $O
export LD_LIBRARY_PATH=$B/lib
timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $B/bin/rejection_cuda_test --gtest_filter="*TopPBoundaries*:*TargetShape*:*GreedyFiltered*" > $O/racecheck.txt 2>&1; echo "racecheck rc=$?"; tail -n 1 $O/racecheck.txt
timeout 100 $B/bin/rejection_cuda_test > $O/rejection_cuda_test.txt 2>&1; echo "rejection_cuda_test rc=$?"; tail -n 1 $O/rejection_cuda_test.txt
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $B/bin/rejection_cuda_test --gtest_filter='*Filtered*:*TopP*' > $O/memcheck.txt 2>&1; echo "memcheck rc=$?"; tail -n 1 $O/memcheck.txt
for v in new c848; do
  bin=$B/bin/rejection_bench_$v; [ $v = new ] && bin=$B/bin/rejection_bench
  for a in "--top-k 50 --top-p 0.9" "--top-k 1000 --top-p 0.5"; do
    timeout 60 $bin $a --only logits,8,8,151936 --csv /tmp/x.csv 2>&1 | grep -E "top-k" | sed "s/^/$v ($a): /"
  done
  timeout 60 $bin --dtype bf16 --only logits,8,8,151936 --csv /tmp/x.csv 2>&1 | grep -E "top-k" | sed "s/^/$v bf16: /"
done
