#!/usr/bin/env bash
# Run 1 (H100): the one-chunk row pass (RowPassKernel) at more blocks per SM.
# Variants (experiment macros SV_EXP_F32_BPS / SV_EXP_HALF_BPS in the
# kernel's __launch_bounds__, built with -DCMAKE_CUDA_FLAGS):
#   base = 1bc3dc8 (6 / 6, 40 registers), a = 8 / 8 (32 registers, no
#   spills for fp32 and bf16; fp16 spills 16 B), b = 7 / 7, c = 6 / 8.
# Alternating per shape, two rounds.
# Run (H100): carry .gpu-d
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-d/lib
for round in 1 2; do
  for spec in "logits,8,8,151936" "logits,1,8,151936" "logits,32,8,151936" "logits,8,8,151936 --dtype bf16" "logits,8,8,151936 --dtype fp16" "logits,128,8,151936"; do
    set -- $spec
    for v in rejection_bench_base rejection_bench_a rejection_bench_b rejection_bench_c; do
      printf '%-22s round %d %-34s ' "$v" "$round" "$spec"
      .gpu-d/bin/$v --only "$1" "${@:2}" --runs 200 --csv /dev/null | grep -E "ours median" | sed -E 's/ +/ /g; s/\| launch.*//'
    done
  done
done > "$OUT/run1-ab.txt" 2>&1
cat "$OUT/run1-ab.txt"
