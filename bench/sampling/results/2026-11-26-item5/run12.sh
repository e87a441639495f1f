#!/usr/bin/env bash
# The 2-blocks-per-SM plan past B=128 (a42d7a6, H100): probabilities and
# log-probabilities at B=256 and 512 (G=1: several waves), 2 against 3
# race blocks per SM, alternating, two rounds.
# Run (H100): carry .gpu-final
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-final/lib
for round in 1 2; do
  for s in probabilities,256 probabilities,512 logprobs,512; do
    for bps in 2 3; do
      printf 'round %d bps %d  ' "$round" "$bps"
      .gpu-final/bin/rejection_bench --only "$s,8,151936" --blocks-per-sm $bps --runs 200 --csv /dev/null | grep "ours median"
    done
  done
done > "$OUT/run12-bps.txt" 2>&1
awk '{for(i=1;i<=NF;i++){if($i=="median") m=$(i+1); if($i=="floor") f=$(i+1)}; print $2, $4, $5, $6, m, f}' "$OUT/run12-bps.txt"
