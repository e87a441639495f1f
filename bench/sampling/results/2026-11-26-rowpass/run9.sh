#!/bin/bash
# Issue #17 item 1, 2026-11-26, on the H100: RowPassRunKernel (runs of
# --row-chunks N chunks per block, 5 blocks/SM; N=1 is the unchanged
# RowPassKernel) swept against ed32004 (bin/rejection_bench_old), two rounds;
# then the parity suite and the sanitizers on the run kernel's tests.
# $1 = bundle: bin/rejection_bench, bin/rejection_bench_old, bin/rejection_cuda_test.
set -u
B=$(cd "$1" && pwd); O=$OUT; mkdir -p $O
export LD_LIBRARY_PATH=$B/lib
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; } > $O/environment.txt 2>&1
run() { # label binary dtype b [args]
  local l=$1 bin=$2 dt=$3 b=$4; shift 4
  timeout 120 $B/bin/$bin --dtype $dt --only logits,$b,8,151936 --csv /tmp/x.csv "$@" 2>&1 | grep -E "ours" | sed "s/^/$l $dt: /" >> $O/sweep.txt
}
for round in 1 2; do
  for dt in fp32 bf16; do
    for b in 8 32 64 128; do
      run "old r$round" rejection_bench_old $dt $b
      for c in 1 2 4 8; do run "new c$c r$round" rejection_bench $dt $b --row-chunks $c; done
    done
  done
done
sed 's/gamma=8 V=151936 //; s/copies=[0-9]* *//; s/p95 [ 0-9.]*|/|/; s/| launch [0-9.]* us//' $O/sweep.txt | sort -k3,3 -k4,4 -k5,5 -k1,2 > $O/sweep-sorted.txt
cat $O/sweep-sorted.txt
timeout 400 $B/bin/rejection_cuda_test > $O/tests.txt 2>&1; echo "rejection_cuda_test rc=$?"; tail -n 1 $O/tests.txt
timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 $B/bin/rejection_cuda_test --gtest_filter='*RowPassRuns*' > $O/memcheck.txt 2>&1
echo "memcheck rc=$?"; tail -n 1 $O/memcheck.txt
timeout 300 compute-sanitizer --tool racecheck --error-exitcode 9 $B/bin/rejection_cuda_test --gtest_filter='*RowPassRuns*' > $O/racecheck.txt 2>&1
echo "racecheck rc=$?"; tail -n 1 $O/racecheck.txt
