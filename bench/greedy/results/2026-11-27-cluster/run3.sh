#!/usr/bin/env bash
# Run 3 (H100): SpeculativePackKernel staging its tile in shared memory with
# cp.async instead of registers (32 registers, no spills, 17.3 KB of shared
# memory: 8 blocks per SM, the stress point's 1,024 blocks in one wave)
# against the committed kernel (47 registers, 5 blocks per SM), in the
# cluster_variants harness. cv_base: -I a caeeac5 worktree; cv_smem: -I the
# working tree with the change.
# Run (H100): carry .gpu-g
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-g/lib
for round in 1 2; do
  for v in cv_base cv_smem; do
    for a in 0.9 0.6; do
      echo "== $v alpha $a round $round"
      timeout 100 .gpu-g/bin/$v 32 128 $a 1 | grep -E "memcpy_packed|given|lib_prefix"
    done
  done
done > "$OUT/run3-lib.txt" 2>&1
cat "$OUT/run3-lib.txt"
