#!/bin/bash
# Issue #17 item 1, 2026-11-26: the overlapped logits race. GPU side; $1 =
# the bundle (bin/rejection_bench = NEW, bin/rejection_bench_old = ed32004,
# bin/rejection_cuda_test), $2 = what to run: tests | bench | all.
# Build here:  cmake --build build-gpu --target rejection_bench rejection_cuda_test
#              scripts/gpu-bundle.sh build-gpu .gpu-ov rejection_bench rejection_cuda_test
#              cp <ed32004's build>/bench/rejection_bench .gpu-ov/bin/rejection_bench_old
set -u
B=$(cd "$1" && pwd); O=$OUT; mkdir -p $O
export LD_LIBRARY_PATH=$B/lib
what=${2:-all}
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; } > $O/environment.txt 2>&1
if [ $what = tests ] || [ $what = all ]; then
  timeout 300 $B/bin/rejection_cuda_test --gtest_filter='*Overlapped*:*TargetShape*:*Graph*:*OwnSequences*' > $O/tests-new.txt 2>&1
  echo "overlap tests rc=$?"; grep -E "^\[  (FAILED|PASSED)|tests ran" $O/tests-new.txt | head -20
fi
if [ $what = bench ] || [ $what = all ]; then
  for round in 1 2; do
    for v in new old; do
      bin=$B/bin/rejection_bench; [ $v = old ] && bin=$B/bin/rejection_bench_old
      for dt in fp32 bf16; do
        for b in 1 8 32 128; do
          timeout 120 $bin --dtype $dt --only logits,$b,8,151936 --csv /tmp/x.csv 2>&1 | grep -E "ours|three-launch|top-k" | sed "s/^/$v r$round $dt: /" >> $O/ab.txt
        done
      done
      timeout 60 $bin --only probabilities,8,8,151936 --csv /tmp/x.csv 2>&1 | grep -E "ours" | sed "s/^/$v r$round fp32: /" >> $O/ab.txt
    done
  done
  sed 's/gamma=8 V=151936 //; s/| launch.*//; s/copies=[0-9]* *//' $O/ab.txt
fi
if [ $what = all ]; then
  timeout 400 $B/bin/rejection_cuda_test > $O/tests-all.txt 2>&1; echo "all tests rc=$?"; tail -n 3 $O/tests-all.txt
  timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 $B/bin/rejection_cuda_test --gtest_filter='*Overlapped*:*Graph*' > $O/memcheck.txt 2>&1
  echo "memcheck rc=$?"; tail -n 2 $O/memcheck.txt
  timeout 300 compute-sanitizer --tool racecheck --error-exitcode 9 $B/bin/rejection_cuda_test --gtest_filter='*OverlappedRaceLeaves*' > $O/racecheck.txt 2>&1
  echo "racecheck rc=$?"; tail -n 2 $O/racecheck.txt
fi
