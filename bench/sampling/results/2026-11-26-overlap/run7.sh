#!/bin/bash
# Run 7: the row pass lets its dependent (combine) grid launch at its start.
# NEW = bin/rejection_bench, OLD = bin/rejection_bench_old (ed32004), alternating, 2 rounds.
set -u
B=$(cd "$1" && pwd); O=$OUT; mkdir -p $O
export LD_LIBRARY_PATH=$B/lib
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; } > $O/environment.txt 2>&1
for round in 1 2; do for v in new old; do
  bin=$B/bin/rejection_bench; [ $v = old ] && bin=$B/bin/rejection_bench_old
  for dt in fp32 bf16; do for b in 1 8 32 128; do
    timeout 120 $bin --dtype $dt --only logits,$b,8,151936 --csv /tmp/x.csv 2>&1 | grep -E "ours|top-k" | sed "s/^/$v r$round $dt: /" >> $O/ab.txt
  done; done
  timeout 60 $bin --only probabilities,8,8,151936 --csv /tmp/x.csv 2>&1 | grep -E "ours" | sed "s/^/$v r$round fp32: /" >> $O/ab.txt
done; done
sed 's/gamma=8 V=151936 //; s/| launch.*//; s/copies=[0-9]* *//; s/p95 [ 0-9.]*|/|/' $O/ab.txt
timeout 400 $B/bin/rejection_cuda_test > $O/tests.txt 2>&1; echo "rejection_cuda_test rc=$?"; tail -n 1 $O/tests.txt
timeout 300 compute-sanitizer --tool racecheck --error-exitcode 9 $B/bin/rejection_cuda_test --gtest_filter='*OwnSequences*:*TopPBoundaries*:*GreedyFiltered*' > $O/racecheck.txt 2>&1
echo "racecheck rc=$?"; tail -n 1 $O/racecheck.txt
timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 $B/bin/rejection_cuda_test --gtest_filter='*OwnSequences*:*BadValues*:*Graph*' > $O/memcheck.txt 2>&1
echo "memcheck rc=$?"; tail -n 1 $O/memcheck.txt
