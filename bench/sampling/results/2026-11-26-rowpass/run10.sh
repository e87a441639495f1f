#!/bin/bash
# Issue #17 item 1, 2026-11-26, H100: the final launcher (runs of 8 chunks for
# 16-bit logits passes of >= 16 waves, else the unchanged one-chunk kernel)
# against ed32004 (bin/rejection_bench_old), alternating, two rounds; then the
# parity suite, memcheck and racecheck.
# Build here: cmake --build build-gpu --target rejection_bench rejection_cuda_test
#             scripts/gpu-bundle.sh build-gpu .gpu-rp10 rejection_bench rejection_cuda_test
#             cp <ed32004's build>/bench/rejection_bench .gpu-rp10/bin/rejection_bench_old
set -u
B=$(cd "$1" && pwd); O=$OUT; mkdir -p $O
export LD_LIBRARY_PATH=$B/lib
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; } > $O/environment.txt 2>&1
for round in 1 2; do for v in new old; do
  bin=$B/bin/rejection_bench; [ $v = old ] && bin=$B/bin/rejection_bench_old
  for dt in bf16 fp16; do for b in 8 32 64 128; do
    timeout 120 $bin --dtype $dt --only logits,$b,8,151936 --csv /tmp/x.csv 2>&1 | grep -E "ours" | sed "s/^/$v r$round $dt: /" >> $O/ab.txt
  done; done
  for b in 1 8 128; do
    timeout 120 $bin --only logits,$b,8,151936 --csv /tmp/x.csv 2>&1 | grep -E "ours" | sed "s/^/$v r$round fp32: /" >> $O/ab.txt
  done
  timeout 120 $bin --dtype bf16 --only logits,8,8,151936 --csv /tmp/x.csv 2>&1 | grep -E "top-k" | sed "s/^/$v r$round bf16: /" >> $O/ab.txt
done; done
sed 's/gamma=8 V=151936 //; s/copies=[0-9]* *//; s/p95 [ 0-9.]*|/|/; s/| launch [0-9.]* us//' $O/ab.txt
timeout 400 $B/bin/rejection_cuda_test > $O/tests.txt 2>&1; echo "rejection_cuda_test rc=$?"; tail -n 1 $O/tests.txt
timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 $B/bin/rejection_cuda_test --gtest_filter='*RowPassRuns*:*OwnSequences*:*BadValues*' > $O/memcheck.txt 2>&1
echo "memcheck rc=$?"; tail -n 1 $O/memcheck.txt
timeout 300 compute-sanitizer --tool racecheck --error-exitcode 9 $B/bin/rejection_cuda_test --gtest_filter='*RowPassRuns*:*GreedyFiltered*' > $O/racecheck.txt 2>&1
echo "racecheck rc=$?"; tail -n 1 $O/racecheck.txt
