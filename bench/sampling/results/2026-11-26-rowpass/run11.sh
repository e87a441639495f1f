#!/bin/bash
# Issue #17 item 1, 2026-11-26, H100: filtered (top-k 50 + top-p 0.9) bf16
# logits at B = 32 and 128, whose row pass now takes runs of 8 chunks,
# against ed32004 (bin/rejection_bench_old), alternating, two rounds.
# Bundle as run10.sh's.
set -u
B=$(cd "$1" && pwd); O=$OUT; mkdir -p $O
export LD_LIBRARY_PATH=$B/lib
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $O/environment.txt 2>&1
for round in 1 2; do for v in new old; do
  bin=$B/bin/rejection_bench; [ $v = old ] && bin=$B/bin/rejection_bench_old
  for b in 32 128; do
    timeout 120 $bin --dtype bf16 --only logits,$b,8,151936 --csv /tmp/x.csv 2>&1 | grep -E "top-k" | sed "s/^/$v r$round bf16: /" >> $O/ab.txt
  done
done; done
cat $O/ab.txt
