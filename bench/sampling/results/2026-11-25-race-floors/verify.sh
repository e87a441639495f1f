#!/bin/bash
# Issue #17, 2026-11-25: the kernels at the end of the session (NEW, HEAD)
# against the session's starting point (OLD, 8b0148d's rejection_bench),
# alternating, two rounds, every shape in a fresh process; then the sampling
# suites, memcheck and racecheck on NEW. GPU side; $1 = the bundle:
#   bin/rejection_bench (NEW), bin/rejection_bench_old (OLD), the test binaries.
# Build here: cmake --build build --target rejection_bench rejection_cuda_test
#   rejection_stats_test rejection_reference_test sampling_math_test sampled_server_test
# then scripts/gpu-bundle.sh build .gpu-verify <those targets>, copy OLD's
# bench in as bin/rejection_bench_old and this script in, and run
#   bash .gpu-verify/verify.sh .gpu-verify    (about 6 minutes on an H100)
set -u
B=$(cd "$1" && pwd); O=$OUT/verify; mkdir -p $O
export LD_LIBRARY_PATH=$B/lib
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; } > $O/environment.txt 2>&1
fp32_shapes="probabilities,8,8,151936 probabilities,128,8,151936 logprobs,8,8,151936 logprobs,32,8,151936 logprobs,128,8,151936 logits,1,8,151936 logits,8,8,151936 logits,32,8,151936 logits,128,8,151936"
bf16_shapes="logits,1,8,151936 logits,8,8,151936 logits,32,8,151936 logits,128,8,151936"
for round in 1 2; do
  for v in new old; do
    bin=$B/bin/rejection_bench; [ $v = old ] && bin=$B/bin/rejection_bench_old
    for s in $fp32_shapes; do
      $bin --only $s --csv /tmp/x.csv 2>&1 | grep -E "ours|top-k" | sed "s/^/$v round $round fp32: /" >> $O/ab.txt
    done
    for s in $bf16_shapes; do
      $bin --dtype bf16 --only $s --csv /tmp/x.csv 2>&1 | grep -E "ours|top-k" | sed "s/^/$v round $round bf16: /" >> $O/ab.txt
    done
    $bin --dtype fp16 --only logits,8,8,151936 --csv /tmp/x.csv 2>&1 | grep -E "ours|top-k" | sed "s/^/$v round $round fp16: /" >> $O/ab.txt
  done
done
for t in rejection_cuda_test rejection_stats_test rejection_reference_test sampling_math_test sampled_server_test; do
  $B/bin/$t > $O/$t.txt 2>&1; echo "$t rc=$?" >> $O/summary.txt; tail -n 1 $O/$t.txt >> $O/summary.txt
done
compute-sanitizer --tool memcheck --error-exitcode 9 $B/bin/rejection_cuda_test > $O/memcheck.txt 2>&1
echo "memcheck rc=$?" >> $O/summary.txt; tail -n 1 $O/memcheck.txt >> $O/summary.txt
compute-sanitizer --tool racecheck --error-exitcode 9 $B/bin/rejection_cuda_test \
  --gtest_filter='*OwnSequences*:*AcrossTheGrid*:*TopPBoundaries*:*GreedyFiltered*' > $O/racecheck.txt 2>&1
echo "racecheck rc=$?" >> $O/summary.txt; tail -n 1 $O/racecheck.txt >> $O/summary.txt
sed 's/gamma=8 V=151936 //; s/| launch.*//; s/copies=[0-9]* *//; s/p95 [ 0-9.]*|/|/' $O/ab.txt
cat $O/summary.txt
