#!/bin/bash
set -u
B=$(cd "$1" && pwd); O=$OUT/r13; mkdir -p $O
export LD_LIBRARY_PATH=$B/lib
for d in fp32 bf16; do
  for stop in 1 2 3 4 5 7 6 0; do
    SV_FILTER_STOP=$stop $B/bin/rejection_bench_stop --dtype $d --only logits,8,8,151936 --csv /tmp/x.csv 2>&1 | grep -E "top-k" | sed "s/^/$d stop $stop: /" >> $O/ab.txt
  done
done
cat $O/ab.txt
