#!/bin/bash
set -u
B=$(cd "$1" && pwd); O=$OUT/r4; mkdir -p $O
export LD_LIBRARY_PATH=$B/lib
for round in 1 2; do
  for stop in 1 2 3 4 5 6 0; do
    SV_FILTER_STOP=$stop $B/bin/rejection_bench_stop --only logits,8,8,151936 --csv /tmp/x.csv 2>&1 | grep -E "top-k" | sed "s/^/r$round stop $stop: /" >> $O/ab.txt
  done
done
cat $O/ab.txt
ncu --section SpeedOfLight -k regex:"FilterKernel|AcceptRace|RowPass|Combine|Finalize" --launch-skip 60 -c 10 $B/bin/rejection_bench --only logits,8,8,151936 --csv /tmp/x.csv > $O/ncu.txt 2>&1
grep -E "^  [a-zA-Z_].*\(|Duration" $O/ncu.txt | sed 's/(specverify[^)]*)//' | cut -c1-120
