#!/usr/bin/env bash
# Run 2 (H100): the library's SpeculativePackKernel (47 registers: 5 blocks
# per SM, so the stress point's 1,024 blocks take 1.55 waves) with
# __launch_bounds__ minimum 6 (40 registers, 36 B spilled) and 8 (32
# registers, 68 B spilled), against the committed kernel, in the
# cluster_variants harness (lib_prefix_first = the committed two-launch
# path with that pack kernel). cv_base is built with -I of a caeeac5
# worktree, cv_6 / cv_8 with -DSV_EXP_SPEC_BPS=6 / 8 (experiment macro).
# Run (H100): carry .gpu-g
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-g/lib
for round in 1 2; do
  for v in cv_base cv_6 cv_8; do
    for a in 0.9 0.6; do
      echo "== $v alpha $a round $round"
      timeout 100 .gpu-g/bin/$v 32 128 $a 1 | grep -E "memcpy_packed|given|lib_prefix|cluster kernel" 
    done
  done
done > "$OUT/run2-lib.txt" 2>&1
cat "$OUT/run2-lib.txt"
