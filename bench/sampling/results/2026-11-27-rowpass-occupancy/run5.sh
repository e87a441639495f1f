#!/usr/bin/env bash
# Run 5 (H100): the runs-of-chunks crossover after 8754f80 (one-chunk
# blocks of 16-bit rows now 8 per SM): bf16 logits at B = 16, 24, 32, 64
# with --row-chunks 1 (one-chunk) and 8 (runs), two rounds. The launcher
# takes runs from 16 waves of 6 blocks per SM (B >= 20 at gamma 8).
# Build: scripts/gpu-bundle.sh build-gpu .gpu-d rejection_bench (at 8754f80's kernels)
# Run (H100): carry .gpu-d
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-d/lib
for round in 1 2; do
  for b in 16 24 32 64; do
    for rc in 1 8; do
      printf 'round %d B=%-3d row-chunks %d  ' "$round" "$b" "$rc"
      .gpu-d/bin/rejection_bench --only "logits,$b,8,151936" --dtype bf16 --row-chunks $rc --runs 200 --csv /dev/null | grep -E "ours median" | sed -E 's/ +/ /g; s/\| launch [0-9.]+ us //'
    done
  done
done > "$OUT/run5-crossover.txt" 2>&1
cat "$OUT/run5-crossover.txt"
