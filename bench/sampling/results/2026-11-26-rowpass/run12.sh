#!/bin/bash
# (run 13: the faster of whole-row and short-slice layouts; run 12: short slices only)
# 2026-11-26, H100: the benchmark's read-floor kernel, short blocks with 8
# loads in flight per thread (NEW, bin/rejection_bench) against the one-block-
# per-row floor of ed32004 (bin/rejection_bench_old); each process also
# times our kernels, so both columns are printed. Two rounds. Bundle as run10.sh's.
set -u
B=$(cd "$1" && pwd); O=$OUT; mkdir -p $O
export LD_LIBRARY_PATH=$B/lib
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $O/environment.txt 2>&1
for round in 1 2; do for v in new old; do
  bin=$B/bin/rejection_bench; [ $v = old ] && bin=$B/bin/rejection_bench_old
  for s in logits,1,8,151936 logits,8,8,151936 logits,32,8,151936 logits,128,8,151936 probabilities,8,8,151936 probabilities,128,8,151936 logprobs,8,8,151936; do
    timeout 120 $bin --only $s --csv /tmp/x.csv 2>&1 | grep -E "ours" | sed "s/^/$v r$round fp32: /" >> $O/ab.txt
  done
  for b in 8 128; do
    timeout 120 $bin --dtype bf16 --only logits,$b,8,151936 --csv /tmp/x.csv 2>&1 | grep -E "ours" | sed "s/^/$v r$round bf16: /" >> $O/ab.txt
  done
done; done
sed 's/gamma=8 V=151936 //; s/copies=[0-9]* *//; s/p95 [ 0-9.]*|/|/; s/| launch [0-9.]* us//' $O/ab.txt
