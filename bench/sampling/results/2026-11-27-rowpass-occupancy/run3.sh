#!/usr/bin/env bash
# Run 3 (H100): fp32 one-chunk row pass at 4 and 5 blocks per SM
# (experiment macro SV_EXP_F32_BPS in RowPassBlocksPerSm, not committed)
# against caeeac5 (6), alternating, two rounds.
# Run (H100): carry .gpu-d
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-d/lib
B=.gpu-d/bin
for round in 1 2; do
  for spec in "logits,8,8,151936" "logits,1,8,151936" "logits,32,8,151936"; do
    for v in rejection_bench_base rejection_bench_f4 rejection_bench_f5; do
      printf '%-22s round %d %-22s ' "$v" "$round" "$spec"
      $B/$v --only "$spec" --runs 200 --csv /dev/null | grep -E "ours median" | sed -E 's/ +/ /g; s/\| launch [0-9.]+ us \| row chunks [0-9]+//'
    done
  done
done > "$OUT/run3-ab.txt" 2>&1
cat "$OUT/run3-ab.txt"
