#!/bin/bash
# Issue #17 item 5 (probabilities) and item 2 (log-probabilities): where the
# race kernel's time goes. GPU side; $1 = the bundle (scripts/gpu-bundle.sh of
# rejection_bench). Writes into $OUT/item5.
set -u
B=$(cd "$1" && pwd); O=$OUT/item5; mkdir -p $O
export LD_LIBRARY_PATH=$B/lib
bench=$B/bin/rejection_bench
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; } > $O/environment.txt 2>&1
# 1. Timings: blocks per SM and vocabulary at B=128, the headline B=8.
for v in 128256 151936 152064; do
  for g in 2 3 4; do
    echo "== probabilities B=128 V=$v blocks_per_sm=$g" >> $O/timing.txt
    $bench --only probabilities,128,8,$v --blocks-per-sm $g --csv $O/t_128_${v}_$g.csv 2>&1 | grep -E "ours" >> $O/timing.txt
  done
done
for s in probabilities,8,8,151936 logprobs,8,8,151936; do
  echo "== $s" >> $O/timing.txt
  $bench --only $s --csv $O/t_${s//,/_}.csv 2>&1 | grep -E "ours" >> $O/timing.txt
done
# 2. Profiles of the race kernel (one launch after warm-up each).
for s in probabilities,8,8,151936 probabilities,128,8,151936 logprobs,8,8,151936; do
  ncu -k regex:AcceptRaceKernel --launch-skip 5 --launch-count 1 \
      --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
      --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
      --section InstructionStats --section SourceCounters \
      $bench --only $s --runs 3 --csv /tmp/ncu_${s//,/_}.csv > $O/ncu_${s//,/_}.txt 2>&1
done
ls -la $O
