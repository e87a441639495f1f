#!/bin/bash
# Filter as clusters: A/B vs 240af60, slices sweep, parity, sanitizers.
set -u
B=$(cd "$1" && pwd); O=$OUT/r1; mkdir -p $O
export LD_LIBRARY_PATH=$B/lib
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; } > $O/environment.txt 2>&1
$B/bin/rejection_cuda_test --gtest_filter='*Filtered*:*TargetShape*:*TopP*' > $O/parity_filter.txt 2>&1; echo "parity_filter rc=$?" >> $O/summary.txt; tail -n 3 $O/parity_filter.txt >> $O/summary.txt
grep -E "FAILED|Failure|error" $O/parity_filter.txt | head -20 >> $O/summary.txt
for round in 1 2; do
  for v in new old; do
    bin=$B/bin/rejection_bench; [ $v = old ] && bin=$B/bin/rejection_bench_old
    for d in fp32 bf16; do
      $bin --dtype $d --only logits,8,8,151936 --csv /tmp/x.csv 2>&1 | grep -E "ours|top-k" | sed "s/^/$v r$round $d: /" >> $O/ab.txt
    done
  done
  for sl in 1 2 3 4 6 8; do
    $B/bin/rejection_bench --filter-slices $sl --only logits,8,8,151936 --csv /tmp/x.csv 2>&1 | grep -E "top-k" | sed "s/^/new r$round fp32 slices $sl: /" >> $O/ab.txt
  done
done
cat $O/ab.txt
ncu --section SpeedOfLight --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy -k regex:FilterKernel --launch-skip 20 -c 1 $B/bin/rejection_bench --only logits,8,8,151936 --csv /tmp/x.csv > $O/ncu_filter_new.txt 2>&1
ncu --section SpeedOfLight --section MemoryWorkloadAnalysis -k regex:FilterKernel --launch-skip 20 -c 1 $B/bin/rejection_bench_old --only logits,8,8,151936 --csv /tmp/x.csv > $O/ncu_filter_old.txt 2>&1
$B/bin/rejection_cuda_test > $O/rejection_cuda_test.txt 2>&1; echo "rejection_cuda_test rc=$?" >> $O/summary.txt; tail -n 3 $O/rejection_cuda_test.txt >> $O/summary.txt
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $B/bin/rejection_cuda_test --gtest_filter="*FilteredRows*" > $O/memcheck.txt 2>&1
echo "memcheck rc=$?" >> $O/summary.txt; tail -n 2 $O/memcheck.txt >> $O/summary.txt
timeout 100 compute-sanitizer --tool racecheck --error-exitcode 9 $B/bin/rejection_cuda_test --gtest_filter="*FilteredRows*" > $O/racecheck.txt 2>&1
echo "racecheck rc=$?" >> $O/summary.txt; tail -n 2 $O/racecheck.txt >> $O/summary.txt
cat $O/summary.txt
grep -E "Duration|DRAM Throughput|L2 Hit|Memory Throughput|Registers|Achieved Occupancy|Cluster" $O/ncu_filter_new.txt $O/ncu_filter_old.txt
