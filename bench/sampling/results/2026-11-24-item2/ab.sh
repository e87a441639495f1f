#!/bin/bash
# Issue #17 item 2 (log-probabilities within 10% of probabilities): the
# residual race with a draft row prunes on p's bound first (NEW) against
# e6a1eaf's kernel (OLD), alternating, three rounds; then the parity suite
# and memcheck on NEW. GPU side; $1 = the bundle.
set -u
B=$(cd "$1" && pwd); O=$OUT/ab2; mkdir -p $O
export LD_LIBRARY_PATH=$B/lib
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; } > $O/environment.txt 2>&1
shapes="probabilities,8,8,151936 logprobs,8,8,151936 logprobs,32,8,151936 logprobs,128,8,151936 logits,8,8,151936"
for round in 1 2 3; do
  for v in new old; do
    bin=$B/bin/rejection_bench; [ $v = old ] && bin=$B/bin/rejection_bench_old
    for s in $shapes; do
      echo "$v round $round: $($bin --only $s --csv /tmp/x.csv 2>&1 | grep -E 'ours')" >> $O/ab.txt
    done
    echo "$v round $round bf16: $($bin --dtype bf16 --only logits,8,8,151936 --csv /tmp/x.csv 2>&1 | grep -E 'ours')" >> $O/ab.txt
  done
done
$B/bin/rejection_cuda_test > $O/rejection_cuda_test.txt 2>&1; echo "rejection_cuda_test rc=$?" >> $O/summary.txt
compute-sanitizer --tool memcheck --error-exitcode 9 $B/bin/rejection_cuda_test > $O/memcheck.txt 2>&1; echo "memcheck rc=$?" >> $O/summary.txt
for f in $O/rejection_cuda_test.txt $O/memcheck.txt; do tail -n 3 $f; done >> $O/summary.txt
