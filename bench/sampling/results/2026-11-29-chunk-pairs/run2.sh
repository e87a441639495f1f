#!/usr/bin/env bash
# Run 2: with pairs in the runs kernel, where do runs start to beat one-chunk
# blocks on 16-bit rows? The same build as run 1 (697ed56's kernels), bf16
# logits at B = 8, 32 and 48 with --row-chunks 1 (RowPassKernel), 2, 4 and 8
# (RowPassRunKernel), two rounds. The launcher takes runs of 8 from B = 59.
# Run: bash bench/sampling/results/2026-11-29-chunk-pairs/run2.sh .gpu-p $OUT/run2
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$out/machine.txt"
for round in 1 2; do
  for b in 8 32 48; do
    for chunks in 1 2 4 8; do
      echo "r$round B=$b row-chunks $chunks | $(timeout 60 "$bundle/bin/rejection_bench" --only "logits,$b,8,151936" --dtype bf16 \
        --row-chunks $chunks --runs 200 --csv /dev/null 2>&1 | grep -E '^logits_bf16 +B' | head -1 |
        sed -E 's/ +/ /g; s/ p95 [0-9.]+//g; s/G=[0-9]+ copies=[0-9]+ //; s/ \| launch [0-9.]+ us//')"
    done
  done
done 2>&1 | tee "$out/ab.txt"
