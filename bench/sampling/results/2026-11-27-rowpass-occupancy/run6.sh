#!/usr/bin/env bash
# Run 6 (H100): RowPassRunKernel (16-bit rows from B ~ 20, runs of 8
# chunks) at 4 blocks per SM (64 registers, no spills) against 5 (48
# registers, 16-28 B spilled; c573b29), alternating, two rounds.
# Run (H100): carry .gpu-d
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-d/lib
for round in 1 2; do
  for spec in "logits,32,8,151936 --dtype bf16" "logits,64,8,151936 --dtype bf16" "logits,128,8,151936 --dtype bf16" "logits,32,8,151936 --dtype fp16"; do
    set -- $spec
    for v in rejection_bench_base rejection_bench_r4; do
      printf '%-22s round %d %-34s ' "$v" "$round" "$spec"
      .gpu-d/bin/$v --only "$1" "${@:2}" --runs 200 --csv /dev/null | grep -E "ours median" | sed -E 's/ +/ /g; s/\| launch [0-9.]+ us //'
    done
  done
done > "$OUT/run6-ab.txt" 2>&1
cat "$OUT/run6-ab.txt"
