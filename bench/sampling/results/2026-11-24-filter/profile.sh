#!/bin/bash
# Issue #17 item 3: where the top-k/top-p filter kernel's time goes (ncu, one
# launch after warm-up), fp32 logits B=8, gamma=8, V=151,936, top-k 50 +
# top-p 0.9. GPU side; $1 = a bundle with rejection_bench.
set -u
B=$(cd "$1" && pwd); O=$OUT/filter; mkdir -p $O
export LD_LIBRARY_PATH=$B/lib
ncu -k regex:FilterKernel --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
    --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section Occupancy \
    --section InstructionStats --section SourceCounters --section LaunchStats \
    $B/bin/rejection_bench --only logits,8,8,151936 --runs 5 --csv /tmp/x.csv > $O/ncu_filter.txt 2>&1
ncu -k regex:RowPassKernel --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy \
    $B/bin/rejection_bench --only logits,8,8,151936 --runs 5 --csv /tmp/x.csv > $O/ncu_rowpass.txt 2>&1
