#!/usr/bin/env bash
# Run 9: race blocks per SM (--blocks-per-sm 1/2/3; 3 takes the kernel
# compiled for 3, 80 registers) for exact logits at B = 8 and 32, fp32 and
# bf16, head 95b94da, two rounds: does the logits race, ~14 us of B=8's
# 53, prefer more, smaller shares than the probabilities' plan?
# Bundle: .gpu-f (95b94da's rejection_bench). Run (H100): carry .gpu-f
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-f/lib
for round in 1 2; do
  for spec in "logits,8,8,151936 fp32" "logits,8,8,151936 bf16" "logits,32,8,151936 fp32"; do
    set -- $spec
    for bps in 2 3 1; do
      printf 'round %d %-26s bps %d ' "$round" "$spec" "$bps"
      .gpu-f/bin/rejection_bench --only "$1" --dtype "$2" --blocks-per-sm $bps --runs 200 --csv /dev/null 2>/dev/null | grep -E "ours median" | sed -E 's/ +/ /g; s/\| launch.*//'
    done
  done
done > "$OUT/run9-bps.txt" 2>&1
cat "$OUT/run9-bps.txt"
