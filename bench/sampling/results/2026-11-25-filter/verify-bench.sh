#!/bin/bash
# Issue #17 item 3, 2026-11-25: NEW (HEAD's rejection_bench) against OLD
# (240af60's kernels and benchmark, the session's start, with only the
# benchmark's --top-k / --top-p options patched in; copied in as
# bin/rejection_bench_old), alternating, two rounds, each shape in a fresh
# process; then NEW alone at B=128.
set -u
B=$(cd "$1" && pwd); O=$OUT/bench; mkdir -p $O
export LD_LIBRARY_PATH=$B/lib
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; } > $O/environment.txt 2>&1
for round in 1 2; do
  for v in new old; do
    bin=$B/bin/rejection_bench; [ $v = old ] && bin=$B/bin/rejection_bench_old
    for s in logits,1,8,151936 logits,8,8,151936 logits,32,8,151936 probabilities,8,8,151936; do
      $bin --only $s --csv /tmp/x.csv 2>&1 | grep -E "ours|top-k" | sed "s/^/$v round $round fp32: /" >> $O/ab.txt
    done
    for d in bf16 fp16; do
      $bin --dtype $d --only logits,8,8,151936 --csv /tmp/x.csv 2>&1 | grep -E "ours|top-k" | sed "s/^/$v round $round $d: /" >> $O/ab.txt
    done
    for a in "--top-k 0 --top-p 0.9" "--top-k 3000 --top-p 1" "--top-k 1000 --top-p 0.5"; do
      $bin $a --only logits,8,8,151936 --csv /tmp/x.csv 2>&1 | grep -E "top-k" | sed "s/^/$v round $round fp32 ($a): /" >> $O/ab.txt
    done
  done
done
$B/bin/rejection_bench --only logits,128,8,151936 --csv /tmp/x.csv 2>&1 | grep -E "ours|top-k" | sed "s/^/new fp32: /" >> $O/new_only.txt
sed 's/gamma=8 V=151936 //; s/| launch.*//; s/copies=[0-9]* *//; s/p95 [ 0-9.]*|/|/' $O/ab.txt
cat $O/new_only.txt
