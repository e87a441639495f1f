#!/bin/bash
set -u
B=$(cd "$1" && pwd); O=$OUT/r9; mkdir -p $O
export LD_LIBRARY_PATH=$B/lib
ncu --section SourceCounters --section SpeedOfLight --section WarpStateStats --cache-control none --clock-control none -k regex:FilterKernel --launch-skip 20 -c 1 -o $O/filter $B/bin/rejection_bench --only logits,8,8,151936 --csv /tmp/x.csv > /dev/null 2>&1
ncu -i $O/filter.ncu-rep --page source --csv --print-source sass > $O/filter_sass.csv 2>/dev/null
ncu -i $O/filter.ncu-rep --section SpeedOfLight --section WarpStateStats | grep -E "Duration|Throughput|Stall|Cycles Per"
gzip $O/filter_sass.csv; rm -f $O/filter.ncu-rep
