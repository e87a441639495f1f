#!/bin/bash
# Issue #17 item 1, 2026-11-26: row-pass blocks taking runs of consecutive
# chunks of one row. $1 = bundle: bin/rejection_bench (NEW, 6 blocks/SM),
# bin/rb_b5 (NEW built with -DSV_ROW_PASS_BLOCKS_PER_SM=5), bin/rejection_bench_old
# (ed32004), bin/rejection_cuda_test. Sweeps --row-chunks; two rounds.
set -u
B=$(cd "$1" && pwd); O=$OUT; mkdir -p $O
export LD_LIBRARY_PATH=$B/lib
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; } > $O/environment.txt 2>&1
timeout 300 $B/bin/rejection_cuda_test --gtest_filter='*RowPassRuns*:*OwnSequences*:*TargetShape*:*BadValues*' > $O/tests.txt 2>&1
echo "tests rc=$?"; grep -E "^\[  (FAILED|PASSED)|tests ran" $O/tests.txt | head
run() { # label binary dtype b [--row-chunks n]
  local l=$1 bin=$2 dt=$3 b=$4; shift 4
  timeout 120 $B/bin/$bin --dtype $dt --only logits,$b,8,151936 --csv /tmp/x.csv "$@" 2>&1 | grep -E "ours" | sed "s/^/$l $dt: /" >> $O/sweep.txt
}
for round in 1 2; do
  for dt in fp32 bf16; do
    run "old r$round" rejection_bench_old $dt 8
    for c in 1 2 3 4 8; do run "new c$c r$round" rejection_bench $dt 8 --row-chunks $c; run "b5 c$c r$round" rb_b5 $dt 8 --row-chunks $c; done
    for b in 1 32 128; do
      run "old r$round" rejection_bench_old $dt $b
      for c in 1 4 8; do run "new c$c r$round" rejection_bench $dt $b --row-chunks $c; run "b5 c$c r$round" rb_b5 $dt $b --row-chunks $c; done
    done
  done
done
sed 's/gamma=8 V=151936 //; s/copies=[0-9]* *//; s/p95 [ 0-9.]*|/|/; s/| launch [0-9.]* us//' $O/sweep.txt | sort -k3,3 -k4,4 -k5,5 -k1,2 | awk '{print}' > $O/sweep-sorted.txt
cat $O/sweep-sorted.txt
