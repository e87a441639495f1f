#!/usr/bin/env bash
# Race blocks per SM at long batches (probabilities, gamma 8, V 151,936), H100:
# base (7e8ccab), all and V1 (run 4's builds). --blocks-per-sm N sets the
# launcher's plan (G = N x 132 / B, one wave).
# Run (H100): carry .gpu-base .gpu-all .gpu-V1
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-base/lib
for round in 1 2; do
  for v in base all V1; do
    for b in 32 64 128; do
      for bps in 1 2 3; do
        printf '%-5s round %d bps %d  ' "$v" "$round" "$bps"
        ".gpu-$v/bin/rejection_bench" --only probabilities,$b,8,151936 --blocks-per-sm $bps --runs 300 --csv /dev/null | grep "ours median"
      done
    done
  done
done > "$OUT/run5-bps.txt" 2>&1
awk '{print $1, $3, $5, $7, $10, $15, $22}' "$OUT/run5-bps.txt"
