#!/usr/bin/env bash
# Run 2: with the values packed, RowPassRunKernel<bf16> fits 40 registers
# without spilling, so it could run 6 blocks per SM instead of 5 (at 6 it
# had spilled 32-44 bytes). rb_bf42780: the kernels of bf42780 (5 blocks);
# rb_v6b: bf16 runs at 6 (run2-v6b.patch); rb_v6: bf16 and fp16 runs at 6
# (run2-v6.patch; fp16 spills 48 bytes there). Alternating, two rounds; the
# runs-vs-one-chunk crossover at bf16 B=32 with --row-chunks 8; fp32 B=128
# in runs of 2 and 4 (bf42780 only: fp32 takes one-chunk blocks).
# Bundle: the three rejection_bench builds in .gpu-v/bin, .gpu-u's libraries.
# Run: bash bench/sampling/results/2026-11-29-unpack-late/run2.sh .gpu-v $OUT/run2
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$out/machine.txt"
bench() {  # round, binary, args...
  local round=$1 binary=$2
  shift 2
  timeout 60 "$bundle/bin/$binary" --only "$@" --runs 200 --csv /dev/null > "$out/last.txt" 2>&1
  echo "r$round $binary $* | $(grep -E '^(logits|probabilities)' "$out/last.txt" | sed -E 's/ +/ /g' | tr '\n' ' ')"
}
for round in ${ROUNDS:-1 2}; do
  for b in rb_bf42780 rb_v6b rb_v6; do bench "$round" $b logits,128,8,151936 --dtype bf16; done
  for B in 64 48; do for b in rb_bf42780 rb_v6b; do bench "$round" $b logits,$B,8,151936 --dtype bf16; done; done
  for b in rb_bf42780 rb_v6b; do bench "$round" $b logits,32,8,151936 --dtype bf16 --row-chunks 8; done
  bench "$round" rb_bf42780 logits,32,8,151936 --dtype bf16
  for B in 128 64; do for b in rb_bf42780 rb_v6; do bench "$round" $b logits,$B,8,151936 --dtype fp16; done; done
  for n in 2 4; do bench "$round" rb_bf42780 logits,128,8,151936 --row-chunks $n; done
done 2>&1 | tee "$out/ab.txt"
rm -f "$out/last.txt"
