#!/bin/bash
# Ablation of the filter's phases (SV_FILTER_STOP, experiment build only).
set -u
B=$(cd "$1" && pwd); O=$OUT/r2; mkdir -p $O
export LD_LIBRARY_PATH=$B/lib
for sl in 3 1; do
  for stop in 0 1 2 3 4 6 5 0; do
    SV_FILTER_STOP=$stop $B/bin/rejection_bench --filter-slices $sl --only logits,8,8,151936 --csv /tmp/x.csv 2>&1 | grep -E "top-k" | sed "s/^/slices $sl stop $stop: /" >> $O/ab.txt
  done
done
SV_FILTER_STOP=0 $B/bin/rejection_bench --dtype bf16 --only logits,8,8,151936 --csv /tmp/x.csv 2>&1 | grep -E "top-k" | sed "s/^/bf16 stop 0: /" >> $O/ab.txt
SV_FILTER_STOP=1 $B/bin/rejection_bench --dtype bf16 --only logits,8,8,151936 --csv /tmp/x.csv 2>&1 | grep -E "top-k" | sed "s/^/bf16 stop 1: /" >> $O/ab.txt
cat $O/ab.txt
ncu --section SourceCounters --section WarpStateStats -k regex:FilterKernel --launch-skip 20 -c 1 -o $O/filter $B/bin/rejection_bench --only logits,8,8,151936 --csv /tmp/x.csv > /dev/null 2>&1
ncu -i $O/filter.ncu-rep --page source --csv --print-source sass > $O/filter_sass.csv 2>/dev/null
ncu -i $O/filter.ncu-rep --section WarpStateStats > $O/warpstate.txt 2>&1
gzip $O/filter_sass.csv; rm -f $O/filter.ncu-rep
grep -E "Stall|Warp Cycles" $O/warpstate.txt | head -30
