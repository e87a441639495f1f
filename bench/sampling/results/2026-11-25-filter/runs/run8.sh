#!/bin/bash
set -u
B=$(cd "$1" && pwd); O=$OUT/r8; mkdir -p $O
export LD_LIBRARY_PATH=$B/lib
for d in fp32 bf16; do
  for stop in 1 2 4 5 6 0; do
    SV_FILTER_STOP=$stop $B/bin/rejection_bench_stop --dtype $d --only logits,8,8,151936 --csv /tmp/x.csv 2>&1 | grep -E "top-k" | sed "s/^/$d stop $stop: /" >> $O/ab.txt
  done
done
for sl in 1 2; do
  $B/bin/rejection_bench --filter-slices $sl --only logits,8,8,151936 --csv /tmp/x.csv 2>&1 | grep -E "top-k" | sed "s/^/fp32 slices $sl: /" >> $O/ab.txt
done
cat $O/ab.txt
nsys profile -o $O/tl --force-overwrite true $B/bin/rejection_bench --only logits,8,8,151936 --runs 200 --csv /tmp/x.csv > /dev/null 2>&1
nsys stats --report cuda_gpu_trace --format csv $O/tl.nsys-rep 2>/dev/null | tail -40 | cut -d, -f1,2,9 > $O/trace_tail.csv
cat $O/trace_tail.csv | tail -20
rm -f $O/tl.nsys-rep $O/tl.sqlite
