#!/usr/bin/env bash
# Run 4 (H100): blocks per sequence G forced past one wave (experiment hook
# SPECVERIFY_EXP_G in RejectionRaceBlocksPerSequence, not committed): do
# short race blocks, scheduled in sequence order like the read floor's
# short-block layout, stream faster than G=2 long ones? probabilities B=128
# and B=32; the unmodified 1bc3dc8 binary first.
# Run (H100): carry .gpu-d
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-d/lib
one() { .gpu-d/bin/$1 --only "probabilities,$2,8,151936" --runs 200 --csv /dev/null | grep -E "ours median" | sed -E 's/ +/ /g; s/\| launch.*//'; }
for round in 1 2; do
  printf 'base        '; one rejection_bench_base 128
  for g in 2 4 8 19 38 64; do printf 'G=%-8s  ' $g; SPECVERIFY_EXP_G=$g one rejection_bench_g 128; done
  printf 'base        '; one rejection_bench_base 32
  for g in 8 16 38 76; do printf 'G=%-8s  ' $g; SPECVERIFY_EXP_G=$g one rejection_bench_g 32; done
done > "$OUT/run4-g.txt" 2>&1
cat "$OUT/run4-g.txt"
